"""``check_op``: prove an op correct on every backend with one call (``opkernel.testing.check_op``)."""

from __future__ import annotations

import concurrent.futures
import contextvars
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .. import engine, gradients, op_registry, plugins
from ..errors import KernelNotFoundError, OpTypeError
from ..dtypes import as_dtype
from .._infer import infer_shapes
from ..shapes import TensorShape
from ..tensor import Tensor, Variable
from ._backend_choice import chosen_backends
from ._compare import assert_all_close, default_tolerance
from .gradient_checker import compute_gradient

__all__ = ["CheckOpFailure", "CheckResult", "CheckOpReport", "check_op"]


class CheckOpFailure(AssertionError):
    """Raised by ``check_op`` with every failed check listed; ``.report`` holds them all."""

    def __init__(self, report: CheckOpReport) -> None:
        super().__init__(str(report))
        self.report = report


@dataclass(frozen=True)
class CheckResult:
    """One check on one backend; ``skipped``: it could not run here (``detail`` says why)."""

    backend: str
    check: str
    passed: bool
    detail: str = ""
    skipped: bool = False


@dataclass
class CheckOpReport:
    op: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.passed]

    def __str__(self) -> str:
        lines = [f"check_op({self.op!r}): {'passed' if self.passed else f'{len(self.failures)} failed'}"]
        for r in self.results:
            mark = "skip" if r.skipped else "ok" if r.passed else "FAIL"
            lines.append(f"  [{mark}] {r.backend:>8}  {r.check}{': ' + r.detail if r.detail else ''}")
        return "\n".join(lines)


def _host(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_host(v) for v in x]
    return x.numpy() if isinstance(x, Tensor) else np.array(x)


def _on(backend: str, x: Any, ref: bool) -> Any:
    if isinstance(x, list):
        return [_on(backend, v, False) for v in x]
    t = engine.to_tensor(x, backend=backend)
    return Variable(t, trainable=False) if ref else t


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flat(item)]
    return [] if x is None else [x]


def _run(op: str, backend: str, inputs: Sequence[Any], attrs: Mapping[str, Any], refs: Sequence[bool]) -> list[Tensor]:
    args = [_on(backend, x, r) for x, r in zip(inputs, refs)]
    with engine.use_backend(backend):
        return _flat(engine.execute_by_name(op, *args, **attrs))


def _device_inputs_unchanged(op: str, backend: str, inputs: Sequence[Any], attrs: Mapping[str, Any],
                             refs: Sequence[bool]) -> str:
    """Run ``op`` once more, then read its inputs back from the device.  A backend may
    keep a host copy of what it uploaded (OpenCL does, for small arrays) and read that
    copy back; ``Backend.dirty`` drops it, so a kernel that writes the device memory of
    an input cannot hide behind it."""
    be = engine.backend_instance(backend)
    args = [_on(backend, x, r) for x, r in zip(inputs, refs)]
    with engine.use_backend(backend):
        engine.execute_by_name(op, *args, **attrs)
    for a in _flat(args):
        be.dirty(a.value)
    return _unchanged([_host(x) for x in inputs], [_host(a) for a in args], refs)


def _check(report: CheckOpReport, backend: str, name: str, fn: Any) -> Any:
    try:
        value = fn()
    except Exception as e:  # every failure is collected and reported together
        report.results.append(CheckResult(backend, name, False, f"{type(e).__name__}: {e}"))
        return None
    report.results.append(CheckResult(backend, name, True, value if isinstance(value, str) else ""))
    return value


