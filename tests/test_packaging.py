"""The distributions build, install into a fresh virtual environment and find each other.

Wheels of the core, the CPU plugin and the example backend are built from a
copy of the sources (so no build artefacts land in the checkout) and installed
into a new venv; dependencies come from the package index (pip's cache is
allowed).  Then the editable install that ``make install`` uses is checked in
a second venv.  Slow (about half a minute), never skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = {  # directory (relative to the root) -> wheel name prefix
    ".": "opkernel-",
    "plugins/cpu": "opkernel_cpu-",
    "examples/minimal_backend": "opkernel_example_backend-",
}
TIMEOUT = 600



def run(*cmd: str | Path, cwd: Path | None = None, stderr_too: bool = False) -> str:
    """Run ``cmd`` in a clean environment (no OPKERNEL_* settings, no active venv); its stdout
    (and its stderr after it, with ``stderr_too``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPKERNEL_", "PYTHON", "VIRTUAL_ENV"))}
    out = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, check=False, capture_output=True, text=True, timeout=TIMEOUT
    )
    if out.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited with {out.returncode}:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}")
    return out.stdout + out.stderr if stderr_too else out.stdout


#: What setuptools says at an install that a user cannot act on (a deprecated license table, an
#: editable install through an import hook that warns about folders of the package's name).
BUILD_WARNINGS = ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "Please be careful with folders")


def copy_sources(dest: Path) -> Path:
    """The three distributions' sources, without build artefacts or virtual environments."""
    ignore = shutil.ignore_patterns("*.egg-info", "build", "dist", "__pycache__", ".*")
    shutil.copytree(ROOT / "core", dest / "core", ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, dest / name)
    for sub in DISTRIBUTIONS:
        if sub != ".":
            shutil.copytree(ROOT / sub, dest / sub, ignore=ignore)
    return dest


def build_isolation_args() -> list[str]:
    """``--no-build-isolation`` when this interpreter already has what the builds require."""
    try:
        setuptools_major = int(version("setuptools").split(".")[0])
        version("wheel")
    except (PackageNotFoundError, ValueError):
        return []
    return ["--no-build-isolation"] if setuptools_major >= 77 else []  # the pyprojects need >= 77


def make_venv(path: Path) -> Path:
    run(sys.executable, "-m", "venv", path)
    return path / ("Scripts" if os.name == "nt" else "bin") / "python"


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Named as `git clone .../opkernel` names the checkout: test_editable_install runs
    # Python from the folder above it, where most people keep their clones.
    return copy_sources(tmp_path_factory.mktemp("src") / "opkernel")


@pytest.fixture(scope="module")
def wheels(sources: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *build_isolation_args(), "-w", out,
        *[sources / sub for sub in DISTRIBUTIONS], cwd=sources)
    built = {}
    for sub, prefix in DISTRIBUTIONS.items():
        (wheel,) = out.glob(f"{prefix}[0-9]*.whl")
        built[sub] = wheel
    return built


@pytest.fixture(scope="module")
def wheel_venv(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = make_venv(tmp_path_factory.mktemp("venv") / "wheels")
    run(python, "-m", "pip", "install", "-q", *wheels.values())
    return python


# The same check for the installed wheels and the editable install.
SMOKE = textwrap.dedent(
    """
    import numpy as np
    import opkernel as ok
    from opkernel.errors import InvalidArgumentError

    assert ok.available_backends() == ["cpu", "example"], ok.available_backends()
    assert ok.get_backend() == "cpu", "the example backend (priority -10) must never be the default"
    assert ok.plugin_errors() == [], ok.plugin_errors()

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    results = {}
    for name in ok.available_backends():
        with ok.use_backend(name):
            x = ok.tensor(a)
            assert x.backend == name
            product = ok.ops.mat_mul(x, x, transpose_b=True)
            moved = ok.ops.reshape(ok.ops.add(x, ok.ops.ones_like(x)) * 2.0, [3, -1])
            results[name] = (product.numpy(), moved.numpy(), product.shape)
    for product, moved, shape in results.values():
        np.testing.assert_allclose(product, a @ a.T)
        np.testing.assert_allclose(moved, ((a + 1) * 2).reshape(3, 2))
        assert shape == (2, 2)

    with ok.use_backend("example"):
        assert type(ok.tensor([1.0]).value).__name__ == "ExampleArray"
        # a generic kernel, written with ops, serves a backend without a kernel of its own
        ok.register_op("Smoke>Cube").input("x: T").output("y: T").attr("T: {float, double}")
        ok.register_kernel("Smoke>Cube", backend="*")(lambda x, T: x * x * x)
        assert ok.ops.smoke.cube(ok.tensor([1.0, 3.0])).numpy().tolist() == [1.0, 27.0]
        on_cpu = ok.tensor([1.0], backend="cpu")
        try:
            ok.ops.add(on_cpu, on_cpu)
        except InvalidArgumentError as e:
            assert "x.to('example')" in str(e), e
        else:
            raise AssertionError("a tensor on another backend must be an error")
        assert ok.ops.add(on_cpu.to("example"), 1.0).numpy().tolist() == [2.0]
    print("smoke test passed")
    """
)


def test_wheels_hold_every_core_module(wheels: dict[str, Path]) -> None:
    with zipfile.ZipFile(wheels["."]) as wheel:
        names = set(wheel.namelist())
        entry_points = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    expected = {
        "opkernel/" + str(p.relative_to(ROOT / "core" / "opkernel")).replace(os.sep, "/")
        for p in (ROOT / "core" / "opkernel").rglob("*")
        if p.suffix in (".py", ".typed", ".h") and "__pycache__" not in p.parts
    }
    assert sorted(expected - names) == [], "add the missing packages to [tool.setuptools] in pyproject.toml"
    assert "opkernel/include/opkernel/c_api.h" in names, "the C ABI's header installs with the core"
    assert "opkernel = opkernel.cli:main" in entry_points
    assert "opkernel = opkernel.testing.pytest_plugin" in entry_points


@pytest.mark.parametrize("sub, entry_point", [
    ("plugins/cpu", "cpu = opkernel_cpu"),
    ("examples/minimal_backend", "example = opkernel_example_backend"),
])
def test_plugin_wheels_declare_their_entry_point(wheels: dict[str, Path], sub: str, entry_point: str) -> None:
    with zipfile.ZipFile(wheels[sub]) as wheel:
        text = next(wheel.read(n).decode() for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))
    assert "[opkernel]" in text and entry_point in text


