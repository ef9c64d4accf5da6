"""Gradient coverage: which gradients can run on a backend, and which kernels they lack.

Nothing here is a hand-kept list of dependencies.  Each registered gradient runs
once on small example inputs (``_examples``) on a *probe* backend, registered for
the length of the report inside ``isolated_registries``.  The probe has a kernel
for every op; each one asks the kernel registry what the real backend would run
for that call (same op, same types):

* a kernel of the backend's own: noted, and the cpu kernel computes the values;
* only a generic kernel (composed of other ops): that kernel runs on the probe, so
  the ops it calls are noted too (the *transitive* needs);
* nothing: noted as missing, and the cpu kernel computes the values, so one missing
  kernel does not hide the next.

The backend itself is never instantiated: a report for a backend that is not
available here (cuda on a machine without a GPU) is still exact.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .. import engine, gradients, kernels, op_registry, plugins
from ..autodiff import GradientTape
from ..backend import Backend
from ..dtypes import DType, as_dtype
from ..errors import InvalidArgumentError, KernelNotFoundError
from ..hookspecs import hookimpl
from ..op_registry import OpDef
from ..tensor import Tensor
from ._isolation import isolated_registries
from ._examples import Example, example_inputs

__all__ = ["GradientCoverage", "STATUSES", "gradient_coverage"]

PROBE = "opkernel-gradient-probe"
STATUSES = ("ok", "missing-kernels", "no-gradient", "not-differentiable", "error")
_lock = threading.Lock()  # one report at a time: the probe's registrations are process-wide


@dataclass(frozen=True)
class GradientCoverage:
    """Whether the gradient of ``op`` can run on one backend.

    ``status``: ``"ok"``; ``"missing-kernels"`` (``missing`` lists the ops, sorted,
    whose kernels the gradient needs on the backend and the backend lacks);
    ``"no-gradient"`` (none registered); ``"not-differentiable"`` (marked so);
    ``"error"`` (``error`` says why: example inputs could not be built, or the
    gradient failed for another reason).  ``direct``: the ops the gradient function
    itself calls; ``transitive``: those and the ops that the backend's generic
    kernels among them call in turn (all sorted).
    """

    op: str
    status: str
    missing: tuple[str, ...] = ()
    direct: tuple[str, ...] = ()
    transitive: tuple[str, ...] = ()
    error: str | None = None


class _ProbeBackend(Backend):
    """A host backend holding numpy arrays; never the default."""

    name = PROBE
    priority = -(1 << 30)
    array_types = (np.ndarray,)
    host_memory_is_native = True

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.array(array)

    def to_numpy(self, value: Any) -> np.ndarray:
        return value  # type: ignore[no-any-return]

    def empty(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        return np.empty(shape, dtype.np)


class _Recorder:
    """The calls the probe sees while ``recording``: (op, depth, how)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.recording = False
        self.depth = 0
        self.calls: list[tuple[str, int, str]] = []


def _wrap(x: Any, be: Backend) -> Any:
    if isinstance(x, list):
        return [_wrap(v, be) for v in x]
    arr = np.asarray(x)
    return Tensor(arr, as_dtype(arr.dtype), be)


def _unwrap(x: Any) -> Any:
    """A kernel's result: native arrays, nested as the engine packed the tensors."""
    if isinstance(x, Tensor):
        return x._value
    if isinstance(x, list):
        return [_unwrap(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_unwrap(v) for v in x)
    return x


def _probe_kernel(op_name: str, rec: _Recorder) -> Callable[..., Any]:
    def kernel(*inputs: Any, **attrs: Any) -> Any:
        op_def = engine.op_handle(op_name).op_def
        try:
            chosen: kernels.KernelDef | None = engine.select_kernel(op_def, rec.target, attrs)
        except KernelNotFoundError:
            chosen = None
        generic = chosen is not None and chosen.is_generic and not chosen.is_class
        if rec.recording:
            rec.calls.append((op_name, rec.depth, "missing" if chosen is None else "generic" if generic else "kernel"))
        if generic and chosen is not None:
            rec.depth += 1
            try:
                be = engine.backend_instance(PROBE)
                return _unwrap(chosen.impl(*_wrap(list(inputs), be), **engine.kernel_kwargs(chosen.impl, attrs)))
            finally:
                rec.depth -= 1
        explicit = {k: v for k, v in attrs.items() if k not in op_def.inferred_attrs}
        cpu = engine.backend_instance("cpu")
        with engine.use_backend("cpu"):
            return _unwrap(engine.execute(engine.op_handle(op_name), _wrap(list(inputs), cpu), explicit))

    return kernel


class _ProbePlugin:
    def __init__(self, rec: _Recorder, ops: Sequence[str]) -> None:
        self.rec = rec
        self.ops = ops

    @hookimpl
    def opkernel_register_backends(self) -> list[type[Backend]]:
        return [_ProbeBackend]

    @hookimpl
    def opkernel_register_kernels(self) -> None:
        for op in self.ops:
            kernels.register_kernel(op, backend=PROBE)(_probe_kernel(op, self.rec))


def _preferred_types(op_def: OpDef, backend: str) -> dict[str, list[DType]]:
    """For each type attr, the dtypes the backend's own kernels of the op accept."""
    prefer: dict[str, list[DType]] = {}
    for k in kernels.kernels_for(op_def.name, backend):
        for attr, allowed in k.type_constraints.items():
            prefer.setdefault(attr, []).extend(allowed)
    return prefer


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flat(item)]
    return [] if x is None else [x]


