"""The engine: op dispatch, and the runtime's user-facing names.

The runtime is in rooms, each doing one thing (docs/architecture.md), bottom-up:

- ``opkernel._context``: settings (``ok.config``), backends and the active one, the
  per-context state the dispatch path reads (labels, fallback, traces, profilers);
- ``opkernel._convert``: Python values as tensors (``ok.tensor``), transfers;
- ``opkernel._calls``: a selected kernel made into a call (``Signature``): argument and
  output layout, generated fast calls, error translation, tape recording;
- ``opkernel._binding``: an op call's arguments checked against its OpDef (``bind``);
- ``opkernel._selection``: per-op handles and caches, kernel selection, the fallback;
- this module: ``execute``, the general dispatch path, with the cache of calls that
  pass Python literals; it re-exports the names other packages use (``backend_instance``,
  ``select_kernel``, ``to_tensor``, ``MAX_INTRA_OP_THREADS``, ...).

The path of one call (``ok.ops.add(x, y)``):

1. the generated wrapper calls ``execute(op, inputs, attrs)``;
2. fast path: when every input is a tensor on the active backend, the key
   ``(backend, label, input dtypes, attrs)`` finds a cached ``Signature`` and
   its kernel runs at once;
3. otherwise ``bind`` converts host data to tensors, infers type and length
   attrs from the inputs, fills defaults, validates everything against the
   OpDef, and finds or builds the ``Signature`` (kernel lookup, kernel
   construction, output dtypes), which is cached under both keys.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np

from ._binding import REQUIRED, bind, format_attr
from ._calls import (
    Signature,
    arg_dtypes,
    flatten_outputs,
    group_flat,
    hashable_items,
    host_positions,
    input_lengths,
    kernel_kwargs,
    output_dtypes,
    packer,
    translated,
)
from ._context import (
    ACTIVE,
    DEFAULT,
    LABELS,
    MAX_INTRA_OP_THREADS,
    PROFILERS,
    SLOW_SCOPES,
    TRACER,
    is_tracing,
    label_for,
    not_tracing,
    profiling,
    tracing,
    active_backend,
    available_backends,
    backend_instance,
    backend_status,
    config,
    default_backend,
    get_backend,
    kernel_fallback,
    kernel_label_map,
    reset_backends,
    set_backend,
    use_backend,
)
from ._convert import FRESH_KINDS, to_tensor, transfer
from .autodiff import RECORDING
from ._selection import OpHandle, build_signature, cache_lock, op_handle, reset_handles, select_kernel
from .backend import Backend
from .dtypes import DType
from .op_registry import OpDef
from .tensor import Tensor

__all__ = [
    "active_backend",
    "available_backends",
    "get_backend",
    "set_backend",
    "use_backend",
    "kernel_fallback",
    "backend_instance",
    "backend_status",
    "kernel_label_map",
    "to_tensor",
    "transfer",
    "execute",
    "op_handle",
    "select_kernel",
    "kernel_kwargs",
    "config",
    "MAX_INTRA_OP_THREADS",
    "warmup",
    "memory",
    "execute_by_name",
    # The seam the rooms above the runtime use (the tracer, the profiler, generated
    # wrappers): per-context state and the steps of a call, each room's public names.
    "ACTIVE", "DEFAULT", "LABELS", "PROFILERS", "SLOW_SCOPES", "TRACER", "REQUIRED",
    "default_backend", "label_for", "tracing", "not_tracing", "is_tracing", "profiling", "profiled",
    "bind", "format_attr", "Signature", "OpHandle", "build_signature", "cache_lock", "reset_handles",
    "output_dtypes", "input_lengths", "arg_dtypes", "packer", "group_flat", "flatten_outputs",
    "hashable_items", "translated",
]

# ---------------------------------------------------------------- dispatch

def execute(
    op: OpHandle, inputs: Sequence[Any], attrs: dict[str, Any], label: str | None = None,
    fast_key: tuple[Any, ...] | None = None,
) -> Any:
    """Run ``op`` on the active backend.  ``attrs`` holds the non-inferred attrs given by the caller.

    Generated wrappers try ``op.fast`` themselves first; this is the general path.
    ``fast_key`` is the key a wrapper built for this call when all its inputs
    are tensors on the active backend: the signature is filed under it.
    """
    tracer = TRACER.get() if SLOW_SCOPES[0] else None
    if tracer is not None:
        return tracer(op, inputs, attrs, label)
    be = ACTIVE.get() or default_backend()
    if label is None and SLOW_SCOPES[0]:
        labels = LABELS.get()
        if labels is not None:
            label = labels.get(op.name)
    generation = op.generation
    op_def = op.op_def
    lkey: tuple[Any, ...] | None = None
    flat: list[Any] = []
    if fast_key is None:
        try:
            lkey, flat = _literal_key(op_def, inputs, attrs, be, label)
        except _Uncacheable:
            pass
        else:
            hit = op.literal.get(lkey)
            if hit is not None:
                tensors = _with_literals(hit[1], flat, be, hit[3] if not RECORDING[0] else ())
                if all(t._backend is be for t in tensors):
                    result = profiled(op.name, hit[0], tensors, be) if PROFILERS else hit[0].call(*tensors)
                    return _unaliased(result, flat) if hit[2] else result
    tensors, bound = bind(op_def, inputs, attrs, be)
    full_key = (be, label, *[t._dtype for t in tensors], *hashable_items(bound))
    sig = op.cache.get(full_key)
    if sig is None:
        with op.build_lock:
            sig = op.cache.get(full_key)
            if sig is None:
                sig = build_signature(op, bound, be, label)
                with cache_lock:
                    if op.generation == generation:
                        op.cache[full_key] = sig
    if lkey is not None:
        _remember_literals(op, generation, lkey, sig, tensors, flat)
    if fast_key is not None and label is None and fast_key[0] is be and fast_key not in op.fast:
        # The generated wrapper built the key; every input is a tensor on this backend (else it passes None).
        with cache_lock:
            if op.generation == generation:
                op.fast[fast_key] = sig.call
    result = profiled(op.name, sig, tensors, be) if PROFILERS else sig.call(*tensors)
    if fast_key is None and be.host_memory_is_native:
        return _unaliased(result, [x for v in inputs for x in (v if v.__class__ in (list, tuple) else (v,))])
    return result


def _unaliased(result: Any, items: Sequence[Any]) -> Any:
    """``result`` with no output sharing memory with the host data among ``items``.

    A host backend hands the caller's arrays (and what an ``__array__`` or a buffer
    exposes) to kernels as they are, and a kernel may return a view of its input
    (Identity, Reshape, a full Slice); the caller may change its array after the
    call, so such an output gets its own copy."""
    arrays = [x if isinstance(x, np.ndarray) else np.asarray(x) for x in items if not isinstance(x, FRESH_KINDS)]
    if not arrays:
        return result
    for out in result if isinstance(result, (tuple, list)) else (result,):
        for t in out if isinstance(out, list) else (out,):
            if isinstance(t, Tensor) and isinstance(t._value, np.ndarray):
                if any(np.may_share_memory(t._value, a) for a in arrays):
                    t._value = t._value.copy()  # not yet seen by anyone but a recording tape, which holds t
    return result


class _Uncacheable(Exception):
    """An argument the literal cache cannot key (a numpy array, an object)."""


#: Per op; a full table is emptied, so a loop over changing literals never grows it.
_LITERAL_ENTRIES = 256
_ATOMS = frozenset({int, bool, str, bytes, type(None), DType})
_REQUIRED_TYPE = type(REQUIRED)


def _atom_key(x: Any) -> Any:
    """A literal's key: its class with its value (1, 1.0 and True differ); floats by
    their bits, so 0.0 and -0.0 differ; short lists and tuples element by element."""
    c = x.__class__
    if c in _ATOMS or c is _REQUIRED_TYPE:
        return (c, x)
    if c is float:
        return (c, x.hex())
    if (c is list or c is tuple) and len(x) <= 64:
        return (c, tuple([_atom_key(v) for v in x]))
    raise _Uncacheable


def _item_key(x: Any) -> Any:
    if isinstance(x, Tensor):
        return (x.__class__, x._dtype)  # the tensor itself is passed through
    if isinstance(x, (np.ndarray, np.generic)):
        return (np.ndarray, x.dtype)  # converted on each call: only its dtype decides the signature
    return _atom_key(x)


def _literal_key(
    op_def: OpDef, inputs: Sequence[Any], attrs: Mapping[str, Any], be: Backend, label: str | None
) -> tuple[tuple[Any, ...], list[Any]]:
    """The literal-cache key of a call and its flat input items; raises _Uncacheable."""
    flat: list[Any] = []
    parts: list[Any] = [be, label]
    if len(inputs) != len(op_def.inputs):
        raise _Uncacheable
    for arg, v in zip(op_def.inputs, inputs):
        if arg.is_list:
            if v.__class__ is not list and v.__class__ is not tuple:
                raise _Uncacheable
            parts.append(tuple([_item_key(x) for x in v]))
            flat.extend(v)
        else:
            parts.append(_item_key(v))
            flat.append(v)
    for k, v in attrs.items():
        parts.append(k)
        parts.append(_atom_key(v))
    return tuple(parts), flat


def _with_literals(dtypes: list[DType | None], flat: list[Any], be: Backend, host: tuple[int, ...] = ()) -> list[Tensor]:
    """The call's tensors from a literal-cache entry: each literal or numpy value
    converted to the dtype it took when the entry was made, each tensor as it is.

    ``host``: the positions of literals that the kernel reads in host memory on a
    device backend (its ``host_memory`` inputs: a Reshape's shape, a Transpose's perm).
    Those stay numpy arrays (the kernel's ``to_numpy`` takes them as they are), instead
    of an upload the kernel downloads again: 20-40 us a call on OpenCL.  Only while no
    tape records: the tensor is seen by nothing but this call's kernel."""
    if not host:
        return [x if dt is None else Tensor(be.from_numpy(np.asarray(x, dt.np)), dt, be) for dt, x in zip(dtypes, flat)]
    return [x if dt is None else Tensor(be.from_numpy(np.asarray(x, dt.np)), dt, be) if k not in host
            else Tensor(np.array(x, dt.np), dt, be) for k, (dt, x) in enumerate(zip(dtypes, flat))]


def _remember_literals(
    op: OpHandle, generation: int, key: tuple[Any, ...], sig: Signature, tensors: list[Tensor], flat: list[Any]
) -> None:
    """File a call with literals under ``key``: its signature, and the dtype each
    literal or numpy value converted to.  Values are converted again on every call
    (a shared constant could be written through the ``.numpy()`` of an op that
    returns its input; a numpy value may change between calls, and one of the
    right dtype is passed without a copy).  Tensors are passed through, so none
    may have been moved to another backend by this call."""
    if not all(t is x or not isinstance(x, Tensor) for t, x in zip(tensors, flat)):
        return
    dtypes: list[DType | None] = [None if t is x else t._dtype for t, x in zip(tensors, flat)]
    if any(dt is not None and dt.is_quantized for dt in dtypes):
        return  # quantized conversions check values, not only dtypes
    literal = op.literal
    if len(literal) >= _LITERAL_ENTRIES:
        literal.clear()
    be = sig.backend
    arrays = be.host_memory_is_native and any(isinstance(x, np.ndarray) for x in flat)
    host: tuple[int, ...] = ()
    kdef = sig.kernel
    if kdef.host_memory and not be.host_memory_is_native and type(sig) is Signature and kdef.backend == be.name:
        # the kernel's own host-memory inputs (not a fallback to another backend's kernel)
        at = set(host_positions(sig.op_def, kdef, input_lengths(sig.op_def, sig.attrs)))
        host = tuple(k for k, dt in enumerate(dtypes) if dt is not None and k in at)
    with cache_lock:
        if op.generation == generation:
            literal[key] = (sig, dtypes, arrays, host)


def profiled(name: str, sig: Signature, tensors: Sequence[Tensor], be: Backend) -> Any:
    sync = any(p.synchronize for p in PROFILERS)
    if sync:
        be.synchronize()
    start = time.perf_counter()
    result = sig.call(*tensors)
    if sync:
        be.synchronize()
    elapsed = time.perf_counter() - start
    outs = result if isinstance(result, (tuple, list)) else [result]
    nbytes = sum(int(getattr(o._value, "nbytes", 0)) for o in outs if isinstance(o, Tensor))
    for p in list(PROFILERS):
        p.add(be.name, name, elapsed, nbytes)
    return result


def warmup(backend: str | None = None) -> int:
    """Build every program of ``backend`` (default: the active one) ahead of time."""
    be = backend_instance(backend) if backend else active_backend()
    return be.warmup()


def memory(backend: str | None = None) -> dict[str, int]:
    """Allocator statistics of ``backend`` (default: the active one)."""
    be = backend_instance(backend) if backend else active_backend()
    return be.memory()


def execute_by_name(op_name: str, *inputs: Any, _kernel: str | None = None, **attrs: Any) -> Any:
    """Run an op by name: ``ok.execute("MatMul", a, b, transpose_b=True)``."""
    return execute(op_handle(op_name), inputs, attrs, _kernel)


def _reset_backends_for_tests() -> None:
    """Forget the default backend, every backend instance and every cached signature."""
    reset_backends()
    reset_handles()
