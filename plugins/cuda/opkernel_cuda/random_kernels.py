"""CUDA kernels of TensorFlow's stateless random ops (opkernel.ops.random_ops): the raw
kernels of ``sources._RANDOM``, one thread per Philox group (grid-stride), as the
OpenCL plugin's.  Uniform floats and integers are TensorFlow's bit for bit; normal and
truncated normal values take the logarithm, sine, cosine and root in double, rounded to
float (within an ulp of TensorFlow's CPU numbers; TensorFlow's own GPU kernels use
CUDA's float functions, which differ from its CPU ones too).  The key, counter, shape,
seed and bounds are host-memory arguments.  Over numpy (the kernel table's tests) every
kernel is the CPU plugin's.  cupy has no bfloat16: those outputs have no CUDA kernel.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import opkernel as ok
from opkernel.ops import random_ops as R
from opkernel_cpu import random_kernels as cpu

from . import runtime
from .sources import CTYPES

Row = tuple[str, Any, "dict[str, list[str]] | None", tuple[str, ...]]

FLOATS = ("float16", "float32", "float64")
INTS = ("int32", "int64", "uint32", "uint64")
_INT_ARGS = {"int32": ("int", "unsigned"), "uint32": ("unsigned", "unsigned"),
             "int64": ("long long", "unsigned long long"), "uint64": ("unsigned long long", "unsigned long long")}
_KIND = {cpu.UNIFORM: "uniform", cpu.NORMAL: "normal", cpu.TRUNCATED: "truncated"}


def _fill(op: str, kind: int, dtype: ok.DType, dims: tuple[int, ...], key: tuple[int, int],
          counter: tuple[int, int, int, int], lo: int, span: int) -> Any:
    cp = runtime.STATE.cupy
    if cp is None:  # the table over numpy (tests)
        return cpu.fill(kind, dtype, dims, key, counter, lo, span)
    out = cp.empty(dims, dtype.np)
    size = math.prod(dims)
    if not size:
        return out
    per = R.GROUP[dtype.name]
    words = (np.uint32(key[0]), np.uint32(key[1]), *(np.uint32(c) for c in counter))
    groups = -(-size // per)
    if kind in (cpu.INT, cpu.FULL_INT):
        runtime.launch("philox_int", "philox_int", _INT_ARGS[dtype.name], runtime.grid(groups), runtime.BLOCK,
                       (out, np.int64(size), *words, np.uint64(lo & (2**64 - 1)), np.uint64(span),
                        np.int32(kind == cpu.FULL_INT)))
    elif dtype.name == "float64":
        runtime.launch("philox_double", f"philox_{_KIND[kind]}_double", ("double",), runtime.grid(groups), runtime.BLOCK,
                       (out, np.int64(size), *words))
    else:
        runtime.launch("philox", f"philox_{_KIND[kind]}", (CTYPES[dtype.name],), runtime.grid(groups), runtime.BLOCK,
                       (out, np.int64(size), *words))
    return out


def stateless_multinomial(logits: Any, num_samples: Any, seed: Any, T: ok.DType, output_dtype: ok.DType,
                          **attrs: Any) -> Any:
    op = "StatelessMultinomial"
    cp = runtime.STATE.cupy
    if cp is None or T.name not in ("float32", "float64"):
        return cpu.stateless_multinomial(logits, num_samples, seed, output_dtype=output_dtype)
    batch, classes, n = R.check_multinomial(op, logits, num_samples)
    key, counter = R.key_counter(*R.seed_words(op, seed))
    out = cp.empty((batch, n), output_dtype.np)
    total = batch * n
    if total:
        runtime.launch(
            "multinomial", "multinomial", (CTYPES[T.name], CTYPES[output_dtype.name]), runtime.grid(total),
            runtime.BLOCK, (out, cp.ascontiguousarray(logits), np.int32(classes), np.int64(n), np.int64(total),
                            np.uint32(key[0]), np.uint32(key[1]), *(np.uint32(c) for c in counter)),
        )
    return out


def rng_read_and_skip(resource: Any, alg: Any, delta: Any, **attrs: Any) -> Any:
    """The state (three int64s) read back to the host, moved on and copied into the
    variable's memory (the engine holds its lock); the old state is the result."""
    if runtime.STATE.cupy is None or isinstance(resource, np.ndarray):
        return cpu.rng_read_and_skip(resource, alg, delta)
    op = "RngReadAndSkip"
    R.check_alg(op, alg)
    d = R.check_delta(op, delta)
    old = resource.get()
    resource.set(R.skipped_state(op, old, d))
    return old


def rows() -> list[Row]:
    floats = {"dtype": list(FLOATS)}
    ints = {"dtype": list(INTS)}
    out: list[Row] = [
        (op, fn, {"dtype": ["int32", "int64"]} if op == "StatelessRandomUniformInt" else (ints if "Int" in op else floats),
         host)
        for op, fn, host in R.fill_kernels(_fill)
    ]
    return out + [
        ("StatelessRandomGetKeyCounter", lambda seed, **attrs: R.key_counter_outputs(seed), None, ("seed",)),
        ("StatelessMultinomial", stateless_multinomial, {"T": ["float32", "float64"]}, ("num_samples", "seed")),
        ("RngReadAndSkip", rng_read_and_skip, None, ("alg", "delta")),
    ]
