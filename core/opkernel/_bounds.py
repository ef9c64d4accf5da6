"""Bounds before work: refusing an op call whose outputs could not be allocated.

Most ops create outputs no larger than their inputs (or a fixed multiple), so
their sizes need no check per call.  An op whose output sizes come from input
*values* (Fill's ``dims``, Tile's ``multiples``) marks its shape function with
:func:`opkernel.shapes.output_size_from`; :func:`size_guard` wraps the call of
such an op's signature so that a size past int64 or past the host's available
memory fails with an error naming the op and those inputs, before the kernel
allocates anything.  Small calls cost one cheap bound; the shape function runs
only when the bound says the outputs could be large.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from .backend import Backend
from .dtypes import DType
from .errors import InvalidArgumentError, ResourceExhaustedError
from .hostmem import host_available_bytes
from .shapes import OpDefLike, run_shape_fn
from .tensor import Tensor

__all__ = ["TENSOR_OVERHEAD", "check_output_count", "host_available_bytes", "size_guard"]

#: Below this many bytes of (bounded) output, a call is let through without the shape function.
CHEAP_BYTES = 64 << 20
#: An integer input with more values than this is not bounded cheaply.
_CHEAP_VALUES = 64
_INT64_MAX = 2**63 - 1
#: Exact sizes remembered per signature; a full table is emptied.
_REMEMBERED = 256


#: Host memory one output tensor takes at least, whatever its size (the Tensor, the
#: native array object and its header): what a list output of n tensors costs.
TENSOR_OVERHEAD = 256


def check_output_count(op: str, attr: str, n: int) -> None:
    """Refuse an output list of ``n`` tensors (``num_split``, Unpack's ``num``) whose
    tensor objects alone would not fit in the host's available memory: a
    ResourceExhaustedError naming the op and the attr, before anything is made."""
    need = n * TENSOR_OVERHEAD
    room = host_available_bytes()
    if room is not None and need > room:
        raise ResourceExhaustedError(
            f"op {op!r}: attr {attr!r} = {n} asks for {n} output tensors, which need at least "
            f"{_amount(need)} of host memory for the tensor objects alone; the host has {_amount(room)} available",
            op=op, requested_bytes=need,
        )


def _amount(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{nbytes} bytes" if unit == "bytes" else f"{nbytes} bytes ({size:.1f} {unit})"
        size /= 1024
    return f"{nbytes} bytes"  # unreachable; keeps mypy's return analysis simple


def _flat_positions(op_def: Any, lengths: Sequence[int | None], names: Sequence[str]) -> list[tuple[int, str]]:
    """(flat input position, label) of every tensor of the named inputs."""
    known = {arg.name for arg in op_def.inputs}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidArgumentError(
            f"op {op_def.name!r}: its shape function is marked output_size_from({', '.join(map(repr, names))}) "
            f"but the op has no input {unknown[0]!r}; its inputs: {', '.join(sorted(known))}",
            op=op_def.name,
        )
    out: list[tuple[int, str]] = []
    pos = 0
    for arg, n in zip(op_def.inputs, lengths):
        width = 1 if n is None else n
        if arg.name in names:
            out.extend((pos + k, arg.name if n is None else f"{arg.name}[{k}]") for k in range(width))
        pos += width
    return out


def size_guard(
    call: Callable[..., Any], op_def: OpDefLike, attrs: dict[str, Any], be: Backend,
    out_dtypes: Sequence[DType], lengths: Sequence[int | None], names: Sequence[str],
) -> Callable[..., Any]:
    """``call`` preceded by the check of its outputs' sizes (see the module doc).

    The exact sizes of a call (the shape function's) are remembered per input
    shapes and size values, so a loop repeating one large call (a convolution's
    input gradient) runs the shape function once; the available memory is read
    on every call whose outputs are large.
    """
    positions = _flat_positions(op_def, lengths, names)
    indices = [i for i, _ in positions]
    itemsize = max((dt.size for dt in out_dtypes), default=0)
    to_numpy = be.to_numpy
    prod = math.prod
    sizes: dict[Any, tuple[int, str]] = {}

    def check(xs: Sequence[Tensor], hosts: list[Any]) -> None:
        key: Any = None
        if all(h.size <= _CHEAP_VALUES for h in hosts):
            key = (tuple(tuple(x._value.shape) for x in xs), tuple(tuple(h.ravel().tolist()) for h in hosts))
        known = sizes.get(key) if key is not None else None
        if known is None:
            values: list[Any] = [None] * len(xs)
            for i, h in zip(indices, hosts):
                values[i] = h
            shapes = run_shape_fn(op_def, [tuple(x._value.shape) for x in xs], attrs, values)
            known = _total_bytes(op_def, shapes, out_dtypes, lambda: _given(positions, hosts))
            if key is not None:
                if len(sizes) >= _REMEMBERED:
                    sizes.clear()
                sizes[key] = known
        total, largest = known
        if total > CHEAP_BYTES and be.host_memory_is_native:
            room = host_available_bytes()
            if room is not None and total > room:
                raise ResourceExhaustedError(
                    f"op {op_def.name!r}: {largest}: its outputs need {_amount(total)} but the host has "
                    f"{_amount(room)} available; {_given(positions, hosts)}",
                    op=op_def.name, backend=be.name, requested_bytes=total,
                )

    def guarded(*xs: Tensor) -> Any:
        bound = 1
        for x in xs:
            n = prod(x._value.shape)
            if n > bound:
                bound = n
        hosts = [to_numpy(xs[i]._value) for i in indices]  # once: on a device each read waits for it
        for host in hosts:
            if host.dtype.kind not in "iu" or host.size > _CHEAP_VALUES:
                bound = -1  # no cheap bound: floats (Range's) or many values
                break
            for v in host.ravel().tolist():
                bound *= abs(v) + 1
        if bound < 0 or bound * itemsize > CHEAP_BYTES:
            check(xs, hosts)
        return call(*xs)

    return guarded


def _given(positions: Sequence[tuple[int, str]], hosts: Sequence[Any]) -> str:
    return "; ".join(f"input {label!r} is {_shown(h)}" for (_, label), h in zip(positions, hosts))


def _total_bytes(
    op_def: OpDefLike, shapes: Sequence[Any], out_dtypes: Sequence[DType], given: Callable[[], str]
) -> tuple[int, str]:
    """The bytes the outputs of known shape take, and a description of the largest;
    InvalidArgumentError for a size no tensor can have (its bytes past int64).
    ``given`` describes the sizing inputs, for the error only."""
    outputs = list(op_def.outputs)
    total, largest, described = 0, -1, ""
    for k, (shape, dt) in enumerate(zip(shapes, out_dtypes)):
        n = shape.num_elements()
        if n is None:
            continue
        name = f"output {outputs[k].name!r}" if len(outputs) == len(shapes) else f"output {k}"
        what = f"{name} would have shape {shape.as_list()} ({n} elements of {dt.name})"
        if n * dt.size > _INT64_MAX:
            raise InvalidArgumentError(
                f"op {op_def.name!r}: {what}, more than a tensor can hold (its size in bytes must fit int64); {given()}",
                op=op_def.name,
            )
        total += n * dt.size
        if n * dt.size > largest:
            largest, described = n * dt.size, what
    if total > _INT64_MAX:
        raise InvalidArgumentError(
            f"op {op_def.name!r}: its outputs would take {total} bytes, more than int64 can count; {given()}",
            op=op_def.name,
        )
    return total, described


def _shown(value: Any) -> str:
    try:
        text = repr(value.tolist())
    except AttributeError:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
