"""check_op on every registered op, across every installed backend.

One representative row per op is taken from the op tables (the first row of
that op whose dtypes include float32, else its first row); check_op then runs
it on every available backend against the CPU backend, with shapes, dtypes,
input immutability, thread agreement and the gradient checked.
"""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok
from opkernel import op_registry
from opkernel.ops.data_flow_ops import QUEUE_OPS
from opkernel.ops.lookup_ops import LOOKUP_OPS
from opkernel.ops.resource_variable_ops import RESOURCE_VARIABLE_OPS
from opkernel.testing import CheckOpFailure, check_op

import test_ops_array
import test_ops_math
import test_ops_nn

ROWS = {}
for case in test_ops_math.CASES + test_ops_array.CASES + test_ops_nn.CASES:
    current = ROWS.get(case.op)
    if current is None or ("float32" in case.dtypes and "float32" not in current.dtypes):
        ROWS[case.op] = case


def _inputs(case):
    dtype = "float32" if "float32" in case.dtypes else case.dtypes[0]
    return case.inputs(np.random.default_rng(0), dtype)


def _holds(backend, inputs, attrs):
    """Whether ``backend`` holds every dtype of the inputs and every dtype attr."""
    dtypes = [ok.as_dtype(np.asarray(x).dtype) for x in inputs if not isinstance(x, list)]
    dtypes += [v for v in attrs.values() if isinstance(v, ok.DType)]
    be = ok.engine.backend_instance(backend)
    return all(be.supports_dtype(dt) for dt in dtypes)


@pytest.mark.parametrize("case", list(ROWS.values()), ids=lambda c: c.op)
def test_check_op_across_backends(case):
    inputs = _inputs(case)
    backends = [b for b in ok.available_backends() if b not in case.skip and _holds(b, inputs, case.attrs)]
    report = check_op(case.op, inputs, case.attrs, backends, threads=2,
                      check_gradients=case.grad, grad_tol=max(case.grad_tol, 1e-5))
    assert report.passed
    assert {r.backend for r in report.results} >= set(backends)


def test_every_op_of_the_library_has_a_row():
    untested = sorted(
        name for name in op_registry.op_names()
        if name not in ROWS and ">" not in name
        and not name.startswith(("Assign", "Apply", "StringToNumber", "RngReadAndSkip",  # Ref inputs: test_random.py
                                 "FusedBatchNormGradV3"))  # the gradient of FusedBatchNormV3's rows
        and name not in (*RESOURCE_VARIABLE_OPS, *LOOKUP_OPS, *QUEUE_OPS)  # handles to state: tests/test_resource_variables.py
    )
    assert untested == []


def test_check_op_lists_every_failure(fresh_registry):
    ok.register_op("Test>Broken").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.scalar_shape)

    @ok.register_kernel("Test>Broken", backend="cpu")
    def broken(x):
        x += 1  # mutates its input, and its output does not match the shape function
        return x.copy()

    with pytest.raises(CheckOpFailure) as info:
        check_op("Test>Broken", [np.zeros(3, np.float32)], backends=["cpu"], threads=1)
    failed = {r.check for r in info.value.report.failures}
    assert "outputs match the shape function and dtypes" in failed and "inputs not mutated" in failed


def test_check_op_sees_a_kernel_write_its_input_on_the_device(backend, fresh_registry):
    ok.register_op("Test>Sneaky").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)

    @ok.register_kernel("Test>Sneaky", backend=backend)
    def sneaky(x):
        y = x * 2
        x += 1  # writes the input where it lives: a numpy, pyopencl or cupy array
        return y

    ok.not_differentiable("Test>Sneaky")
    with pytest.raises(CheckOpFailure) as info:
        check_op("Test>Sneaky", [np.zeros(3, np.float32)], backends=[backend], threads=1)
    assert [r.check for r in info.value.report.failures] == ["inputs not mutated"]


def test_check_op_catches_a_zero_gradient_of_a_small_jacobian(fresh_registry):
    ok.register_op("Test>Tiny").input("x: T").output("y: T").attr("T: {float, double}").set_shape_fn(
        ok.shape_fns.unchanged_shape
    )
    ok.register_kernel("Test>Tiny", backend="*")(lambda x: x * 5e-4)
    ok.register_gradient("Test>Tiny")(lambda op, g: [ok.ops.zeros_like(g)])
    with pytest.raises(CheckOpFailure, match="gradient"):
        check_op("Test>Tiny", [np.ones(3, np.float32)], backends=["cpu"], threads=1)


def test_check_op_checks_the_gradients_of_list_inputs(fresh_registry):
    ok.register_op("Test>WeightedSum").input("xs: N * T").output("y: T").attr("N: int >= 1").attr(
        "T: {float, double}"
    ).set_shape_fn(ok.shape_fns.merge_all_inputs)
    ok.register_kernel("Test>WeightedSum", backend="*")(lambda xs: sum((i + 1) * x for i, x in enumerate(xs)))
    right = lambda op, g: [g * float(i + 1) for i in range(len(op.inputs))]  # noqa: E731
    ok.register_gradient("Test>WeightedSum")(lambda op, g: [g] * len(op.inputs))  # wrong past the first
    xs = [np.ones(3, np.float32), np.ones(3, np.float32)]
    with pytest.raises(CheckOpFailure, match="gradient"):
        check_op("Test>WeightedSum", [xs], backends=["cpu"], threads=1)
    with pytest.warns(UserWarning, match="overridden"):
        ok.register_gradient("Test>WeightedSum", override=True)(right)
    report = check_op("Test>WeightedSum", [xs], backends=["cpu"], threads=1)
    assert [r.passed for r in report.results if "gradient" in r.check] == [True]


def test_check_op_compares_with_a_reference(fresh_registry):
    ok.register_op("Test>Answer").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Test>Answer", backend="*")(lambda x: x * 0.0 + 42.0)  # wrong the same way everywhere
    ok.not_differentiable("Test>Answer")
    x = np.ones(3, np.float32)
    assert check_op("Test>Answer", [x], threads=1).passed  # nothing to disagree with
    with pytest.raises(CheckOpFailure, match="reference"):
        check_op("Test>Answer", [x], threads=1, reference=lambda x: x * 2)


def test_a_custom_gradient_may_return_one_gradient_per_argument(backend):
    @ok.custom_gradient
    def f(a, k, b):
        def grad(dy):
            return dy * k, None, dy
        return a * k + b, grad

    a = ok.tensor(np.ones(2, np.float32))
    b = ok.tensor(np.ones(2, np.float32))
    with ok.GradientTape() as tape:
        tape.watch([a, b])
        y = f(a, 5.0, b)
    ga, gb = tape.gradient(y, [a, b])
    assert ga.numpy().tolist() == [5.0, 5.0] and gb.numpy().tolist() == [1.0, 1.0]
