"""Gradient coverage: ``ok.testing.gradient_coverage(backend)`` and
``opkernel kernels --backend NAME --gradients`` find what each gradient needs by running
it, so a backend author learns every missing kernel at once."""

from __future__ import annotations

import time

import numpy as np
import pytest

import opkernel as ok
from opkernel.cli import main as cli
from opkernel.testing import GradientCoverage, gradient_coverage
from twin import Boxed, _boxed


def _by_op(report: list[GradientCoverage]) -> dict[str, GradientCoverage]:
    return {c.op: c for c in report}


def test_every_builtin_gradient_runs_on_cpu_quickly() -> None:
    ok.plugins.ensure_loaded()
    start = time.process_time()  # CPU time: the machine's load does not count
    report = gradient_coverage("cpu")
    took = time.process_time() - start
    assert took < 5.0, f"running every gradient once took {took:.1f} s of CPU time"
    statuses = {c.op: c.status for c in report if c.status not in ("ok", "not-differentiable")}
    assert statuses == {}, statuses
    assert [c.op for c in report] == sorted(c.op for c in report)
    assert {"MatMul", "Relu", "Conv2D", "MaxPool"} <= {c.op for c in report if c.status == "ok"}
    assert _by_op(report)["Equal"].status == "not-differentiable"


def test_a_small_backend_learns_exactly_what_each_gradient_lacks(twin: str) -> None:
    for op, fn in (("Relu", lambda x: np.maximum(x, 0)), ("Erf", np.negative), ("MatMul", np.matmul)):
        ok.register_kernel(op, backend="twin")(_boxed(fn))
    report = _by_op(gradient_coverage(twin))
    assert sorted(report) == ["Add", "Erf", "MatMul", "Mul", "Neg", "Relu", "Sub"]
    assert (report["Relu"].status, report["Relu"].missing) == ("missing-kernels", ("ReluGrad",))
    assert report["Erf"].missing == ("Exp", "Square")
    assert report["Erf"].direct == ("Exp", "Mul", "Neg", "Square")  # what it calls, whether present or not
    assert (report["MatMul"].status, report["MatMul"].missing) == ("ok", ())
    assert report["Neg"].status == "ok"
    # Broadcast operands are tried too: their gradients sum over the broadcast dimensions.
    assert report["Add"].missing == ("Reshape", "Sum")


def test_a_generic_kernel_counts_with_what_it_calls(twin: str) -> None:
    ok.register_op("Test>Scale").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_op("Test>Twice").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Test>Scale", backend="twin")(lambda x: Boxed(x.array * 3))
    ok.register_kernel("Test>Scale", backend="cpu")(lambda x: x * 3)

    @ok.register_kernel("Test>Twice", backend="*")
    def twice(x: ok.Tensor) -> ok.Tensor:  # generic: made of other ops, on whatever backend
        return ok.ops.square(ok.ops.add(x, x))

    ok.register_gradient("Test>Scale")(lambda op, g: ok.execute("Test>Twice", g))
    entry = _by_op(gradient_coverage(twin))["Test>Scale"]
    assert entry.status == "missing-kernels"
    assert entry.direct == ("Test>Twice",)
    assert entry.transitive == ("Add", "Square", "Test>Twice")
    assert entry.missing == ("Square",)


def test_inputs_it_cannot_guess_are_an_error_until_the_op_gives_examples(fresh_registry: None) -> None:
    def cube(x: np.ndarray) -> np.ndarray:
        if x.ndim != 3:
            raise ok.errors.InvalidArgumentError(f"op 'Test>Cube': x must be 3-D, got shape {list(x.shape)}")
        return x

    ok.register_op("Test>Cube").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Test>Cube", backend="cpu")(cube)
    ok.register_gradient("Test>Cube")(lambda op, g: ok.ops.neg(g))
    entry = gradient_coverage("cpu", ["Test>Cube"])[0]
    assert entry.status == "error" and "could not build inputs" in (entry.error or "")
    assert "register_example_inputs" in (entry.error or "")

    @ok.testing.register_example_inputs("Test>Cube")
    def cube_example() -> tuple[list[np.ndarray], dict[str, object]]:
        return [np.ones((2, 2, 2), np.float32)], {}

    entry = gradient_coverage("cpu", ["Test>Cube"])[0]
    assert (entry.status, entry.direct) == ("ok", ("Neg",))


def test_no_gradient_and_bad_arguments(fresh_registry: None) -> None:
    ok.register_op("Test>Plain").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Test>Plain", backend="cpu")(lambda x: x)
    assert gradient_coverage("cpu", ["Test>Plain"])[0].status == "no-gradient"
    with pytest.raises(ok.errors.InvalidArgumentError, match="unknown backend 'nope'"):
        gradient_coverage("nope")
    with pytest.raises(ok.errors.InvalidArgumentError, match="unknown backend '\\*'"):
        gradient_coverage("*")  # generic kernels are not a backend
    with pytest.raises(ok.errors.InvalidArgumentError, match="no op named 'Test>Nothing' is registered"):
        gradient_coverage("cpu", ["Test>Nothing"])
    with pytest.raises(ok.errors.InvalidArgumentError, match="a list of op names"):
        gradient_coverage("cpu", "Relu")
    with pytest.raises(ok.errors.OpSpecError, match="a function returning"):
        ok.testing.register_example_inputs("Test>Plain")(None)  # type: ignore[arg-type]


def test_the_report_leaves_no_registration_behind() -> None:
    before = (ok.plugins.plugins(), len(ok.kernels.all_kernels()), ok.engine.backend_status())
    gradient_coverage("cpu", ["Relu"])
    assert (ok.plugins.plugins(), len(ok.kernels.all_kernels()), ok.engine.backend_status()) == before


def test_the_command(twin: str, capsys: pytest.CaptureFixture[str]) -> None:
    ok.register_kernel("Relu", backend="twin")(_boxed(lambda x: np.maximum(x, 0)))
    assert cli(["kernels", "--backend", twin, "--gradients"]) == 1
    out = capsys.readouterr().out
    assert "Gradient coverage on backend 'twin'" in out and "ReluGrad" in out
    assert "5 ops: 1 gradients run on 'twin', 4 lack kernels, 0 could not be run, 0 not differentiable" in out
    assert "kernels missing: ReluGrad, Reshape, Sum" in out
    assert cli(["kernels", "--backend", "cpu", "--gradients", "--op", "Relu"]) == 0
    assert "1 ops: 1 gradients run on 'cpu', 0 lack kernels, 0 could not be run, 0 not differentiable, 0 without a " \
        "gradient; kernels missing: none" in capsys.readouterr().out
    assert cli(["kernels", "--gradients"]) == 2
    assert "--backend NAME" in capsys.readouterr().err
