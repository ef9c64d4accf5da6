"""OpenCL kernels of the reductions: Sum, Mean, Prod, Max, Min, All, Any, ArgMax,
ArgMin.  One table in ``register_all``.

The host groups the input as [outer, reduced, inner] (transposing first when
the reduced axes are not adjacent) and picks one of three kernels:

* ``cols``  (inner > 1): one work-item per output, striding through the reduced axis
  (GPUs: neighbouring work-items read neighbouring addresses); on CPU devices
  ``cols_block``, one work-item per block of 16 outputs streaming the rows;
* ``rows1`` (inner == 1, short rows or many of them): one work-item per row;
* ``tree``  (inner == 1, long rows): a work-group of 64 per chunk of a row, a tree
  reduction in local memory; rows split into several chunks get a second pass
  over the partial results, so one long row still uses every compute unit.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

import opkernel as ok
from opkernel.ops.math_ops import arg_axis, kernel_reduction_axes

from .array_kernels import BE, gather_view, zeros
from .backend import OpenCLBackend, ctype
from .common import ALL, FLOATS, INTS, REALS, scalar
from .elementwise import KernelRow, float32_compute, register_table
from .programs import family

LS = 64
#: Outputs per work-item of ``cols_block``.
CB = 16

#: (float, integer) combine of the running ``a`` with the next ``b``.  A NaN wins;
#: between equal floats the later one (so Max of [-0.0, 0.0] is 0.0 and of [0.0, -0.0]
#: is -0.0), as TensorFlow's Eigen reducers keep the element just read on a tie.
_COMBINE = {
    "Sum": ("a + b", "a + b"), "Mean": ("a + b", "a + b"), "Prod": ("a * b", "a * b"),
    "Max": ("(a > b || OK_ISNAN(a)) ? a : b", "a >= b ? a : b"),
    "Min": ("(a < b || OK_ISNAN(a)) ? a : b", "a <= b ? a : b"),
    "All": ("a && b", "a && b"), "Any": ("a || b", "a || b"),
}


def _identity(op: str, dtype: str) -> str:
    if op in ("Sum", "Mean", "Any"):
        return "0"
    if op in ("Prod", "All"):
        return "1"
    if dtype in FLOATS:
        return "-INFINITY" if op == "Max" else "INFINITY"
    info = np.iinfo(np.dtype(dtype))
    v = info.min if op == "Max" else info.max
    suffix = "L" if dtype in ("int64",) else ("UL" if dtype == "uint64" else "")
    return f"({v}{suffix})" if not (dtype == "int64" and v == info.min) else "(-9223372036854775807L - 1)"


def _accumulator(op: str, dtype: str) -> str:
    """The C type to accumulate in: TensorFlow's Mean sums 8- to 32-bit integers in 64
    bits (reduction_ops.h), so a uint8 mean of [200, 101] is 150, not a wrapped 22."""
    if op == "Mean" and dtype in INTS and np.dtype(dtype).itemsize < 8:
        return "ulong" if dtype.startswith("u") else "long"
    return ctype(ok.as_dtype(dtype))


def _tree(name: str, In: str, Out: str, last: bool, ordered: bool = False) -> str:
    """A work-group per (output, chunk of the row); ``last`` finishes (the Mean's division).

    ``ordered`` combines the elements in row order (each work-item a contiguous run,
    then neighbouring runs pairwise), for a combine that is not symmetric: float
    Max/Min keep the later of two equal values (signed zeros).  Otherwise work-items
    stride through the row, which GPUs read faster."""
    store = "finish(scratch[0], count)" if last else "scratch[0]"
    if ordered:
        scan = ("int per = (hi - lo + LS - 1) / LS; int r0 = min(hi, lo + lid * per); int r1 = min(hi, r0 + per);\n"
                "  for (int r = r0; r < r1; ++r) acc = combine(acc, p[r]);")
        step = ("for (int s = 1; s < LS; s <<= 1) {\n"
                "    if (lid % (2 * s) == 0) scratch[lid] = combine(scratch[lid], scratch[lid + s]);")
    else:
        scan = "for (int r = lo + lid; r < hi; r += LS) acc = combine(acc, p[r]);"
        step = ("for (int s = LS / 2; s > 0; s >>= 1) {\n"
                "    if (lid < s) scratch[lid] = combine(scratch[lid], scratch[lid + s]);")
    return f"""
__kernel void {name}(__global {Out}* out, __global const {In}* x, int R, int G, int chunk, int count) {{
  __local A scratch[LS];
  int grp = get_group_id(0); int o = grp / G; int g = grp % G; int lid = get_local_id(0);
  int lo = g * chunk; int hi = min(R, lo + chunk);
  __global const {In}* p = x + (long)o * R;
  A acc = IDENTITY;
  {scan}
  scratch[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  {step}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  if (lid == 0) out[grp] = {store};
}}"""


def _source(op: str, dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    A = _accumulator(op, dtype)
    combine = _COMBINE[op][0 if dtype in FLOATS else 1]
    final = "(T)(a / (A)count)" if op == "Mean" else "a"
    ordered = op in ("Max", "Min") and dtype in FLOATS
    return f"""
#define T {T}
#define A {A}
#define IDENTITY {_identity(op, dtype)}
#define LS {LS}
#define CB {CB}
inline A combine(A a, A b) {{ return {combine}; }}
inline T finish(A a, int count) {{ return {final}; }}
__kernel void rows1(__global T* out, __global const T* x, int R, int count) {{
  int o = get_global_id(0); __global const T* p = x + (long)o * R; A acc = IDENTITY;
  for (int r = 0; r < R; ++r) acc = combine(acc, p[r]);
  out[o] = finish(acc, count);
}}
__kernel void cols(__global T* out, __global const T* x, int R, int I, int count) {{
  int g = get_global_id(0); int o = g / I; int i = g % I;
  __global const T* p = x + (long)o * R * I + i; A acc = IDENTITY;
  for (int r = 0; r < R; ++r) acc = combine(acc, p[(long)r * I]);
  out[g] = finish(acc, count);
}}
// cols on CPU devices: a work-item per block of CB adjacent outputs, streaming the rows
// (one work-item per output strides through memory and is not vectorised: 2x slower).
// Whole blocks loop to the constant CB; only the last, partial block to its width.
__kernel void cols_block(__global T* out, __global const T* x, int R, int I, int count) {{
  int c0 = get_global_id(0) * CB; int o = get_global_id(1); if (c0 >= I) return;
  __global const T* p = x + (long)o * R * I + c0; __global T* q = out + (long)o * I + c0;
  A acc[CB];
  for (int c = 0; c < CB; ++c) acc[c] = IDENTITY;
  if (c0 + CB <= I) {{
    for (int r = 0; r < R; ++r, p += I) for (int c = 0; c < CB; ++c) acc[c] = combine(acc[c], p[c]);
    for (int c = 0; c < CB; ++c) q[c] = finish(acc[c], count);
  }} else {{
    int w = I - c0;
    for (int r = 0; r < R; ++r, p += I) for (int c = 0; c < w; ++c) acc[c] = combine(acc[c], p[c]);
    for (int c = 0; c < w; ++c) q[c] = finish(acc[c], count);
  }}
}}
// One pass (tree), or two: partial results in the accumulator type (tree_part), then
// their reduction (tree_final).
{_tree("tree", "T", "T", True, ordered)}
{_tree("tree_part", "T", "A", False, ordered)}
{_tree("tree_final", "A", "T", True, ordered)}
#undef T
#undef A
#undef IDENTITY
"""


_OPS = {
    "Sum": FLOATS + INTS, "Mean": FLOATS + INTS, "Prod": FLOATS + INTS,
    "Max": REALS, "Min": REALS, "All": ("bool",), "Any": ("bool",),
}
for _op, _dts in _OPS.items():
    family(f"reduce:{_op}", _dts)(functools.partial(_source, _op))




def _group(be: OpenCLBackend, op: str, x: Any, axes: tuple[int, ...]) -> tuple[Any, int, int, int]:
    """x as [O, R, I] (a transposed copy when the reduced axes are not adjacent)."""
    shape = x.shape
    if axes and axes != tuple(range(axes[0], axes[-1] + 1)):
        rest = [d for d in range(len(shape)) if d not in axes]
        x = gather_view(be, op, x, lambda g: np.transpose(g, rest + list(axes)))
        shape = x.shape
        axes = tuple(range(len(rest), len(shape)))
    if not axes:
        return x, int(math.prod(shape)), 1, 1
    O = int(math.prod(shape[: axes[0]]))
    R = int(math.prod(shape[axes[0] : axes[-1] + 1]))
    I = int(math.prod(shape[axes[-1] + 1 :]))
    return x, O, R, I


def _out_shape(shape: tuple[int, ...], axes: tuple[int, ...], keep: bool) -> tuple[int, ...]:
    if keep:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def reduce(be: OpenCLBackend, op: str, x: Any, axes: tuple[int, ...], keep: bool, dtype: str) -> Any:
    out_shape = _out_shape(x.shape, axes, keep)
    if all(x.shape[a] == 1 for a in axes):
        # Nothing to reduce: TensorFlow's reduction is then a reshape of the input (its -0.0
        # stays -0.0, where adding it to the identity 0 would not).
        return be.copy(x).reshape(out_shape)
    grouped, O, R, I = _group(be, op, x, axes)
    n_out = O * I
    if n_out == 0:
        return be.new_array(out_shape, x.dtype)
    if R == 0:
        if op == "Mean" and dtype in FLOATS:
            value: Any = np.nan
        else:
            value = {"Sum": 0, "Mean": 0, "Prod": 1, "All": 1, "Any": 0}.get(op)
            if value is None:
                value = (-np.inf if op == "Max" else np.inf) if dtype in FLOATS else (
                    np.iinfo(x.dtype).min if op == "Max" else np.iinfo(x.dtype).max)
        out = be.new_array(out_shape, x.dtype)
        be.launch1d(be.programs.kernel("fill", dtype, "fill", op), out.size, out.base_data, scalar(x.dtype, value))
        return out
    fam = f"reduce:{op}"
    out = be.new_array(out_shape, x.dtype)
    count = np.int32(R)
    if I > 1:
        if be.is_cpu:
            be.launch(be.programs.kernel(fam, dtype, "cols_block", op), (-(-I // CB), O), None, out.base_data,
                      grouped.base_data, np.int32(R), np.int32(I), count)
        else:
            be.launch1d(be.programs.kernel(fam, dtype, "cols", op), n_out, out.base_data, grouped.base_data, np.int32(R), np.int32(I), count)
        return out
    if R <= 256 or (O >= 64 and R <= 8192):
        be.launch1d(be.programs.kernel(fam, dtype, "rows1", op), O, out.base_data, grouped.base_data, np.int32(R), count)
        return out
    G = max(1, min(-(-R // (LS * 64)), -(-64 // O), 256))
    chunk = -(-R // G)
    if G == 1:
        tree = be.programs.kernel(fam, dtype, "tree", op)
        be.launch(tree, (O * LS,), (LS,), out.base_data, grouped.base_data, np.int32(R), np.int32(1), np.int32(chunk), count)
        return out
    wide = {"long": np.int64, "ulong": np.uint64}.get(_accumulator(op, dtype))
    partial = be.new_array((O, G), np.dtype(wide) if wide is not None else x.dtype)
    be.launch(be.programs.kernel(fam, dtype, "tree_part", op), (O * G * LS,), (LS,), partial.base_data,
              grouped.base_data, np.int32(R), np.int32(G), np.int32(chunk), count)
    be.launch(be.programs.kernel(fam, dtype, "tree_final", op), (O * LS,), (LS,), out.base_data,
              partial.base_data, np.int32(G), np.int32(1), np.int32(G), count)
    return out


def _reduction(op: str) -> Any:
    def kernel(input: Any, reduction_indices: np.ndarray, keep_dims: bool, **attrs: Any) -> Any:
        axes = kernel_reduction_axes(op, input.ndim, reduction_indices)
        dtype = "bool" if op in ("All", "Any") else attrs["T"].name
        return reduce(BE(), op, input, axes, keep_dims, dtype)

    kernel.__name__ = op
    return kernel


# ---------------------------------------------------------------- ArgMax / ArgMin


def _arg_source(op: str, key: str) -> str:
    dtype, index = key.split(":")
    T, I = ctype(ok.as_dtype(dtype)), ctype(ok.as_dtype(index))
    cmp = ">" if op == "ArgMax" else "<"
    # TensorFlow's CPU kernel (Eigen's ArgMaxPairReducer): from (0, the lowest finite
    # value) move only to a strictly greater element, so NaN is never picked.
    load = "p[(long)r * I]"
    if dtype in FLOATS:
        start = ("-" if op == "ArgMax" else "") + ("DBL_MAX" if dtype == "float64" else "FLT_MAX")
    elif dtype == "float16":  # read as float, from half's own lowest (highest) finite value
        start, load = ("-" if op == "ArgMax" else "") + "65504.0f", "vload_half((long)r * I, p)"
    elif dtype == "bool":
        start = "0" if op == "ArgMax" else "1"
    else:
        start = _identity("Max" if op == "ArgMax" else "Min", dtype)  # the type's lowest (highest) value
    V = "float" if dtype == "float16" else T
    return f"""
#define T {T}
__kernel void arg(__global {I}* out, __global const T* x, int R, int I) {{
  int g = get_global_id(0); int o = g / I; int i = g % I;
  __global const T* p = x + (long)o * R * I + i;
  {V} best = {start}; int at = 0;
  for (int r = 0; r < R; ++r) {{ {V} v = {load}; if (v {cmp} best) {{ best = v; at = r; }} }}
  out[g] = at;
}}
#undef T
"""


_ARG_KEYS = tuple(f"{t}:{i}" for t in ALL + ("float16",) for i in ("int32", "int64"))
for _op in ("ArgMax", "ArgMin"):
    family(f"arg:{_op}", _ARG_KEYS)(functools.partial(_arg_source, _op))


def _arg(op: str) -> Any:
    def kernel(input: Any, dimension: np.ndarray, output_type: ok.DType, T: ok.DType, **attrs: Any) -> Any:
        axis = arg_axis(op, input.shape, dimension)
        be = BE()
        out = be.new_array(tuple(n for d, n in enumerate(input.shape) if d != axis), output_type.np)
        if out.size:
            R = input.shape[axis]
            I = int(math.prod(input.shape[axis + 1 :]))
            k = be.programs.kernel(f"arg:{op}", f"{T.name}:{output_type.name}", "arg", op)
            be.launch1d(k, out.size, out.base_data, input.base_data, np.int32(R), np.int32(I))
        return out

    kernel.__name__ = op
    return kernel


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    axes = ("reduction_indices",)
    table: list[KernelRow] = [
        (op, float32_compute(_reduction(op)), None if op in ("All", "Any") else {"T": list(dts) + ["float16"]}, axes)
        for op, dts in _OPS.items()
    ]
    table += [
        # float16 read as is: widened to float32 first, the scan's start would be float32's lowest
        ("ArgMax", _arg("ArgMax"), {"T": list(ALL) + ["float16"]}, ("dimension",)),
        ("ArgMin", _arg("ArgMin"), {"T": list(ALL) + ["float16"]}, ("dimension",)),
    ]
    register_table(table)


__all__ = ["reduce", "register_all", "zeros"]
