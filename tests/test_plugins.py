"""Plugin discovery, isolation and backend selection, tested with fake entry points.

Nothing here installs anything (pluggy's own tests work the same way): the
``discovery`` fixture replaces ``opkernel.plugins.entry_points`` with a fake,
forgets every loaded plugin, and afterwards forgets the fakes again so the
next test rediscovers the real plugins.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import opkernel_cpu
import pytest

import opkernel as ok
from opkernel import engine, gradients, kernels, op_registry, plugins
from opkernel._provenance import Provider
from opkernel.cli import main as cli
from opkernel.errors import BackendUnavailableError, OpNotFoundError, PluginError
from opkernel.plugins import PluginWarning

ENV_VARS = ("OPKERNEL_DISABLE_PLUGIN_AUTOLOAD", "OPKERNEL_PLUGINS", "OPKERNEL_STRICT_PLUGINS", "OPKERNEL_BACKEND")


# ------------------------------------------------------------------ fakes


@dataclass
class FakeDist:
    name: str
    version: str


@dataclass
class FakeEntryPoint:
    """What ``importlib.metadata.entry_points`` yields: name, value, dist and ``load()``."""

    name: str
    plugin: Any = None
    error: BaseException | None = None
    dist: FakeDist | None = None
    group: str = "opkernel"
    loads: int = 0

    @property
    def value(self) -> str:
        return f"fake_{self.name.replace('-', '_')}"

    def load(self) -> Any:
        self.loads += 1
        if self.error is not None:
            raise self.error
        return self.plugin


@dataclass
class FakeEntryPoints:
    """Stands in for ``importlib.metadata.entry_points``; counts the scans."""

    eps: list[FakeEntryPoint] = field(default_factory=list)
    calls: int = 0

    def __call__(self, *, group: str) -> list[FakeEntryPoint]:
        self.calls += 1
        return [ep for ep in self.eps if ep.group == group]

    def add(self, name: str, plugin: Any = None, *, error: BaseException | None = None,
            dist: tuple[str, str] | None = None) -> FakeEntryPoint:
        ep = FakeEntryPoint(name, plugin, error, FakeDist(*(dist or (f"opkernel-{name}", "1.0"))))
        self.eps.append(ep)
        return ep

    def add_cpu(self) -> FakeEntryPoint:
        """The real CPU plugin module, behind a fake entry point."""
        return self.add("cpu", opkernel_cpu, dist=("opkernel-cpu", opkernel_cpu.__version__))


def make_backend(
    name: str,
    priority: int = 0,
    *,
    reason: str | None = None,
    availability_error: Exception | None = None,
    init_error: Exception | None = None,
) -> type[ok.Backend]:
    """A numpy-holding Backend subclass whose availability and __init__ do as told."""

    class FakeBackend(ok.Backend):
        inits = 0

        @classmethod
        def availability(cls) -> str | None:
            if availability_error is not None:
                raise availability_error
            return reason

        def __init__(self) -> None:
            type(self).inits += 1
            if init_error is not None:
                raise init_error

        def from_numpy(self, array: np.ndarray) -> np.ndarray:
            return array

        def to_numpy(self, value: Any) -> np.ndarray:
            return value  # type: ignore[no-any-return]

    FakeBackend.name = name
    FakeBackend.priority = priority
    FakeBackend.__qualname__ = FakeBackend.__name__ = f"{name.title()}Backend"
    return FakeBackend


class BackendPlugin:
    """A plugin object providing the given backend classes."""

    def __init__(self, *classes: type[ok.Backend]) -> None:
        self.classes = list(classes)

    @ok.hookimpl
    def opkernel_register_backends(self) -> list[type[ok.Backend]]:
        return self.classes


@pytest.fixture
def discovery(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeEntryPoints]:
    """Fake entry points and a fresh plugin state; the real plugins come back afterwards."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    fake = FakeEntryPoints()
    monkeypatch.setattr(plugins, "entry_points", fake)
    plugins._reset_for_tests()
    engine._reset_backends_for_tests()
    yield fake
    plugins._reset_for_tests()  # forget the fakes: the next use rediscovers the real plugins
    engine._reset_backends_for_tests()


def loaded() -> list[str]:
    return [p.name for p in plugins.plugins()]


def provided_by(provider: Provider) -> dict[str, list[str]]:
    """What ``provider`` has registered now, by registry."""
    return {
        "ops": [n for n in op_registry.op_names() if _op_provider(n) == provider],
        "kernels": [f"{k.op}@{k.backend}" for k in kernels.all_kernels() if k.provider == provider],
        "gradients": [g.op for g in gradients.entries() if g.provider == provider],
        "backends": [n for n, (_, p) in plugins.backend_classes().items() if p == provider],
    }