def check_op(
    op_name: str,
    inputs: Sequence[Any],
    attrs: Mapping[str, Any] | None = None,
    backends: Sequence[str] | None = None,
    *,
    check_gradients: bool = True,
    threads: int = 4,
    rtol: float | None = None,
    atol: float | None = None,
    grad_tol: float = 1e-3,
    reference: Callable[..., Any] | None = None,
) -> CheckOpReport:
    """Run ``op_name`` on every requested backend (default: all available, less those the test
    run leaves out: ``OPKERNEL_TEST_BACKENDS``, ``OPKERNEL_TEST_EXCLUDE``) and check:

    the OpDef finalizes; outputs match the shape function and the declared
    dtypes; results agree with the cpu backend within dtype-aware tolerances
    (whatever ``backends`` names: cpu is the reference whenever it is available
    and has a kernel for the op; when it is not, a ``[skip]`` line printed and
    kept in the report says why, and the backends are compared with the first
    one); with ``reference`` (a numpy function called as
    ``reference(*inputs, **attrs)``, returning one array or a tuple), results
    also agree with it — without one, a kernel that is wrong the same way on
    every backend passes; the registered gradient matches finite differences
    (the error relative to the Jacobian's largest entry); inputs are not
    mutated; concurrent calls from ``threads`` threads agree.
    Returns the report, or raises ``CheckOpFailure`` listing every failure.
    """
    attrs = dict(attrs or {})
    plugins.ensure_loaded()
    report = CheckOpReport(op_name)
    op_def = _check(report, "-", "OpDef finalizes", lambda: op_registry.get_op_def(op_name))
    if op_def is None:
        raise CheckOpFailure(report)
    backends = list(backends or chosen_backends(engine.available_backends()))
    refs = [a.is_ref for a in op_def.inputs]
    host_inputs = [_host(x) for x in inputs]
    baseline: list[np.ndarray] | None = None
    base_name = "cpu" if "cpu" in backends else backends[0]
    if "cpu" not in backends:
        baseline, why = _cpu_reference(op_name, host_inputs, attrs, refs)
        if baseline is not None:
            base_name = "cpu"
        else:
            report.results.append(CheckResult("cpu", "reference", True, why, skipped=True))
            print(f"[skip] check_op({op_name!r}): results not compared with cpu: {why}")
    for backend in sorted(backends, key=lambda b: b != base_name):
        before = [np.copy(v) if not isinstance(v, list) else [np.copy(e) for e in v] for v in host_inputs]
        outs = _check(report, backend, "runs", lambda: _run(op_name, backend, host_inputs, attrs, refs))
        if outs is None:
            continue
        _check(report, backend, "outputs match the shape function and dtypes",
               lambda: _check_shapes_dtypes(op_def, host_inputs, attrs, outs))
        values = [o.numpy() for o in outs]
        if reference is not None:
            expected = reference(*host_inputs, **attrs)
            expected_list = [np.asarray(e) for e in (expected if isinstance(expected, (tuple, list)) else [expected])]
            _check(report, backend, "agrees with the reference", lambda: _agree(values, expected_list, rtol, atol))
        if baseline is None:
            baseline = values
        else:
            _check(report, backend, f"agrees with {base_name}", lambda: _agree(values, baseline, rtol, atol))
        # The caller's arrays (which a kernel may get without a copy, as on cpu), then the
        # inputs' buffers on the device.
        _check(report, backend, "inputs not mutated",
               lambda: _unchanged(before, host_inputs, refs) + _device_inputs_unchanged(op_name, backend, host_inputs, attrs, refs))
        if threads > 1 and not op_def.is_stateful:
            _check(report, backend, f"{threads} threads agree",
                   lambda: _concurrent(op_name, backend, host_inputs, attrs, refs, values, threads))
        if check_gradients and gradients.has_gradient(op_name):
            _check(report, backend, "gradient matches finite differences",
                   lambda: _gradient(op_name, backend, host_inputs, attrs, refs, grad_tol))
    if not report.passed:
        raise CheckOpFailure(report)
    return report


def _cpu_reference(op: str, inputs: Sequence[Any], attrs: Mapping[str, Any],
                   refs: Sequence[bool]) -> tuple[list[np.ndarray] | None, str]:
    """The cpu backend's results to compare other backends with, or None and why not."""
    status = {name: reason for name, _, reason in engine.backend_status()}
    if "cpu" not in status:
        return None, "the cpu backend is not installed (pip install opkernel-cpu)"
    if status["cpu"] is not None:
        return None, f"the cpu backend is unavailable: {status['cpu']}"
    try:
        return [o.numpy() for o in _run(op, "cpu", inputs, attrs, refs)], ""
    except KernelNotFoundError as e:
        return None, f"cpu has no kernel for it ({e})"


def _check_shapes_dtypes(op_def: Any, inputs: Sequence[Any], attrs: Mapping[str, Any], outs: list[Tensor]) -> str:
    shapes = [[np.shape(v) for v in x] if isinstance(x, list) else np.shape(x) for x in inputs]
    consts = [None if isinstance(x, list) or np.asarray(x).dtype.kind in "fc" else np.asarray(x) for x in inputs]
    given = {k: v for k, v in attrs.items() if k not in op_def.inferred_attrs}
    predicted = infer_shapes(op_def, shapes, given, consts)
    for i, (p, o) in enumerate(zip(predicted, outs)):
        if not p.is_compatible_with(TensorShape(o.shape)):
            raise AssertionError(f"output {i}: shape function says {p}, kernel produced {o.shape}")
        native = np.asarray(o.numpy()).dtype
        if native != o.dtype.np:
            raise AssertionError(f"output {i}: declared {o.dtype.name}, kernel produced {native}")
    return ""