def _differentiable(t: Tensor) -> bool:
    return t.dtype.is_floating or t.dtype.is_complex


def _on_probe(inputs: list[Any]) -> list[Any]:
    return [[engine.to_tensor(v, backend=PROBE) for v in x] if isinstance(x, list) else engine.to_tensor(x, backend=PROBE)
            for x in inputs]


def _forward(op_name: str, example: Example) -> None:
    inputs, attrs = example
    with engine.use_backend(PROBE):
        engine.execute_by_name(op_name, *_on_probe(inputs), **attrs)


def _run_gradient(op_name: str, example: Example, rec: _Recorder) -> None:
    """Differentiate every floating-point output, then (for several outputs) the first
    alone: the tape fills the others' gradients with zeros, which need kernels too."""
    inputs, attrs = example
    args = _on_probe(inputs)
    sources = [t for t in _flat(args) if _differentiable(t)]
    with engine.use_backend(PROBE):
        with GradientTape(persistent=True) as tape:
            for s in sources:
                tape.watch(s)
            outs = _flat(engine.execute_by_name(op_name, *args, **attrs))
        targets = [o for o in outs if _differentiable(o)]
        if not sources or not targets:
            return
        for chosen in [targets, targets[:1]] if len(targets) > 1 else [targets]:
            seeds = [engine.to_tensor(np.ones(o.shape, o.dtype.np), backend=PROBE) for o in chosen]
            rec.recording = True
            try:
                tape.gradient(chosen, sources, output_gradients=seeds)
            finally:
                rec.recording = False


def _one(op_name: str, backend: str, rec: _Recorder) -> GradientCoverage:
    if gradients.is_not_differentiable(op_name):
        return GradientCoverage(op_name, "not-differentiable")
    if not gradients.has_gradient(op_name):
        return GradientCoverage(op_name, "no-gradient")
    try:
        op_def = op_registry.get_op_def(op_name)
        examples = example_inputs(op_def, lambda ex: _forward(op_name, ex), _preferred_types(op_def, backend))
    except Exception as e:  # noqa: BLE001 -- reported, not raised: one op must not hide the others
        return GradientCoverage(op_name, "error", error=f"could not build inputs: {type(e).__name__}: {e}")
    rec.calls = []
    try:
        for example in examples:
            _run_gradient(op_name, example, rec)
    except Exception as e:  # noqa: BLE001
        return GradientCoverage(op_name, "error", error=f"the gradient failed: {type(e).__name__}: {e}")
    missing = tuple(sorted({op for op, _, how in rec.calls if how == "missing"}))
    return GradientCoverage(
        op_name,
        "missing-kernels" if missing else "ok",
        missing=missing,
        direct=tuple(sorted({op for op, depth, _ in rec.calls if depth == 0})),
        transitive=tuple(sorted({op for op, _, _ in rec.calls})),
    )


def gradient_coverage(backend: str, ops: Sequence[str] | None = None) -> list[GradientCoverage]:
    """For every op with a kernel of its own on ``backend`` (or the ``ops`` named),
    sorted by op name: can its gradient run on ``backend``, and which kernels is it
    missing there.  Needs the cpu backend (it computes the values); ``backend`` need
    not be available here, only its kernels registered.  A probe backend is registered
    for the report's duration (inside ``isolated_registries``): register nothing from
    other threads meanwhile.
    """
    plugins.ensure_loaded()
    known = ({name for name, _, _ in engine.backend_status()} | {k.backend for k in kernels.all_kernels()}) - {kernels.GENERIC}
    if backend not in known:
        raise InvalidArgumentError(f"gradient coverage: unknown backend {backend!r}; known: {', '.join(sorted(known))}")
    if "cpu" not in engine.available_backends():
        raise InvalidArgumentError("gradient coverage needs the cpu backend (opkernel-cpu) to compute values")
    if ops is None:
        names = sorted({k.op for k in kernels.all_kernels() if k.backend == backend})
    else:
        if isinstance(ops, str):
            raise InvalidArgumentError(f"gradient coverage: ops must be a list of op names, got the string {ops!r}")
        names = sorted(set(ops))
        unknown = [n for n in names if not op_registry.is_registered(n)]
        if unknown:
            raise InvalidArgumentError(
                f"gradient coverage: no op named {', '.join(map(repr, unknown))} is registered", op=unknown[0]
            )
    rec = _Recorder(backend)
    with _lock, isolated_registries():
        plugins.register_plugin(_ProbePlugin(rec, op_registry.op_names()), name=PROBE)
        return [_one(name, backend, rec) for name in names]