def _op_provider(name: str) -> Provider | None:
    snap = op_registry.snapshot()
    if name in snap.ops:
        return snap.ops[name].provider
    return snap.pending[name].provider


# ------------------------------------------------------------------ discovery


def test_discovery_is_lazy_and_happens_once(discovery: FakeEntryPoints) -> None:
    cpu = discovery.add_cpu()
    assert discovery.calls == 0 and cpu.loads == 0
    assert ok.available_backends() == ["cpu"]
    ok.op_def("MatMul")
    ok.ops.add([1.0], [2.0])
    cli(["kernels", "--op", "Add"])
    assert discovery.calls == 1
    assert cpu.loads == 1
    assert loaded() == ["builtin", "cpu"]


def test_import_opkernel_does_not_scan_entry_points() -> None:
    code = (
        "import sys, opkernel, opkernel.ops, opkernel.plugins as p; "
        "print(p._loaded, 'opkernel_cpu' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_concurrent_first_use_waits_for_discovery(discovery: FakeEntryPoints) -> None:
    started = threading.Event()
    release = threading.Event()

    class Slow:
        @ok.hookimpl
        def opkernel_register_ops(self) -> None:
            started.set()
            release.wait(5)
            ok.register_op("SlowOp").input("x: float").output("y: float")

    discovery.add_cpu()
    discovery.add("slow", Slow())
    loader = threading.Thread(target=plugins.ensure_loaded)
    loader.start()
    assert started.wait(5)
    seen: list[Any] = []
    user = threading.Thread(target=lambda: seen.extend([ok.get_backend(), ok.op_def("SlowOp").name]))
    user.start()
    user.join(0.2)  # give it time to reach discovery, which must make it wait
    release.set()
    loader.join(5)
    user.join(5)
    assert not loader.is_alive() and not user.is_alive()
    assert seen == ["cpu", "SlowOp"]


# ------------------------------------------------------------------ isolation


def test_plugin_that_fails_to_import_is_reported_and_skipped(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    discovery.add("broken", error=ImportError("No module named 'gpu_driver'"), dist=("opkernel-broken", "9.9"))
    with pytest.warns(PluginWarning) as record:
        names = ok.available_backends()
    messages = [str(w.message) for w in record if issubclass(w.category, PluginWarning)]
    assert len(messages) == 1
    for part in ("'broken'", "opkernel-broken", "9.9", "ImportError", "No module named 'gpu_driver'"):
        assert part in messages[0]
    (failure,) = ok.plugin_errors()
    assert (failure.plugin, failure.distribution, failure.version) == ("broken", "opkernel-broken", "9.9")
    assert isinstance(failure.error, ImportError)
    # everything else still works
    assert names == ["cpu"]
    assert loaded() == ["builtin", "cpu"]
    np.testing.assert_array_equal(ok.ops.add([1.0, 2.0], [3.0, 4.0]).numpy(), [4.0, 6.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok.plugin_errors()  # reported once, not on every query


class HalfwayPlugin:
    """Registers something in every hook, then fails in the last one."""

    @ok.hookimpl
    def opkernel_register_backends(self) -> list[type[ok.Backend]]:
        return [make_backend("halfway")]

    @ok.hookimpl
    def opkernel_register_ops(self) -> None:
        ok.register_op("HalfwayOp").input("x: float").output("y: float")
        ok.register_op("HalfwayOther").input("x: float").output("y: float")
        ok.op_def("HalfwayOther")  # finalized ops are rolled back too

    @ok.hookimpl
    def opkernel_register_kernels(self) -> None:
        ok.register_kernel("HalfwayOp", backend="cpu")(lambda x: x)
        ok.register_kernel("Identity", backend="halfway")(lambda input, **attrs: input)

    @ok.hookimpl
    def opkernel_register_gradients(self) -> None:
        ok.register_gradient("HalfwayOp")(lambda op, grad: [grad])
        raise RuntimeError("gradient table is corrupt")


def test_plugin_whose_hook_raises_is_rolled_back(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    discovery.add("halfway", HalfwayPlugin(), dist=("opkernel-halfway", "0.3"))
    with pytest.warns(PluginWarning, match=r"'halfway' \(opkernel-halfway 0.3\) failed: RuntimeError: gradient table"):
        plugins.ensure_loaded()
    provider = Provider("halfway", "opkernel-halfway", "0.3")
    assert provided_by(provider) == {"ops": [], "kernels": [], "gradients": [], "backends": []}
    assert loaded() == ["builtin", "cpu"]
    assert plugins._pm.get_plugin("halfway") is None
    with pytest.raises(OpNotFoundError):
        ok.op_def("HalfwayOp")
    assert [f.plugin for f in ok.plugin_errors()] == ["halfway"]
    assert ok.available_backends() == ["cpu"]
    assert ok.ops.identity([1.0]).numpy().tolist() == [1.0]


def test_a_plugin_providing_a_taken_backend_name_is_rolled_back(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    discovery.add("impostor", BackendPlugin(make_backend("cpu", priority=100)))
    with pytest.warns(PluginWarning, match="backend 'cpu' is already provided by cpu"):
        assert ok.get_backend() == "cpu"
    assert plugins.backend_classes()["cpu"][0] is opkernel_cpu.backend.CpuBackend


def test_disable_autoload_loads_no_entry_points(discovery: FakeEntryPoints, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPKERNEL_DISABLE_PLUGIN_AUTOLOAD", "1")
    cpu = discovery.add_cpu()
    assert ok.op_def("MatMul").name == "MatMul"  # built-in ops are still there
    assert cpu.loads == 0
    assert loaded() == ["builtin"]
    assert ok.available_backends() == []
    ok.register_plugin(opkernel_cpu, name="cpu")  # by hand, it still works
    assert ok.available_backends() == ["cpu"]


def test_plugins_allowlist(discovery: FakeEntryPoints, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPKERNEL_PLUGINS", " cpu ")
    cpu = discovery.add_cpu()
    other = discovery.add("other", BackendPlugin(make_backend("other")))
    broken = discovery.add("broken", error=ImportError("nope"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ok.available_backends() == ["cpu"]
    assert (cpu.loads, other.loads, broken.loads) == (1, 0, 0)
    assert loaded() == ["builtin", "cpu"]
    assert ok.plugin_errors() == []


def test_strict_mode_raises_plugin_error_for_import_failure(
    discovery: FakeEntryPoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPKERNEL_STRICT_PLUGINS", "1")
    cause = ImportError("No module named 'gpu_driver'")
    discovery.add("broken", error=cause, dist=("opkernel-broken", "9.9"))
    with pytest.raises(PluginError, match=r"plugin 'broken' \(opkernel-broken 9.9\) failed: ImportError") as info:
        ok.available_backends()
    assert info.value.plugin == "broken"
    assert info.value.__cause__ is cause


def test_strict_mode_raises_plugin_error_for_failing_hook(
    discovery: FakeEntryPoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPKERNEL_STRICT_PLUGINS", "1")
    discovery.add("halfway", HalfwayPlugin(), dist=("opkernel-halfway", "0.3"))
    with pytest.raises(PluginError, match="gradient table is corrupt") as info:
        plugins.ensure_loaded()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert provided_by(Provider("halfway", "opkernel-halfway", "0.3"))["ops"] == []


# ------------------------------------------------------------------ by hand, provenance


class ByHand:
    def __init__(self) -> None:
        self.calls = 0

    @ok.hookimpl
    def opkernel_register_kernels(self) -> None:
        self.calls += 1
        ok.register_kernel("Identity", backend="cpu", label="by-hand")(lambda input, **attrs: input + 0)


def test_register_plugin_by_hand(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    plugin = ByHand()
    name = ok.register_plugin(plugin, name="by-hand")
    assert name == "by-hand" and plugin.calls == 1
    assert ok.register_plugin(plugin) == "by-hand"  # a second time is a no-op
    assert plugin.calls == 1
    (kernel,) = [k for k in kernels.kernels_for("Identity", "cpu") if k.label == "by-hand"]
    assert kernel.provider == Provider("by-hand")
    with ok.kernel_label_map({"Identity": "by-hand"}):
        assert ok.ops.identity([3]).numpy().tolist() == [3]
    assert "by-hand" in loaded()
    plugins.unregister_plugin("by-hand")
    assert not [k for k in kernels.kernels_for("Identity", "cpu") if k.label == "by-hand"]


def test_register_plugin_by_hand_without_a_name(discovery: FakeEntryPoints) -> None:
    plugin = ByHand()
    discovery.add_cpu()
    name = ok.register_plugin(plugin)
    assert name.startswith("plugin-")
    assert [k.provider for k in kernels.kernels_for("Identity", "cpu") if k.label == "by-hand"] == [Provider(name)]


def test_register_plugin_by_hand_that_fails_raises(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reported once, by the exception alone
        with pytest.raises(PluginError, match="gradient table is corrupt") as info:
            ok.register_plugin(HalfwayPlugin(), name="halfway")
    assert info.value.plugin == "halfway"
    assert any(f.plugin == "halfway" for f in ok.plugin_errors())
    assert provided_by(Provider("halfway"))["ops"] == []


class VendorPlugin:
    @ok.hookimpl
    def opkernel_register_ops(self) -> None:
        ok.register_op("Vendor>Twice").input("x: T").output("y: T").attr("T: {float, int32}").set_shape_fn(
            ok.shape_fns.unchanged_shape
        )

    @ok.hookimpl
    def opkernel_register_kernels(self) -> None:
        ok.register_kernel("Vendor>Twice", backend="cpu")(lambda x, T: x * 2)

    @ok.hookimpl
    def opkernel_register_gradients(self) -> None:
        ok.register_gradient("Vendor>Twice")(lambda op, grad: [grad * 2])


def test_providers_are_recorded_from_entry_points(discovery: FakeEntryPoints, capsys: pytest.CaptureFixture[str]) -> None:
    discovery.add_cpu()
    discovery.add("vendor", VendorPlugin(), dist=("opkernel-vendor", "2.3.4"))
    provider = Provider("vendor", "opkernel-vendor", "2.3.4")
    assert ok.op_def("Vendor>Twice").provider == provider
    assert [k.provider for k in kernels.kernels_for("Vendor>Twice", "cpu")] == [provider]
    assert gradients.get_gradient("Vendor>Twice").provider == provider
    assert ok.ops.vendor.twice([1, 2]).numpy().tolist() == [2, 4]
    assert [k.provider for k in kernels.kernels_for("MatMul", "cpu")] == [Provider("cpu", "opkernel-cpu", "0.1.0")]
    assert ok.op_def("MatMul").provider == Provider("builtin", "opkernel", ok.__version__)
    cli(["kernels", "--op", "Vendor>Twice"])
    assert "vendor (opkernel-vendor 2.3.4)" in capsys.readouterr().out


# ------------------------------------------------------------------ backends


def test_unavailable_backends_are_listed_with_their_reason(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    discovery.add("gpus", BackendPlugin(
        make_backend("nodriver", priority=50, reason="libfoo.so not found"),
        make_backend("crashy", priority=40, availability_error=OSError("probe failed")),
    ))
    status = {name: reason for name, _, reason in engine.backend_status()}
    assert status == {
        "nodriver": "libfoo.so not found",
        "crashy": "availability check raised OSError: probe failed",
        "cpu": None,
    }
    assert ok.available_backends() == ["cpu"]
    assert ok.get_backend() == "cpu"
    with pytest.raises(BackendUnavailableError, match="'nodriver' is installed but not available: libfoo.so not found") as info:
        ok.set_backend("nodriver")
    assert info.value.backend == "nodriver"
    with pytest.raises(BackendUnavailableError, match="probe failed"), ok.use_backend("crashy"):
        pass


def test_backend_whose_init_raises_becomes_unavailable(discovery: FakeEntryPoints) -> None:
    flaky = make_backend("flaky", priority=-1, init_error=RuntimeError("no device found"))
    discovery.add_cpu()
    discovery.add("flaky", BackendPlugin(flaky))
    assert ok.available_backends() == ["cpu", "flaky"]  # availability() alone cannot tell
    with pytest.raises(BackendUnavailableError) as info:
        ok.set_backend("flaky")
    assert info.value.backend == "flaky"
    assert "backend 'flaky'" in str(info.value)
    assert "initialisation failed: RuntimeError: no device found" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert ok.available_backends() == ["cpu"]
    assert {n: r for n, _, r in engine.backend_status()}["flaky"] == (
        "initialisation failed: RuntimeError: no device found"
    )
    with pytest.raises(BackendUnavailableError):  # not retried
        ok.set_backend("flaky")
    assert flaky.inits == 1


def test_priority_picks_the_default_backend(discovery: FakeEntryPoints, monkeypatch: pytest.MonkeyPatch) -> None:
    discovery.add_cpu()
    discovery.add("more", BackendPlugin(make_backend("low", priority=-5), make_backend("high", priority=10)))
    assert ok.available_backends() == ["high", "cpu", "low"]
    assert ok.get_backend() == "high"
    engine._reset_backends_for_tests()
    monkeypatch.setenv("OPKERNEL_BACKEND", "low")
    assert ok.get_backend() == "low"


def test_default_skips_a_backend_whose_init_fails(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    discovery.add("gpu", BackendPlugin(make_backend("gpu", priority=10, init_error=RuntimeError("driver too old"))))
    with pytest.warns(RuntimeWarning, match="'gpu'.*driver too old"):
        assert ok.get_backend() == "cpu"
    assert ok.available_backends() == ["cpu"]


def test_set_backend_is_process_wide_and_use_backend_context_local(discovery: FakeEntryPoints) -> None:
    discovery.add_cpu()
    discovery.add("other", BackendPlugin(make_backend("other", priority=-1)))
    seen: dict[str, str] = {}

    def in_thread() -> None:
        seen["thread"] = ok.get_backend()

    with ok.use_backend("other"):
        assert ok.get_backend() == "other"
        worker = threading.Thread(target=in_thread)
        worker.start()
        worker.join()
    assert seen["thread"] == "cpu"  # use_backend did not leak into another thread
    ok.set_backend("other")
    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    assert seen["thread"] == "other"  # set_backend did