def _agree(values: list[np.ndarray], baseline: list[np.ndarray], rtol: float | None, atol: float | None) -> str:
    for v, b in zip(values, baseline):
        d_rtol, d_atol = default_tolerance(b.dtype)
        assert_all_close(v, b, rtol=rtol if rtol is not None else max(d_rtol, 1e-5),
                         atol=atol if atol is not None else max(d_atol, 1e-6))
    return ""


def _same_bits(x: Any, y: Any) -> bool:
    """Equal, NaN for NaN (a NaN input is not a modified one)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind in "fc" and x.shape == y.shape and x.dtype == y.dtype:
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool(np.array_equal(x, y))


def _unchanged(before: list[Any], after: list[Any], refs: Sequence[bool]) -> str:
    for b, a, r in zip(before, after, refs):
        if not r and not all(_same_bits(x, y) for x, y in zip(_flat(b), _flat(a))):
            raise AssertionError("an input was modified by the kernel")
    return ""


def _concurrent(op: str, backend: str, inputs: Sequence[Any], attrs: Mapping[str, Any], refs: Sequence[bool],
                expected: list[np.ndarray], threads: int) -> str:
    # Each call runs in a copy of the caller's context, so the threads see what the caller
    # set for its own context (ok.kernel_fallback, ok.kernel_label_map, ok.use_backend).
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(contextvars.copy_context().run, _run, op, backend, inputs, attrs, refs)
                   for _ in range(threads * 2)]
        for f in futures:
            for v, e in zip(f.result(), expected):
                assert_all_close(v.numpy(), e, rtol=0, atol=0)
    return ""


def _gradient(op: str, backend: str, inputs: Sequence[Any], attrs: Mapping[str, Any], refs: Sequence[bool], tol: float) -> str:
    def inexact(x: Any) -> bool:
        return bool(np.asarray(x).dtype.kind in "fc")

    # (input, element) of every floating-point or complex tensor: element is None for a
    # single tensor, an index into a list input (AddN's, Concat's values) otherwise.
    where: list[tuple[int, int | None]] = []
    for i, x in enumerate(inputs):
        if isinstance(x, list):
            where += [(i, j) for j, v in enumerate(x) if inexact(v)]
        elif inexact(x) and not refs[i]:
            where.append((i, None))
    if not where:
        return "no floating-point or complex inputs"
    be = engine.backend_instance(backend)

    def value(i: int, j: int | None) -> Any:
        return inputs[i] if j is None else inputs[i][j]

    def widest(x: Any) -> Any:  # complex inputs widen to complex128, real ones to float64
        return np.complex128 if np.asarray(x).dtype.kind == "c" else np.float64

    # Differentiate in float64 (complex128) when the device and the op have it: finite differences need the
    # precision.  An op whose types leave float64 out (LRN) is differentiated in the inputs' own dtype.
    wide = all(be.supports_dtype(as_dtype(widest(value(i, j)))) for i, j in where)
    point = [np.asarray(value(i, j), widest(value(i, j)) if wide else np.asarray(value(i, j)).dtype) for i, j in where]

    def f(*xs: Tensor) -> Tensor:
        call = [list(x) if isinstance(x, list) else x for x in inputs]
        for (i, j), x in zip(where, xs):
            if j is None:
                call[i] = x
            else:
                call[i][j] = x
        with engine.use_backend(backend):
            out: Tensor = _flat(engine.execute_by_name(op, *call, **attrs))[0]
            return out

    with engine.use_backend(backend):
        try:
            theoretical, numerical = compute_gradient(f, [engine.to_tensor(p) for p in point])
        except OpTypeError:
            if not wide:
                raise
            point = [np.asarray(value(i, j)) for i, j in where]
            theoretical, numerical = compute_gradient(f, [engine.to_tensor(p) for p in point])
    error = max((float(np.max(np.abs(t - n))) for t, n in zip(theoretical, numerical) if t.size), default=0.0)
    scale = max((float(np.max(np.abs(n))) for n in numerical if n.size), default=0.0)
    relative = error / max(scale, 1e-6)  # a zero gradient of a small Jacobian must not pass
    if relative > tol:
        raise AssertionError(f"max |theoretical - numerical| = {error:.3g}, {relative:.3g} of the Jacobian's scale > {tol}")
    return f"max error {error:.2g} ({relative:.2g} relative)"
