"""Kernel fallback: a call the active backend has no kernel for runs on a backend the
user listed (``ok.config.kernel_fallback``, ``OPKERNEL_KERNEL_FALLBACK``,
``ok.kernel_fallback``), loudly (a warning once per op and pair of backends) and
counted (``ok.config.fallbacks``, ``ok.profile``); never without being asked.

The active backend is ``twin`` (tests/twin.py): kernels for Add, Sub, Mul and Neg only,
so Exp, AssignSub, Unpack and the rest have to fall back to cpu.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
from isolated import run_isolated

import opkernel as ok
from opkernel import _selection, engine
from opkernel.errors import BackendNotFoundError, KernelFallbackWarning, KernelNotFoundError, OpTypeError


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test sees the first fallback of each (op, from, to) afresh, and no process-wide setting."""
    monkeypatch.setattr(_selection, "_WARNED", set())
    yield
    ok.config.kernel_fallback = ()


def count(op: str, source: str = "twin", target: str = "cpu") -> int:
    return ok.config.fallbacks.get((op, source, target), 0)


def test_without_a_fallback_the_error_names_the_setting_as_a_way_out(twin: str) -> None:
    with ok.use_backend(twin):
        with pytest.raises(KernelNotFoundError, match=r"no kernel on backend 'twin': op 'Exp'.*"
                           r"ok\.config\.kernel_fallback = \('cpu',\), OPKERNEL_KERNEL_FALLBACK=cpu, "
                           r"or use `with ok\.kernel_fallback\('cpu'\):`"):
            ok.ops.exp(ok.tensor([1.0]))
    assert ok.config.kernel_fallback == ()


def test_a_scoped_fallback_runs_the_call_on_cpu_warns_once_and_counts_every_call(twin: str) -> None:
    values = np.array([0.5, -1.0, 2.0], np.float32)
    before = count("Exp")
    with ok.use_backend(twin):
        x = ok.tensor(values)
        with ok.kernel_fallback("cpu") as names:
            assert names == ("cpu",) and ok.config.kernel_fallback == ("cpu",)
            with pytest.warns(KernelFallbackWarning, match=r"op 'Exp' has no kernel on backend 'twin' for T=float32: "
                              r"running it on 'cpu'") as caught:
                first = ok.ops.exp(x)
            assert caught[0].filename == __file__  # it points at the caller's line, not at opkernel
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # once per (op, from, to): no second warning
                second = ok.ops.exp(x)  # the wrapper's fast table
                by_name = ok.execute("Exp", x)
                literal = ok.ops.exp([0.5, -1.0, 2.0])  # the literal cache
        for y in (first, second, by_name, literal):
            assert y.backend == "twin" and y.dtype == ok.float32
            np.testing.assert_allclose(y.numpy(), np.exp(values), rtol=1e-6)
        assert count("Exp") == before + 4
        # The signatures stay cached, but outside the block the call is an error again.
        with pytest.raises(KernelNotFoundError, match=r"op 'Exp'.*ok\.config\.kernel_fallback = \('cpu',\)"):
            ok.ops.exp(x)
        with pytest.raises(KernelNotFoundError, match="op 'Exp'"):
            ok.ops.exp([0.5])
    assert count("Exp") == before + 4


def test_the_process_wide_setting_and_its_checks(twin: str) -> None:
    ok.config.kernel_fallback = ["cpu", " cpu"]  # any sequence; blanks and repeats dropped
    assert ok.config.kernel_fallback == ("cpu",)
    with ok.use_backend(twin):
        with pytest.warns(KernelFallbackWarning):
            assert ok.ops.exp(ok.tensor([0.0])).numpy().tolist() == [1.0]
        with ok.kernel_fallback():  # no names: no fallback in this block
            assert ok.config.kernel_fallback == ()
            with pytest.raises(KernelNotFoundError):
                ok.ops.exp(ok.tensor([0.0]))
    with pytest.raises(OpTypeError, match=r"ok\.config\.kernel_fallback must be a tuple of backend names, such as \('cpu',\), got str"):
        ok.config.kernel_fallback = "cpu"  # type: ignore[assignment]
    with pytest.raises(OpTypeError, match=r"must hold backend names \(str\), got int 1"):
        ok.config.kernel_fallback = ("cpu", 1)  # type: ignore[arg-type]
    with pytest.raises(BackendNotFoundError, match=r"unknown backend 'cpux'.*Did you mean 'cpu'"):
        ok.config.kernel_fallback = ("cpux",)
    with pytest.raises(BackendNotFoundError, match="unknown backend 'nosuch'"):
        with ok.kernel_fallback("nosuch"):
            pass
    assert ok.config.kernel_fallback == ("cpu",)  # a refused setting changes nothing


