"""CPU kernels of TensorFlow's stateless random ops (opkernel.ops.random_ops).

The numbers come from the native module's ``philox`` (Philox 4x32-10 and TensorFlow's
distributions, with the C library's ``logf``/``sincosf``, the functions TensorFlow's CPU
kernels call: TensorFlow's bits), shared out on the intra-op pool, one Philox group per
4 (or 2) outputs, so the thread count never changes a number.  Without the native module
the same arithmetic runs in numpy (``_words`` and the formulas below): uniform and
integer numbers are still TensorFlow's exactly; normal ones take the logarithm, sine and
cosine in float64 rounded to float32, which equals the C library's float functions
except in rare last-bit cases.

float16 and bfloat16 outputs: uniform ones from 10 (7) random bits, as TensorFlow's
Uint16ToHalf (Uint16ToBfloat16); normal and truncated ones computed in float32 and
rounded, as TensorFlow's kernels do.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import opkernel as ok
from opkernel.errors import ResourceExhaustedError
from opkernel.ops import random_ops as R

from . import sharding

UNIFORM, NORMAL, TRUNCATED, INT, FULL_INT = R.UNIFORM, R.NORMAL, R.TRUNCATED, R.INT, R.FULL_INT
_NATIVE_TYPES = ("float32", "float64", "int32", "uint32", "int64", "uint64")


def _threads(size: int) -> int:
    if size < 1 << 16:
        return 1
    return min(ok.config.intra_op_parallelism_threads or sharding.cores(), max(1, size >> 15))


def fill(kind: int, dtype: ok.DType, shape: tuple[int, ...], key: tuple[int, int], counter: tuple[int, int, int, int],
         lo: int = 0, span: int = 1) -> np.ndarray:
    """A new array of ``dtype`` and ``shape`` of TensorFlow's numbers of ``kind``."""
    size = math.prod(shape)
    half = dtype.name in ("float16", "bfloat16")
    compute = ok.float32 if half and kind != UNIFORM else dtype  # half and bfloat16 normals: float32, then rounded
    native = sharding.native_module()
    if native is not None and compute.name in _NATIVE_TYPES:
        out = np.empty(shape, compute.np)
        if native.philox(kind, key, counter, out, lo & (2**64 - 1), span, _threads(size)) == 0:
            return out if compute is dtype else out.astype(dtype.np)
    out = _numpy_fill(kind, dtype if kind == UNIFORM else compute, size, key, counter, lo, span).reshape(shape)
    return out if out.dtype == dtype.np else out.astype(dtype.np)


# ---------------------------------------------------------------- the numpy path


def _words(counter: tuple[int, int, int, int], key: tuple[int, int], calls: int) -> np.ndarray:
    return R.philox_words(counter, key, calls).astype(np.uint64)


def _words_at(counter: tuple[int, int, int, int], key: tuple[int, int], offsets: np.ndarray) -> np.ndarray:
    return R.philox_at(counter, key, offsets).astype(np.uint64)


def _unit_float(w: np.ndarray) -> Any:
    return (w & np.uint64(0x7FFFFF)).astype(np.float32) * np.float32(2.0**-23)


def _unit_double(hi: np.ndarray, lo: np.ndarray) -> Any:
    return (((hi & np.uint64(0xFFFFF)) << np.uint64(32)) | lo).astype(np.float64) * 2.0**-52


