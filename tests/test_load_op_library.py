"""``ok.load_op_library`` (by plugin name, module name or .py file), plugin-API version
ranges, and the packages that missing-op and missing-kernel errors suggest."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from opkernel import engine, kernels, plugins
from opkernel.cli import main as cli
from opkernel.errors import KernelNotFoundError, OpNotFoundError, PluginError
from opkernel.plugins import PluginWarning, api_version_matches

MEDIAN = "Addons>MedianPool2D"
POOL = {"ksize": [1, 3, 3, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}

needs_medianpool = pytest.mark.skipif(
    not any(p.name == "medianpool" for p in plugins.plugins()), reason="pip install -e examples/median_pool"
)

SCRATCH = '''
import opkernel as ok


@ok.hookimpl
def opkernel_register_ops():
    ok.register_op("Scratch>Triple").input("x: T").output("y: T").attr("T: numbertype") \\
        .set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_op("Scratch>Negate").input("x: T").output("y: T").attr("T: numbertype") \\
        .set_shape_fn(ok.shape_fns.unchanged_shape)


@ok.hookimpl
def opkernel_register_kernels():
    ok.register_kernel("Scratch>Triple", backend="*")(lambda x, T: x * 3)
    ok.register_kernel("Scratch>Negate", backend="*")(lambda x, T: ok.ops.neg(x))
'''


# ------------------------------------------------------------------ by name


@needs_medianpool
def test_an_installed_plugin_by_module_or_plugin_name() -> None:
    lib = ok.load_op_library("opkernel_medianpool")  # may load every plugin first (discovery)
    before = len(kernels.all_kernels())
    assert (lib.plugin, lib.distribution) == ("medianpool", "opkernel-medianpool")
    assert lib.op_names == [MEDIAN, "Addons>MedianPool2DGrad"]
    assert {"median_pool2d", "median_pool2d_grad"} <= set(dir(lib))
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    np.testing.assert_array_equal(lib.median_pool2d(x, **POOL).numpy(), [[[[5], [6]], [[9], [10]]]])
    again = ok.load_op_library("medianpool")  # loading again registers nothing
    assert again.op_names == lib.op_names and len(kernels.all_kernels()) == before
    assert ok.ops.addons.median_pool2d(x, **POOL).shape == (1, 2, 2, 1)  # and under its namespace in ok.ops
    assert "opkernel-medianpool" in repr(lib)
    with pytest.raises(AttributeError, match="median_pool2d"):
        lib.max_pool


@needs_medianpool
def test_a_plugin_that_discovery_skipped() -> None:
    code = textwrap.dedent(
        """
        import numpy as np, opkernel as ok
        assert not hasattr(ok.ops, "addons")
        lib = ok.load_op_library("medianpool")
        y = lib.median_pool2d(np.ones((1, 3, 3, 1), np.float32), ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME")
        assert ok.ops.addons.median_pool2d is not None and y.shape == (1, 3, 3, 1)
        assert ok.op_def("Addons>MedianPool2D").provider.distribution == "opkernel-medianpool"
        print("loaded", lib.plugin)
        """
    )
    env = {**os.environ, "OPKERNEL_PLUGINS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "loaded medianpool"


# ------------------------------------------------------------------ files and modules


def test_a_py_file(tmp_path: Path, fresh_registry: None) -> None:
    path = tmp_path / "scratch_ops.py"
    path.write_text(SCRATCH)
    lib = ok.load_op_library(path)
    assert lib.op_names == ["Scratch>Negate", "Scratch>Triple"]
    assert lib.plugin == str(path) and lib.distribution is None
    assert lib.triple([1.0, 2.0]).numpy().tolist() == [3.0, 6.0]
    assert lib.negate([1, -2]).numpy().tolist() == [-1, 2]
    assert ok.load_op_library(str(path)).op_names == lib.op_names  # once
    assert ok.ops.scratch.triple([1]).numpy().tolist() == [3]
    assert ok.op_def("Scratch>Triple").provider.plugin == str(path)


def test_an_importable_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None) -> None:
    (tmp_path / "scratch_module_ops.py").write_text(SCRATCH)
    monkeypatch.syspath_prepend(str(tmp_path))
    lib = ok.load_op_library("scratch_module_ops")
    assert lib.plugin == "scratch_module_ops" and lib.triple([2]).numpy().tolist() == [6]
    assert ok.load_op_library("scratch_module_ops").plugin == "scratch_module_ops"


def test_what_cannot_be_loaded(tmp_path: Path, fresh_registry: None) -> None:
    with pytest.raises(PluginError, match="neither an installed plugin's name, nor an importable module"):
        ok.load_op_library("no_such_op_library_anywhere")
    with pytest.raises(PluginError, match="no such file"):
        ok.load_op_library(tmp_path / "missing.py")
    broken = tmp_path / "broken_ops.py"
    broken.write_text(SCRATCH + "\n@ok.hookimpl\ndef opkernel_register_gradients():\n    raise RuntimeError('boom')\n")
    with pytest.raises(PluginError, match="boom"):
        ok.load_op_library(broken)
    assert not hasattr(ok.ops, "scratch")  # rolled back: nothing left registered
    bad_syntax = tmp_path / "bad_syntax.py"
    bad_syntax.write_text("def (:\n")
    with pytest.raises(PluginError, match="SyntaxError"):
        ok.load_op_library(bad_syntax)


# ------------------------------------------------------------------ plugin API versions


@pytest.mark.parametrize("spec, version, expected", [
    (">=1,<2", 1, True), (">=1,<2", 2, False), (">=2", 1, False), ("1", 1, True), ("==1", 2, False),
    (1, 1, True), (2, 1, False), ("!=1", 1, False), (">0, <=3", 3, True), ("<1", 1, False),
])
def test_api_version_matches(spec: Any, version: int, expected: bool) -> None:
    assert api_version_matches(spec, version) is expected


@pytest.mark.parametrize("spec", ["", "~=1", ">=one", None, True, "1.5"])
def test_malformed_api_specs(spec: Any) -> None:
    with pytest.raises(ValueError):
        api_version_matches(spec, 1)


class ApiPlugin:
    """An op library declaring the plugin-API versions it supports."""

    def __init__(self, api: Any) -> None:
        self.OPKERNEL_PLUGIN_API = api
        self.ran = False

    @ok.hookimpl
    def opkernel_register_ops(self) -> None:
        self.ran = True
        ok.register_op("Api>Probe").input("x: float").output("y: float")


def test_an_incompatible_plugin_is_skipped(fresh_registry: None) -> None:
    plugin = ApiPlugin(">=2,<3")
    with pytest.raises(PluginError, match=r"supports opkernel plugin API >=2,<3, but this opkernel \(0\.1\.0\) has plugin API 1"):
        ok.register_plugin(plugin, name="future-ops")
    assert not plugin.ran and not hasattr(ok.ops, "api")
    assert "future-ops" in str(ok.plugin_errors()[-1])
    compatible = ApiPlugin(f">={ok.PLUGIN_API_VERSION},<{ok.PLUGIN_API_VERSION + 1}")
    ok.register_plugin(compatible, name="current-ops")
    assert compatible.ran


@dataclass
class FakeDist:
    name: str
    version: str


@dataclass
class FakeEntryPoint:
    name: str
    plugin: Any
    dist: FakeDist
    group: str = "opkernel"

    @property
    def value(self) -> str:
        return f"fake_{self.name}"

    def load(self) -> Any:
        return self.plugin


@pytest.fixture
def fake_discovery(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeEntryPoint]]:
    for var in ("OPKERNEL_DISABLE_PLUGIN_AUTOLOAD", "OPKERNEL_PLUGINS", "OPKERNEL_STRICT_PLUGINS", "OPKERNEL_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    eps: list[FakeEntryPoint] = []
    monkeypatch.setattr(plugins, "entry_points", lambda *, group: [e for e in eps if e.group == group])
    plugins._reset_for_tests()
    engine._reset_backends_for_tests()
    yield eps
    monkeypatch.undo()
    plugins._reset_for_tests()
    engine._reset_backends_for_tests()


def test_discovery_skips_an_incompatible_plugin_and_loads_the_rest(fake_discovery: list[FakeEntryPoint]) -> None:
    import opkernel_cpu

    old = ApiPlugin("<1")
    fake_discovery += [
        FakeEntryPoint("cpu", opkernel_cpu, FakeDist("opkernel-cpu", "0.1.0")),
        FakeEntryPoint("oldops", old, FakeDist("opkernel-oldops", "0.3.0")),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = [p.name for p in plugins.plugins()]
    assert names == ["builtin", "cpu"] and not old.ran
    (failure,) = ok.plugin_errors()
    message = str(failure)
    assert "oldops" in message and "opkernel-oldops 0.3.0" in message
    assert "plugin API <1" in message and "has plugin API 1" in message
    assert any(issubclass(w.category, PluginWarning) and "oldops" in str(w.message) for w in caught)
    assert ok.ops.add([1], [2]).numpy().tolist() == [3]


# ------------------------------------------------------------------ suggestions


@needs_medianpool
def test_missing_kernel_names_the_package_that_provides_kernels(fresh_registry: None) -> None:
    snap = kernels.snapshot()
    kernels.restore({key: [k for k in ks if not (k.op == MEDIAN and k.backend != "cpu")] for key, ks in snap.items()})
    ok.register_plugin(TwinLike(), name="twin-like")
    with ok.use_backend("twinlike"), pytest.raises(KernelNotFoundError) as info:
        ok.ops.addons.median_pool2d(np.ones((1, 3, 3, 1), np.float32), **POOL)
    assert "no kernel on backend 'twinlike'" in str(info.value)
    assert "opkernel-medianpool provides kernels for: cpu. To run it on 'cpu' instead" in str(info.value)
    assert str(info.value).endswith("or use `with ok.kernel_fallback('cpu'):`.")
    ok.register_kernel(MEDIAN, backend="elsewhere")(lambda value, **attrs: value)  # by a script: not a package
    with ok.use_backend("twinlike"), pytest.raises(KernelNotFoundError) as info:
        ok.ops.addons.median_pool2d(np.ones((1, 3, 3, 1), np.float32), **POOL)
    assert "opkernel-medianpool provides kernels for: cpu. To run it on 'cpu' instead" in str(info.value)
    assert str(info.value).endswith("or use `with ok.kernel_fallback('cpu'):`.")


def test_missing_op_names_a_known_package(monkeypatch: pytest.MonkeyPatch, fresh_registry: None) -> None:
    from opkernel import _known_packages, library

    known = library.KnownOpPackage("opkernel-fancy", ("Fancy>",), ("cpu", "*"))
    monkeypatch.setattr(_known_packages, "KNOWN_OP_PACKAGES", (*library.KNOWN_OP_PACKAGES, known))
    with pytest.raises(OpNotFoundError, match="provided by the op package opkernel-fancy: pip install opkernel-fancy"):
        ok.op_def("Fancy>Thing")
    # an op whose spec is here but whose kernels come with a package that is not installed
    ok.register_op("Fancy>Thing").input("x: float").output("y: float")
    with pytest.raises(KernelNotFoundError, match="opkernel-fancy provides kernels for: cpu, \\*; pip install opkernel-fancy"):
        ok.execute("Fancy>Thing", [1.0])


class _HostBackend(ok.Backend):
    name = "twinlike"
    priority = -20

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_numpy(self, value: Any) -> np.ndarray:
        return value  # type: ignore[no-any-return]


class TwinLike:
    @ok.hookimpl
    def opkernel_register_backends(self) -> list[type[ok.Backend]]:
        return [_HostBackend]


@needs_medianpool
def test_cli_kernels_shows_the_provider(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["kernels", "--op", MEDIAN]) == 0
    out = capsys.readouterr().out
    assert "medianpool (opkernel-medianpool 0.1.0)" in out and "cpu" in out