def test_the_environment_variable_sets_the_fallback_at_startup() -> None:
    out = run_isolated("""
import warnings
import opkernel as ok
from twin import TwinPlugin
ok.register_plugin(TwinPlugin(), name="twin-plugin")
print(ok.config.kernel_fallback)
with ok.use_backend("twin"), warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print(ok.ops.exp(ok.tensor([0.0])).numpy().tolist(), [w.category.__name__ for w in caught])
ok.config.kernel_fallback = ()
with ok.use_backend("twin"), ok.kernel_fallback("cpu"):
    print(ok.ops.neg(ok.tensor([1.0])).backend, dict(ok.config.fallbacks))
""", env={"OPKERNEL_KERNEL_FALLBACK": "cpu"}, what="OPKERNEL_KERNEL_FALLBACK=cpu")
    assert out.stdout.split("\n")[:3] == [
        "('cpu',)", "[1.0] ['KernelFallbackWarning']", "twin {('Exp', 'twin', 'cpu'): 1}",
    ]
    bad = run_isolated("""
import opkernel as ok
from twin import TwinPlugin
ok.register_plugin(TwinPlugin(), name="twin-plugin")
with ok.use_backend("twin"):
    try:
        ok.ops.exp(ok.tensor([0.0]))
    except ok.errors.BackendNotFoundError as e:
        print(e)
""", env={"OPKERNEL_KERNEL_FALLBACK": "nosuch,cpu"}, what="OPKERNEL_KERNEL_FALLBACK naming an unknown backend")
    assert "the kernel fallback ('nosuch', 'cpu') names backend 'nosuch': unknown backend 'nosuch'" in bad.stdout


def test_a_kernel_registered_later_wins_over_the_fallback(twin: str) -> None:
    with ok.use_backend(twin), ok.kernel_fallback("cpu"):
        x = ok.tensor([1.0, 2.0])
        with pytest.warns(KernelFallbackWarning):
            ok.ops.exp(x)
        before = count("Exp")
        from twin import Boxed

        ok.register_kernel("Exp", backend="twin")(lambda x, **attrs: Boxed(np.full_like(x.array, 7.0)))
        assert ok.ops.exp(x).numpy().tolist() == [7.0, 7.0]  # twin's own kernel, not cpu's
        assert ok.ops.exp([1.0]).numpy().tolist() == [7.0]
        assert count("Exp") == before


def test_the_scoped_fallback_belongs_to_its_context(twin: str) -> None:
    seen: list[str] = []

    def worker() -> None:
        with ok.use_backend(twin):
            try:
                ok.ops.exp(ok.tensor([1.0]))
            except KernelNotFoundError:
                seen.append("no fallback in another thread")

    with ok.use_backend(twin), ok.kernel_fallback("cpu"), pytest.warns(KernelFallbackWarning):
        ok.ops.exp(ok.tensor([1.0]))  # cached here under the fallback ...
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert seen == ["no fallback in another thread"]  # ... yet the thread's call is refused


def test_gradients_of_a_fallen_back_op_run_where_the_op_ran(twin: str) -> None:
    ok.register_op("Probe>Cube").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Probe>Cube", backend="cpu")(lambda x: x**3)
    ran: list[tuple[str | None, str]] = []

    @ok.register_gradient("Probe>Cube")
    def cube_grad(op: ok.autodiff.OpRecord, grad: ok.Tensor) -> ok.Tensor:
        ran.append((op.backend, ok.get_backend()))
        x = op.inputs[0]
        return ok.ops.mul(grad, ok.ops.mul(ok.ops.mul(x, x), 3.0))

    values = np.array([1.0, -2.0, 0.5], np.float32)
    with ok.use_backend(twin), ok.kernel_fallback("cpu"):
        x = ok.tensor(values)
        with ok.GradientTape() as tape, pytest.warns(KernelFallbackWarning, match="'Probe>Cube'"):
            tape.watch(x)
            y = ok.ops.mul(ok.ops.probe.cube(x), x)  # x**4: Cube on cpu, Mul on twin
        dx = tape.gradient(y, x, output_gradients=ok.tensor(np.ones(3, np.float32)))
    assert ran == [("cpu", "cpu")]  # the gradient ran on cpu, where Cube ran
    assert dx.backend == "twin"  # returned on its source's backend
    np.testing.assert_allclose(dx.numpy(), 4 * values**3, rtol=1e-6)