def _box_muller_float(x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u1 = np.maximum(_unit_float(x0), np.float32(1.0e-7))
    v1 = (2.0 * math.pi * _unit_float(x1).astype(np.float64)).astype(np.float32)
    u2 = np.sqrt(np.float32(-2.0) * np.log(u1.astype(np.float64)).astype(np.float32))
    wide = v1.astype(np.float64)
    return np.sin(wide).astype(np.float32) * u2, np.cos(wide).astype(np.float32) * u2


def _box_muller_double(x0: np.ndarray, x1: np.ndarray, x2: np.ndarray, x3: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u1 = np.maximum(_unit_double(x0, x1), 1.0e-7)
    v1 = 2 * math.pi * _unit_double(x2, x3)
    u2 = np.sqrt(-2.0 * np.log(u1))
    return np.sin(v1) * u2, np.cos(v1) * u2


def _numpy_fill(kind: int, dtype: ok.DType, size: int, key: tuple[int, int], counter: tuple[int, int, int, int],
                lo: int, span: int) -> np.ndarray:
    per = R.GROUP[dtype.name]
    groups = -(-size // per)
    if kind == TRUNCATED:
        return _numpy_truncated(dtype, size, groups, key, counter)
    w = _words(counter, key, groups).reshape(groups, 4)
    name = dtype.name
    out: Any
    if kind == UNIFORM:
        if name == "float64":
            out = np.stack([_unit_double(w[:, 0], w[:, 1]), _unit_double(w[:, 2], w[:, 3])], axis=1)
        elif name in ("float16", "bfloat16"):  # 10 (7) mantissa bits: exact in either type
            mantissa = 0x3FF if name == "float16" else 0x7F
            out = ((w & np.uint64(mantissa)).astype(np.float32) / np.float32(mantissa + 1)).astype(dtype.np)
        else:
            out = _unit_float(w)
    elif kind == NORMAL:
        if name == "float64":
            out = np.stack(_box_muller_double(w[:, 0], w[:, 1], w[:, 2], w[:, 3]), axis=1)
        else:
            a, b = _box_muller_float(w[:, 0], w[:, 1])
            c, d = _box_muller_float(w[:, 2], w[:, 3])
            out = np.stack([a, b, c, d], axis=1)
    else:
        bits = (w[:, 1::2] << np.uint64(32)) | w[:, 0::2] if per == 2 else w
        if kind == INT:
            with np.errstate(over="ignore"):
                m = np.uint64(2**64 - 1 if per == 2 else 2**32 - 1)
                out = (np.uint64(lo & int(m)) + bits % np.uint64(span)) & m
        else:
            out = bits
        out = out.astype(np.uint64 if per == 2 else np.uint32).view(dtype.np)  # wrapped to its width
    return out.reshape(-1)[:size]  # type: ignore[no-any-return]


def _numpy_truncated(dtype: ok.DType, size: int, groups: int, key: tuple[int, int],
                     counter: tuple[int, int, int, int]) -> np.ndarray:
    """Each group draws Box-Muller pairs from its own 256 reserved calls (128 for float64)
    and keeps values of magnitude below 2 until it has its outputs: vectorized over the
    groups, one pair of draws per round."""
    wide = dtype.name == "float64"
    per, stride = (2, 128) if wide else (4, 256)
    out = np.zeros((groups, per), np.float64 if wide else np.float32)
    filled = np.zeros(groups, np.int64)
    g = np.arange(groups, dtype=np.uint64)
    words_per_pair = 4 if wide else 2
    for pair in range(stride * 4 // words_per_pair):
        todo = np.nonzero(filled < per)[0]
        if not todo.size:
            break
        call, lane = divmod(pair * words_per_pair, 4)
        w = np.stack([_words_at(counter, key, g[todo] * np.uint64(stride) + np.uint64(call))[:, k]
                      for k in range(lane, lane + words_per_pair)])
        pair_values = _box_muller_double(*w) if wide else _box_muller_float(w[0], w[1])
        for value in pair_values:
            keep = (np.abs(value) < 2.0) & (filled[todo] < per)
            rows = todo[keep]
            out[rows, filled[rows]] = value[keep]
            filled[rows] += 1
    return out.reshape(-1)[:size]


# ---------------------------------------------------------------- kernels


def _output_shape(op: str, shape: Any, dtype: ok.DType) -> tuple[int, ...]:
    dims = R.check_shape(op, shape)
    size = math.prod(dims)
    if size * np.dtype(dtype.np).itemsize > 1 << 40:
        raise ResourceExhaustedError(f"op {op!r}: an output of shape {list(dims)} is too large", op=op)
    return dims


def _fill_op(op: str, kind: int, dtype: ok.DType, dims: tuple[int, ...], key: tuple[int, int],
             counter: tuple[int, int, int, int], lo: int, span: int) -> np.ndarray:
    if math.prod(dims) * np.dtype(dtype.np).itemsize > 1 << 40:
        raise ResourceExhaustedError(f"op {op!r}: an output of shape {list(dims)} is too large", op=op)
    return fill(kind, dtype, dims, key, counter, lo, span)


def stateless_multinomial(logits: Any, num_samples: Any, seed: Any, output_dtype: ok.DType, **attrs: Any) -> np.ndarray:
    """TensorFlow's CPU rule: per row, the cumulative sums (float64) of exp(logit - max)
    over the finite logits; each sample a uniform double (two words of one Philox stream
    that runs on from row to row: TensorFlow's numbers when its kernel runs the batch on
    one thread) times the total, placed by binary search (the first class whose
    cumulative sum exceeds it)."""
    op = "StatelessMultinomial"
    batch, classes, n = R.check_multinomial(op, logits, num_samples)
    key, counter = R.key_counter(*R.seed_words(op, seed))
    out = np.empty((batch, n), output_dtype.np)
    if not out.size:
        return out
    u = fill(UNIFORM, ok.float64, (batch * n,), key, counter).reshape(batch, n)  # the same words, two a double
    x = np.asarray(logits)
    wide = x.astype(np.float64)
    finite = np.isfinite(wide)
    for b in range(batch):
        row = wide[b]
        top = row[finite[b]].max() if finite[b].any() else float(np.finfo(x.dtype).min if x.dtype.kind == "f" else
                                                                    np.iinfo(x.dtype).min)
        with np.errstate(all="ignore"):
            terms = np.where(finite[b], np.exp(row - top), 0.0)
        cdf = np.cumsum(terms)  # sequential sums, as TensorFlow's running total
        out[b] = np.searchsorted(cdf, u[b] * cdf[-1], side="right")
    return out


def rng_read_and_skip(resource: np.ndarray, alg: Any, delta: Any, **attrs: Any) -> np.ndarray:
    """The state as it was; the variable's memory moved on in place (the engine holds its lock)."""
    op = "RngReadAndSkip"
    R.check_alg(op, alg)
    d = R.check_delta(op, delta)
    old = np.array(resource, copy=True)
    resource[...] = R.skipped_state(op, old, d)
    return old


def register_all() -> None:
    floats = {"dtype": ["float16", "bfloat16", "float32", "float64"]}
    ints = {"dtype": ["int32", "int64", "uint32", "uint64"]}
    for op, fn, host in R.fill_kernels(_fill_op):
        allowed = {"dtype": ["int32", "int64"]} if op == "StatelessRandomUniformInt" else (
            ints if "Int" in op else floats)
        ok.register_kernel(op, backend="cpu", type_constraints=allowed, host_memory=host)(fn)
    table: list[tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]] = [
        ("StatelessRandomGetKeyCounter", lambda seed, **attrs: R.key_counter_outputs(seed), None, ("seed",)),
        ("StatelessMultinomial", stateless_multinomial, None, ("num_samples", "seed")),
        ("RngReadAndSkip", rng_read_and_skip, None, ("alg", "delta")),
    ]
    for op, fn, constraints, host in table:
        ok.register_kernel(op, backend="cpu", type_constraints=constraints, host_memory=host)(fn)
