"""The CPU backend's fused elementwise groups (``Backend.fuse_elementwise``).

A node is fusable when its kernel computes one numpy ufunc: the kernels made by
``sharding.elementwise`` (Add, Sub, Mul, Exp, Tanh, Neg, Square, ...) and those that say
so with a ``ufunc`` attribute (Erf, RealDiv of floats), for float32 and float64.  A group
runs in ``_native.fused``: numpy's own inner loop of each ufunc over sub-blocks of 256
elements that stay in the L1 cache, blocks shared out on the intra-op pool, so every
value is bit-identical to the unfused kernels'.  Without the native module, or for
arrays it does not take (not C-contiguous), the group runs as the ufuncs in turn.

Floating-point warnings: a fused group is quiet, as TensorFlow is (the unfused kernels
of some ops let numpy warn on overflow).

Planned memory: an output is written into a donated input's array
(``ElementwiseProgram.donated``) when no instruction after the one that computes it
reads that input (the evaluator writes an output sub-block by sub-block as its
instruction runs, so a later reader would see the result; the instruction itself may
read it: numpy's loops take an input that is exactly their output).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

import opkernel as ok
from opkernel.backend import ElementwiseProgram

from . import sharding

_TYPES = ("float32", "float64")
#: The fewest elements a pool thread gets a share of: a fused group costs a few
#: nanoseconds an element (several ufuncs), so 32 K elements are ~100 µs of work.
_PER_SHARD = 1 << 15


def ufunc_of(kernel: Any, dtype: ok.DType) -> np.ufunc | None:
    """The ufunc ``kernel`` computes for ``dtype`` (its ``ufuncs[dtype name]`` where it
    names one per type, else its ``ufunc``), or None."""
    per_type = getattr(kernel, "ufuncs", None)
    fn = per_type.get(dtype.name) if per_type is not None else getattr(kernel, "ufunc", None)
    if not isinstance(fn, np.ufunc) or dtype.name not in getattr(kernel, "ufunc_dtypes", _TYPES) or dtype.name not in _TYPES:
        return None
    if fn.nout != 1 or fn.nin not in (1, 2):
        return None
    code = dtype.np.char
    return fn if code * (fn.nin + 1) in {t.replace("->", "") for t in fn.types} else None


def fusable(kernel: Any, dtype: ok.DType) -> bool:
    return ufunc_of(kernel, dtype) is not None


def compile_program(program: ElementwiseProgram) -> Callable[..., tuple[np.ndarray, ...]] | None:
    found = [ufunc_of(kernel, program.dtype) for kernel, _ in program.instructions]
    ufuncs = [u for u in found if u is not None]
    if len(ufuncs) != len(found):
        return None
    n_in = len(program.layouts)
    instructions = tuple((u, srcs, n_in + k) for k, (u, (_, srcs)) in enumerate(zip(ufuncs, program.instructions)))
    layouts, out_slots, shape, npdt = program.layouts, program.outputs, program.shape, program.dtype.np
    sizes = [mod for _, mod in layouts]
    native = sharding.native_module()
    config = ok.config
    size = int(np.prod(shape))
    cores = sharding.cores()
    reuse = _reuse(program, instructions)

    def in_turn(arrays: tuple[Any, ...]) -> tuple[np.ndarray, ...]:
        slots = list(arrays)
        with np.errstate(all="ignore"):
            for u, srcs, _ in instructions:
                slots.append(u(*[slots[s] for s in srcs]))
        outs = []
        for s in out_slots:
            v = np.ascontiguousarray(slots[s], npdt)  # C order, as the native path gives
            outs.append(v if v.shape == shape else np.broadcast_to(v, shape).copy())
        return tuple(outs)

    def run(*arrays: Any) -> tuple[np.ndarray, ...]:
        if native is not None:
            for a, n in zip(arrays, sizes):
                if type(a) is not np.ndarray or a.dtype is not npdt or a.size != n or not a.flags.c_contiguous:
                    break
            else:
                outs = tuple(np.empty(shape, npdt) if d is None else _writable(arrays[d], shape, npdt)
                             for d in reuse)
                threads = min(config.intra_op_parallelism_threads or cores, max(1, size // _PER_SHARD))
                if native.fused(instructions, arrays, layouts, outs, out_slots, threads) >= 0:  # flags: quiet
                    return outs
        return in_turn(arrays)

    run.__name__ = "fused_" + "_".join(program.ops)
    run.reuse = reuse  # type: ignore[attr-defined]
    return run


def _reuse(program: ElementwiseProgram, instructions: tuple[tuple[Any, tuple[int, ...], int], ...]) -> list[int | None]:
    """For each output, the donated input whose array it is written into, or None."""
    n_in = len(program.layouts)
    last_read = {s: k for k, (_, srcs, _) in enumerate(instructions) for s in srcs}  # the last instruction reading s
    free = [d for d in program.donated if 0 <= d < n_in]
    chosen: list[int | None] = []
    for slot in program.outputs:
        k = slot - n_in  # the instruction computing this output
        d = next((d for d in free if last_read.get(d, -1) <= k), None)
        if d is not None:
            free.remove(d)
        chosen.append(d)
    return chosen


def _writable(a: np.ndarray, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """A donated input as an output (checked: a plain writeable array of the result's
    shape and type; else a new one)."""
    if a.shape == shape and a.flags.writeable and a.flags.c_contiguous and a.base is None:
        return a
    return np.empty(shape, dtype)