def test_in_place_updates_reach_the_variable_through_a_fallback(twin: str) -> None:
    with ok.use_backend(twin), ok.kernel_fallback("cpu"), warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelFallbackWarning)
        var = ok.Variable([1.0, 2.0])
        version = var._version
        var.assign_sub(ok.tensor([0.5, 0.5]))  # twin has no AssignSub
        assert var.backend == "twin" and var.numpy().tolist() == [0.5, 1.5]
        assert var._version == version + 1  # a tape can tell the variable changed
        # ApplyGradientDescent's generic kernel runs on twin and its AssignSub falls back.
        ok.ops.apply_gradient_descent(var, ok.tensor(0.5), ok.tensor([1.0, 3.0]))
        assert var.backend == "twin" and var.numpy().tolist() == [0.0, 0.0]
        assert count("AssignSub") >= 2


def test_list_inputs_go_and_every_output_comes_back(twin: str) -> None:
    with ok.use_backend(twin), ok.kernel_fallback("cpu"), warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelFallbackWarning)
        joined = ok.ops.add_n([ok.tensor([1.0]), ok.tensor([2.0]), ok.tensor([4.0])])  # a list input
        assert joined.backend == "twin" and joined.numpy().tolist() == [7.0]
        parts = ok.ops.unpack(ok.tensor([[1.0, 2.0], [3.0, 4.0]]), num=2)  # a list output
        assert [p.backend for p in parts] == ["twin", "twin"]
        assert [p.numpy().tolist() for p in parts] == [[1.0, 2.0], [3.0, 4.0]]
        logits, labels = np.array([[0.0, np.log(3.0)]], np.float32), np.array([[0.0, 1.0]], np.float32)
        both = ok.ops.softmax_cross_entropy_with_logits(ok.tensor(logits), ok.tensor(labels))  # a named tuple
        assert type(both).__name__ == "SoftmaxCrossEntropyWithLogits"
        assert (both.loss.backend, both.backprop.backend) == ("twin", "twin")
        np.testing.assert_allclose(both.loss.numpy(), [-np.log(0.75)], rtol=1e-6)
        np.testing.assert_allclose(both.backprop.numpy(), [[0.25, -0.25]], rtol=1e-6)


def test_profile_shows_the_fallbacks(twin: str) -> None:
    with ok.use_backend(twin), ok.kernel_fallback("cpu"), warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelFallbackWarning)
        x = ok.tensor([1.0])
        with ok.profile(synchronize=False) as prof:
            ok.ops.exp(x)
            ok.ops.exp(x)
            ok.ops.neg(x)
    assert prof.fallbacks == {("Exp", "twin", "cpu"): 2}
    assert ("twin", "Exp") in prof.stats
    assert "Exp                              twin -> cpu: 2 calls" in str(prof)


def test_a_fallback_with_no_kernel_either_says_what_it_tried(twin: str) -> None:
    ok.register_op("Probe>Wide").input("x: T").output("y: T").attr("T: {float, double}") \
        .set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Probe>Wide", backend="cpu", type_constraints={"T": ["float64"]})(lambda x, **attrs: x)
    with ok.use_backend(twin), ok.kernel_fallback("twin", "cpu"):
        with pytest.warns(KernelFallbackWarning):
            assert ok.ops.probe.wide(ok.tensor([1.0], ok.float64)).backend == "twin"
        with pytest.raises(KernelNotFoundError, match=r"no kernel on backend 'twin': op 'Probe>Wide' with T=float32.*"
                           r"The kernel fallback \('twin', 'cpu'\) has none: tried 'cpu' \(no kernel for these types either\)"):
            ok.ops.probe.wide(ok.tensor([1.0]))


def test_explain_says_where_a_call_falls_back_to(twin: str) -> None:
    with ok.use_backend(twin):
        assert "no kernel runs" in str(ok.explain("Exp", ok.tensor([1.0])))
        with ok.kernel_fallback("cpu"):
            explained = ok.explain("Exp", ok.tensor([1.0]))
    assert explained.chosen is None and explained.fallback is not None and explained.fallback[0] == "cpu"
    assert "falls back to 'cpu' (ok.config.kernel_fallback)" in str(explained)


