"""opkernel-medianpool as a user gets it: its wheel, built from a copy of the sources,
installed into a fresh virtual environment next to the core and the CPU plugin.
The op is found through the entry point and runs, with its gradient; the wheel
carries its snapshot and its entry point.  (About 20 s: three wheels, one venv.)"""

from __future__ import annotations

import shutil
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from test_packaging import ROOT, build_isolation_args, make_venv, run

SOURCES = {".": "opkernel-", "plugins/cpu": "opkernel_cpu-", "examples/median_pool": "opkernel_medianpool-"}

SMOKE = textwrap.dedent(
    """
    import sys
    import numpy as np
    import opkernel as ok

    assert ok.plugin_errors() == [], ok.plugin_errors()
    x = np.arange(32, dtype=np.float32).reshape(1, 4, 8, 1)
    t = ok.tensor(x)
    with ok.GradientTape() as tape:
        tape.watch(t)
        y = ok.ops.addons.median_pool2d(t, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="VALID")
    assert y.numpy()[0, :, :, 0].tolist() == [[9, 10, 11, 12, 13, 14], [17, 18, 19, 20, 21, 22]], y
    assert tape.gradient(y, t).numpy().sum() == 12
    provider = ok.op_def("Addons>MedianPool2D").provider
    assert (provider.plugin, provider.distribution) == ("medianpool", "opkernel-medianpool"), provider
    lib = ok.load_op_library("medianpool")
    assert lib.op_names == ["Addons>MedianPool2D", "Addons>MedianPool2DGrad"]
    assert "pyopencl" not in sys.modules and "cupy" not in sys.modules
    print("median pool package works")
    """
)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("*.egg-info", "build", "dist", "__pycache__", ".*")
    shutil.copytree(ROOT / "core", src / "core", ignore=ignore)  # its package: core/opkernel
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    for sub in SOURCES:
        if sub != ".":
            shutil.copytree(ROOT / sub, src / sub, ignore=ignore)
    out = tmp_path_factory.mktemp("wheels")
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *build_isolation_args(), "-w", out,
        *[src / sub for sub in SOURCES], cwd=src)
    return {sub: next(out.glob(f"{prefix}[0-9]*.whl")) for sub, prefix in SOURCES.items()}


def test_the_wheel_declares_its_entry_point_and_ships_its_snapshot(wheels: dict[str, Path]) -> None:
    with zipfile.ZipFile(wheels["examples/median_pool"]) as wheel:
        names = wheel.namelist()
        entry_points = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
        metadata = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "[opkernel]" in entry_points and "medianpool = opkernel_medianpool" in entry_points
    assert "opkernel_medianpool/ops_snapshot.json" in names
    assert "Requires-Dist: opkernel" in metadata and "numpy" not in metadata.split("Requires-Dist: opkernel")[1].split("\n")[0]


def test_installed_next_to_the_core_and_the_cpu_plugin(wheels: dict[str, Path], tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    run(python, "-m", "pip", "install", "-q", *wheels.values())
    script = tmp_path / "smoke.py"
    script.write_text(SMOKE)
    assert "median pool package works" in run(python, script, cwd=tmp_path)
    kernels = run(python.parent / "opkernel", "kernels", "--op", "Addons>MedianPool2D", cwd=tmp_path)
    assert "opkernel-medianpool" in kernels and "cpu" in kernels