def test_installed_wheels_find_each_other(wheel_venv: Path, tmp_path: Path) -> None:
    script = tmp_path / "smoke.py"
    script.write_text(SMOKE)
    assert "smoke test passed" in run(wheel_venv, script, cwd=tmp_path)


def test_console_script(wheel_venv: Path, tmp_path: Path) -> None:
    opkernel = wheel_venv.parent / "opkernel"
    info = run(opkernel, "info", cwd=tmp_path)
    for part in ("opkernel 0.1.0", "opkernel-cpu", "opkernel-example-backend", "example", "-10", "available (active)"):
        assert part in info
    kernels = run(opkernel, "kernels", "--backend", "example", cwd=tmp_path)
    for op in ("Add", "MatMul", "Reshape", "OnesLike"):
        assert op in kernels
    assert "opkernel 0.1.0" in run(wheel_venv, "-m", "opkernel", "--version", cwd=tmp_path)


def test_editable_install(sources: Path, wheels: dict[str, Path], tmp_path: Path) -> None:
    python = make_venv(tmp_path / "editable")
    # As `make install` does: a current pip shows what the build backend says even with -q.
    run(python, "-m", "pip", "install", "-q", "--upgrade", "pip")
    said = run(python, "-m", "pip", "install", "-q", "-e", sources, "-e", sources / "plugins/cpu",
               wheels["examples/minimal_backend"], cwd=sources, stderr_too=True)
    # The other distributions `make install` installs editable, without their dependencies.
    for sub in ("plugins/opencl", "plugins/cuda", "examples/median_pool"):
        shutil.copytree(ROOT / sub, tmp_path / sub, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    said += run(python, "-m", "pip", "install", "-q", "--no-deps", *[a for sub in ("plugins/opencl", "plugins/cuda",
                "examples/median_pool") for a in ("-e", tmp_path / sub)], cwd=tmp_path, stderr_too=True)
    assert not [w for w in BUILD_WARNINGS if w in said], said
    where = run(python, "-c", "import opkernel, opkernel_cpu; print(opkernel.__file__); print(opkernel_cpu.__file__)",
                cwd=tmp_path).split()
    package = sources / "core" / "opkernel"
    assert where == [str(package / "__init__.py"), str(sources / "plugins/cpu/opkernel_cpu/__init__.py")]
    script = tmp_path / "smoke.py"
    script.write_text(SMOKE)
    assert "smoke test passed" in run(python, script, cwd=tmp_path)
    # From the folder holding the checkout (named opkernel, as a clone is), the checkout's folder
    # must not shadow the package as an empty namespace package.
    assert sources.name == "opkernel"
    found = run(python, "-c", "import opkernel as ok; print(ok.__file__); print(ok.set_backend.__name__)",
                cwd=sources.parent).split()
    assert found == [str(package / "__init__.py"), "set_backend"], found
    # an edit to the source tree shows without reinstalling
    (package / "_editable_probe.py").write_text("VALUE = 42\n")
    assert run(python, "-c", "from opkernel._editable_probe import VALUE; print(VALUE)", cwd=tmp_path).strip() == "42"


def test_every_distribution_declares_an_spdx_license() -> None:
    """A TOML-table license (``license = { text = ... }``) is deprecated in setuptools and
    stops building after 2027-02-18; every pyproject in the repository gives an SPDX
    expression, with the setuptools that reads one (77 or later)."""
    import tomllib

    found = sorted(p for p in ROOT.rglob("pyproject.toml") if ".venv" not in p.parts and "build" not in p.parts)
    assert len(found) >= 5
    for path in found:
        data = tomllib.loads(path.read_text())
        assert isinstance(data["project"].get("license"), str), f"{path}: license is not an SPDX string"
        assert not any(c.startswith("License ::") for c in data["project"].get("classifiers", [])), path
        assert any(r.replace(" ", "").startswith("setuptools>=") and int(r.split(">=")[1].split(".")[0]) >= 77
                   for r in data["build-system"]["requires"]), f"{path}: builds need setuptools>=77 for an SPDX license"