def test_threads_falling_back_at_once_warn_once(twin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[str] = []

    def slow_warn(message: str, *args: object, **kwargs: object) -> None:
        shown.append(message)
        time.sleep(0.02)  # a thread switch inside the warning lets the others through

    monkeypatch.setattr(warnings, "warn", slow_warn)
    ok.config.kernel_fallback = ("cpu",)
    start = threading.Barrier(4)
    before = count("Exp")

    def worker() -> None:
        with ok.use_backend(twin):
            x = ok.tensor([1.0])
            start.wait()
            for _ in range(5):
                ok.ops.exp(x)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(shown) == 1 and "op 'Exp' has no kernel on backend 'twin'" in shown[0]
    assert count("Exp") == before + 20


class _GhostBackend(ok.Backend):
    """A backend installed but unavailable here (as cuda without a driver)."""

    name = "ghost"
    priority = -20

    @classmethod
    def availability(cls) -> str | None:
        return "no ghost device here"


class _GhostPlugin:
    @ok.hookimpl
    def opkernel_register_backends(self) -> list[type[ok.Backend]]:
        return [_GhostBackend]

    @ok.hookimpl
    def opkernel_register_kernels(self) -> None:
        ok.register_kernel("Exp", backend="ghost")(lambda x: x)


def test_explain_skips_a_fallback_backend_unavailable_here_as_the_call_does(twin: str) -> None:
    ok.register_plugin(_GhostPlugin(), name="ghost-plugin")
    with ok.use_backend(twin), ok.kernel_fallback("ghost", "cpu"):
        explained = ok.explain("Exp", ok.tensor([1.0]))
        with pytest.warns(KernelFallbackWarning, match="running it on 'cpu'"):
            ok.ops.exp(ok.tensor([1.0]))
    assert explained.fallback is not None and explained.fallback[0] == "cpu"  # was: 'ghost', where it never runs


def test_an_update_through_a_fallback_leaves_earlier_snapshots_alone(twin: str) -> None:
    """twin's to_numpy and cpu's from_numpy pass memory through: the cpu kernel must
    update a copy, not the variable's memory that a snapshot still holds."""
    with ok.use_backend(twin), ok.kernel_fallback("cpu"), warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelFallbackWarning)
        var = ok.Variable([1.0, 2.0])
        snapshot, host = var.read_value(), var.numpy()
        var.assign_sub(ok.tensor([0.5, 0.5]))
        assert var.numpy().tolist() == [0.5, 1.5]
        assert snapshot.numpy().tolist() == [1.0, 2.0] and host.tolist() == [1.0, 2.0]  # as on cpu itself


def test_a_generic_kernel_updating_a_ref_beside_a_list_input_updates_the_variable_once(twin: str) -> None:
    """Ref positions count a list input's length: the variable is made private first (a
    snapshot keeps its values), its version is bumped, and an update made on a fallback
    backend reaches it."""
    ok.register_op("Probe>AddAll").input("ref: Ref(float)").input("xs: N * float").output("out: Ref(float)") \
        .attr("N: int >= 1").set_shape_fn(lambda c: c.set_output(0, c.input(0)))

    @ok.register_kernel("Probe>AddAll", backend="*")
    def add_all(ref: ok.Variable, xs: list[ok.Tensor], **attrs: object) -> ok.Tensor:
        return ok.ops.assign_add(ref, ok.ops.add_n(xs))  # type: ignore[no-any-return]

    for backend in ("cpu", twin):
        with ok.use_backend(backend), ok.kernel_fallback("cpu"), warnings.catch_warnings():
            warnings.simplefilter("ignore", KernelFallbackWarning)
            var = ok.Variable([1.0, 2.0])
            snapshot, version = var.read_value(), var._version
            ok.ops.probe.add_all(var, [ok.tensor([1.0, 1.0]), ok.tensor([2.0, 2.0])])
            assert var.backend == backend and var.numpy().tolist() == [4.0, 5.0], backend
            assert snapshot.numpy().tolist() == [1.0, 2.0], backend
            assert var._version == version + 1, backend


def test_check_op_inside_a_scoped_fallback_checks_its_threads_under_it(twin: str) -> None:
    """check_op's worker threads run in copies of the caller's context, so a scoped
    fallback reaches them ("threads agree" failed: the threads had no fallback)."""
    from opkernel.testing import check_op

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelFallbackWarning)
        with ok.kernel_fallback("cpu"):
            report = check_op("Exp", [np.array([0.5, -1.0, 2.0], np.float32)], backends=[twin], check_gradients=False)
    assert report.passed, str(report)
    assert any("threads agree" in r.check for r in report.results if r.passed and not r.skipped), str(report)
