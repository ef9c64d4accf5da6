"""Table-driven op tests: one ``OpCase`` row per op configuration.

A row names the op, makes its inputs, and gives a numpy reference.  The test
modules parametrize ``check_values`` / ``check_shapes`` / ``check_gradient``
over their rows and the ``backend`` fixture, so every row runs on every
installed backend.  Per-backend tolerances and skips live in the row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pytest

import opkernel as ok
from opkernel._infer import infer_shapes
from opkernel.testing import assert_all_close, default_tolerance
from opkernel.testing.gradient_checker import compute_gradient_error

Inputs = Callable[[np.random.Generator, str], Sequence[Any]]


@dataclass(frozen=True)
class OpCase:
    id: str
    op: str                                   # registered op name, e.g. "MatMul"
    inputs: Inputs                            # (rng, dtype name) -> host inputs, one per declared input
    ref: Callable[..., Any]                   # numpy reference: ref(*inputs, **attrs) -> array or tuple
    attrs: dict[str, Any] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float32", "float64")
    grad: bool = True                         # check the gradient against finite differences (float64)
    grad_dtype: str = "float64"
    grad_output: int = 0                      # which flat output the gradient check differentiates
    grad_tol: float = 1e-6
    tol: dict[str, tuple[float, float]] = field(default_factory=dict)  # dtype -> (rtol, atol)
    skip: dict[str, str] = field(default_factory=dict)                 # backend -> reason

    def __str__(self) -> str:
        return self.id


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)):
        return [v for item in x for v in _flat(item)]
    return [x]


def _host(x: Any) -> Any:
    return [np.asarray(v) for v in x] if isinstance(x, list) else np.asarray(x)


def _reference_inputs(inputs: Sequence[Any]) -> list[Any]:
    def widen(a: Any) -> Any:
        if isinstance(a, list):
            return [widen(v) for v in a]
        a = np.asarray(a)
        return a.astype(np.float64) if a.dtype.kind == "f" else a

    return [widen(x) for x in inputs]


def _skip(case: OpCase, backend: str, dtype: str | None = None) -> None:
    if backend in case.skip:
        pytest.skip(case.skip[backend])
    # The inputs' dtype and any dtype attr (an output's: Cast's DstT, Complex's Tout).
    wanted = [ok.as_dtype(dtype)] if dtype is not None else []
    wanted += [v for v in case.attrs.values() if isinstance(v, ok.DType)]
    be = ok.engine.backend_instance(backend)
    for dt in wanted:
        if not be.supports_dtype(dt):
            pytest.skip(f"backend {backend!r} does not hold {dt.name} tensors")


def run(case: OpCase, inputs: Sequence[Any]) -> list[ok.Tensor]:
    return _flat(ok.execute(case.op, *inputs, **case.attrs))


def check_values(case: OpCase, dtype: str, backend: str) -> None:
    """Outputs match the numpy float64 reference; dtypes match the OpDef."""
    _skip(case, backend, dtype)
    inputs = case.inputs(np.random.default_rng(0), dtype)
    outs = run(case, inputs)
    expected = _flat(case.ref(*_reference_inputs(inputs), **case.attrs))
    assert len(outs) == len(expected), f"{case.op}: {len(outs)} outputs, reference gave {len(expected)}"
    for out, exp in zip(outs, expected):
        assert out.backend == backend
        rtol, atol = case.tol.get(dtype, default_tolerance(out.dtype))
        assert_all_close(out.numpy(), np.asarray(exp), rtol=rtol, atol=atol)


def check_shapes(case: OpCase, dtype: str, backend: str) -> None:
    """The shape function, given the inputs' shapes (and integer inputs' values), predicts the outputs."""
    _skip(case, backend, dtype)
    inputs = case.inputs(np.random.default_rng(0), dtype)
    outs = run(case, inputs)
    op_def = ok.op_def(case.op)
    shapes = [[np.shape(v) for v in x] if isinstance(x, list) else np.shape(x) for x in inputs]
    consts = [
        None if isinstance(x, list) or np.asarray(x).dtype.kind in "fc" else np.asarray(x) for x in inputs
    ]
    attrs = {k: v for k, v in case.attrs.items()}
    for arg, x in zip(op_def.inputs, inputs):  # type attrs the shape fn may read
        if arg.type_attr and arg.type_attr not in attrs and not isinstance(x, list):
            attrs.setdefault(arg.type_attr, ok.as_dtype(np.asarray(x).dtype))
    predicted = infer_shapes(op_def, shapes, {k: v for k, v in attrs.items() if k not in op_def.inferred_attrs}, consts)
    assert len(predicted) == len(outs)
    for p, out in zip(predicted, outs):
        assert p.is_compatible_with(ok.TensorShape(out.shape)), f"{case.op}: shape fn said {p}, kernel gave {out.shape}"


def check_gradient(case: OpCase, backend: str) -> None:
    """The registered gradient matches central finite differences (complex inputs and
    outputs as pairs of reals)."""
    _skip(case, backend, case.grad_dtype)
    inputs = list(case.inputs(np.random.default_rng(0), case.grad_dtype))
    diff = [i for i, x in enumerate(inputs) if not isinstance(x, list) and np.asarray(x).dtype.kind in "fc"]

    def f(*xs: ok.Tensor) -> ok.Tensor:
        args = list(inputs)
        for i, x in zip(diff, xs):
            args[i] = x
        return run(case, args)[case.grad_output]

    error = compute_gradient_error(f, [np.asarray(inputs[i]) for i in diff])
    assert error < case.grad_tol, f"{case.op}: gradient error {error:.3g} >= {case.grad_tol}"


def ids(cases: Sequence[OpCase]) -> list[str]:
    return [c.id for c in cases]


def value_params(cases: Sequence[OpCase]) -> list[Any]:
    return [pytest.param(c, d, id=f"{c.id}-{d}") for c in cases for d in c.dtypes]


def randn(*shape: int) -> Inputs:
    """Input maker: one standard-normal array of ``shape`` per call."""
    return lambda rng, dt: [rng.standard_normal(shape).astype(dt)]


def table_tests(cases: Sequence[OpCase]) -> tuple[Callable[..., None], Callable[..., None], Callable[..., None]]:
    """The three table tests of a module's rows: ``test_values, test_shapes,
    test_gradients = optable.table_tests(CASES)``; each runs on every backend."""

    @pytest.mark.parametrize("case,dtype", value_params(cases))
    def test_values(case: OpCase, dtype: str, backend: str) -> None:
        check_values(case, dtype, backend)

    @pytest.mark.parametrize("case,dtype", value_params(cases))
    def test_shapes(case: OpCase, dtype: str, backend: str) -> None:
        check_shapes(case, dtype, backend)

    @pytest.mark.parametrize("case", [c for c in cases if c.grad], ids=str)
    def test_gradients(case: OpCase, backend: str) -> None:
        check_gradient(case, backend)

    return test_values, test_shapes, test_gradients
