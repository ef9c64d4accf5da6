"""The conformance kit as documented: ``ok.testing.check_op``, ``compute_gradient`` and
``compute_gradient_error`` are the functions, and ``check_op`` compares every backend
it checks with cpu, whatever ``backends`` names (or says why it could not)."""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok
from opkernel.testing import CheckOpFailure
from twin import Boxed


def test_the_documented_names_are_the_functions() -> None:
    assert callable(ok.testing.check_op) and ok.testing.check_op.__name__ == "check_op"
    assert ok.testing.compute_gradient.__name__ == "compute_gradient"
    assert ok.testing.compute_gradient_error.__name__ == "compute_gradient_error"
    x = np.array([0.5, 1.5], np.float64)
    theoretical, numerical = ok.testing.compute_gradient(lambda t: ok.ops.square(t), [x])
    np.testing.assert_allclose(theoretical[0], np.diag(2 * x), atol=1e-6)
    np.testing.assert_allclose(numerical[0], np.diag(2 * x), atol=1e-6)
    assert ok.testing.compute_gradient_error(lambda t: ok.ops.square(t), [x]) < 1e-6


def test_the_former_module_path_still_imports() -> None:
    from opkernel.testing.check_op import CheckOpFailure as Failure, check_op

    assert check_op is ok.testing.check_op and Failure is CheckOpFailure


def _register_twin_square(wrong: bool) -> None:
    def square(x: Boxed) -> Boxed:
        return Boxed(x.array * (1 if wrong else x.array))

    ok.register_kernel("Square", backend="twin")(square)


@pytest.mark.parametrize("wrong", [False, True], ids=["right", "wrong"])
def test_a_backend_named_alone_is_compared_with_cpu(twin: str, wrong: bool) -> None:
    _register_twin_square(wrong)
    x = [np.array([1.0, -2.0, 3.0], np.float32)]
    if not wrong:
        report = ok.testing.check_op("Square", x, backends=[twin], threads=1)
        assert any(r.backend == twin and r.check == "agrees with cpu" and r.passed for r in report.results), report
        return
    with pytest.raises(CheckOpFailure) as info:
        ok.testing.check_op("Square", x, backends=[twin], threads=1, check_gradients=False)
    failed = [(r.backend, r.check) for r in info.value.report.failures]
    assert failed == [(twin, "agrees with cpu")], info.value.report


def test_no_cpu_kernel_is_a_printed_skip_not_a_silent_pass(twin: str, capsys: pytest.CaptureFixture[str]) -> None:
    ok.register_op("Test>TwinOnly").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Test>TwinOnly", backend="twin")(lambda x: Boxed(x.array * 2))
    report = ok.testing.check_op("Test>TwinOnly", [np.ones(3, np.float32)], backends=[twin], threads=1)
    out = capsys.readouterr().out
    assert "[skip] check_op('Test>TwinOnly'): results not compared with cpu: cpu has no kernel" in out
    skipped = [r for r in report.results if r.skipped]
    assert [(r.backend, r.check) for r in skipped] == [("cpu", "reference")]
    assert "[skip]" in str(report)


def test_an_unavailable_cpu_is_a_printed_skip(twin: str, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from opkernel import engine

    real = engine.backend_status
    monkeypatch.setattr(engine, "backend_status",
                        lambda: [(n, p, "no device here" if n == "cpu" else r) for n, p, r in real()])
    _register_twin_square(False)
    ok.testing.check_op("Square", [np.ones(3, np.float32)], backends=[twin], threads=1, check_gradients=False)
    assert "results not compared with cpu: the cpu backend is unavailable: no device here" in capsys.readouterr().out
