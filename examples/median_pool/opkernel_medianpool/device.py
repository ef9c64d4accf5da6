"""The device source of median pooling, one body for OpenCL C and CUDA C.

Four kernels:

* ``median3x3``: 3x3 windows wholly inside the input.  One work-item computes
  ``ROW_OUTPUTS`` neighbouring outputs of a row for ``V`` channels (a vector type
  on OpenCL, one channel on CUDA); each input column's three rows are sorted once
  and shared by the windows that contain it, the rest of the 19-exchange
  median-of-9 network (Paeth; Devillard's ``opt_med9``) is done per output.
* ``median_pool``: any other window (other sizes, SAME borders), one work-item per
  output, its window in private memory: a full 3x3 window goes through the
  median-of-9 network, anything else is sorted with an odd-even transposition
  network, positions outside the input filled with the type's largest value (NaN
  for floats) so that the ``(cnt - 1) / 2``-th smallest is the lower median of the
  ``cnt`` elements inside.  Both are branch-free min/max sequences, in which NaN
  sorts after every number.
* ``median_pos``: the flat input position of each output's median, the first in
  row-major window order among the in-bounds elements equal to it (the rule of
  the CPU and generic kernels too).
* ``median_pool_grad``: one work-item per input element sums the gradients of the
  outputs whose median it is (deterministic, no atomics).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DIALECTS", "CTYPES", "ROW_OUTPUTS", "source", "fill_literal"]

#: Outputs of one row that one work-item of ``median3x3`` computes.
ROW_OUTPUTS = 8

#: C type of each dtype the device kernels handle (the same names in OpenCL C and CUDA C,
#: except the 64-bit and unsigned ones, spelled per dialect below).
CTYPES = {
    "opencl": {
        "float32": "float", "float64": "double", "int8": "char", "int16": "short", "int32": "int",
        "int64": "long", "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
    },
    "cuda": {
        "float32": "float", "float64": "double", "int8": "signed char", "int16": "short", "int32": "int",
        "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
        "uint64": "unsigned long long",
    },
}

DIALECTS = {
    "opencl": """\
#if V == 1
#define VT T
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#else
#define VT CAT(T, V)
#define VLOAD(p) (*(__global const VT*)(p))  /* aligned: C % V == 0 and buffers are aligned */
#define VSTORE(v, p) (*(__global VT*)(p) = (v))
#endif
#if IS_FLOAT  /* NaN sorts after every number: the comparisons of LO and HI, per component */
#define VMIN(a, b) LO(a, b)
#define VMAX(a, b) HI(a, b)
#else
#define VMIN(a, b) min(a, b)
#define VMAX(a, b) max(a, b)
#endif
#define KERNEL __kernel void
#define DEVICE inline
#define GLOBAL __global
#define GID ((IDX)get_global_id(0))
""",
    "cuda": """\
#define VT T
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#define VMIN(a, b) LO(a, b)
#define VMAX(a, b) HI(a, b)
#define KERNEL extern "C" __global__ void
#define DEVICE __device__ inline
#define GLOBAL
#define GID ((IDX)blockIdx.x * blockDim.x + threadIdx.x)
#define NAN __int_as_float(0x7fffffff)
""",
}

_BODY = r"""
#define K (KH * KW)
/* NaN sorts after every number (x != x only for NaN, never for integers). */
#define LO(a, b) ((b) < (a) || (a) != (a) ? (b) : (a))
#define HI(a, b) ((a) < (b) || (b) != (b) ? (b) : (a))
#define SORT2(a, b) { const T lo_ = LO(a, b); b = HI(a, b); a = lo_; }
#define DIMS const int H, const int W, const int C, const int OH, const int OW, \
             const int SH, const int SW, const int TOP, const int LEFT

/* The k-th smallest of v (odd-even transposition sort: K rounds of compare-exchanges). */
DEVICE T kth(T v[K], const int k) {
    for (int round = 0; round < K; ++round) {
        for (int a = round & 1; a + 1 < K; a += 2) SORT2(v[a], v[a + 1]);
    }
    return v[k];
}

#if K == 9
/* The median of 9 values in 19 exchanges (Paeth; Devillard's opt_med9). */
DEVICE T med9(T p[9]) {
    SORT2(p[1], p[2]); SORT2(p[4], p[5]); SORT2(p[7], p[8]);
    SORT2(p[0], p[1]); SORT2(p[3], p[4]); SORT2(p[6], p[7]);
    SORT2(p[1], p[2]); SORT2(p[4], p[5]); SORT2(p[7], p[8]);
    SORT2(p[0], p[3]); SORT2(p[5], p[8]); SORT2(p[4], p[7]);
    SORT2(p[3], p[6]); SORT2(p[1], p[4]); SORT2(p[2], p[5]);
    SORT2(p[4], p[7]); SORT2(p[4], p[2]); SORT2(p[6], p[4]);
    SORT2(p[4], p[2]);
    return p[4];
}
#define FULL_MEDIAN(v) med9(v)
#else
#define FULL_MEDIAN(v) kth(v, (K - 1) / 2)
#endif

/* The median of the window of output (b, oy, ox, ch); *first: the flat position of its
   first in-bounds element. */
DEVICE T window_median(GLOBAL const T* x, const IDX b, const int oy, const int ox, const int ch, DIMS, IDX* first) {
    const int y0 = oy * SH - TOP, x0 = ox * SW - LEFT;
    const IDX base = b * H * W * C + ch;
    T v[K];
    if (y0 >= 0 && x0 >= 0 && y0 + KH <= H && x0 + KW <= W) {
        for (int a = 0; a < KH; ++a)
            for (int c = 0; c < KW; ++c) v[a * KW + c] = x[base + ((IDX)(y0 + a) * W + x0 + c) * C];
        *first = base + ((IDX)y0 * W + x0) * C;
        return FULL_MEDIAN(v);
    }
    int cnt = 0;
    for (int a = 0; a < KH; ++a) {
        for (int c = 0; c < KW; ++c) {
            const int yy = y0 + a, xx = x0 + c;
            const int inside = yy >= 0 && yy < H && xx >= 0 && xx < W;
            v[a * KW + c] = inside ? x[base + ((IDX)yy * W + xx) * C] : (T)FILL;
            cnt += inside;
        }
    }
    *first = base + ((IDX)(y0 < 0 ? 0 : y0) * W + (x0 < 0 ? 0 : x0)) * C;
    return kth(v, (cnt - 1) / 2);
}

/* The outputs in rows [R0, R0 + NR) and columns [C0, C0 + NC) (a border strip, or all). */
KERNEL median_pool(GLOBAL T* y, GLOBAL const T* x, const IDX n, DIMS, const int R0, const int NR, const int C0, const int NC) {
    const IDX i = GID;
    if (i >= n) return;
    const int ch = (int)(i % C);
    IDX r = i / C;
    const int ox = C0 + (int)(r % NC); r /= NC;
    const int oy = R0 + (int)(r % NR);
    const IDX b = r / NR;
    IDX first;
    y[((b * OH + oy) * OW + ox) * C + ch] = window_median(x, b, oy, ox, ch, H, W, C, OH, OW, SH, SW, TOP, LEFT, &first);
}

KERNEL median_pos(GLOBAL IDX* pos, GLOBAL const T* x, const IDX n, DIMS) {
    const IDX i = GID;
    if (i >= n) return;
    const int ch = (int)(i % C);
    IDX r = i / C;
    const int ox = (int)(r % OW); r /= OW;
    const int oy = (int)(r % OH);
    const IDX b = r / OH;
    IDX first;
    const T med = window_median(x, b, oy, ox, ch, H, W, C, OH, OW, SH, SW, TOP, LEFT, &first);
    const IDX base = b * H * W * C + ch;
    IDX found = first;  /* never kept: the median is one of the window's elements */
    for (int a = KH - 1; a >= 0; --a) {
        for (int c = KW - 1; c >= 0; --c) {
            const int yy = oy * SH - TOP + a, xx = ox * SW - LEFT + c;
            if (yy >= 0 && yy < H && xx >= 0 && xx < W) {
                const IDX at = base + ((IDX)yy * W + xx) * C;
                if (x[at] == med || (x[at] != x[at] && med != med)) found = at;  /* a NaN median: the first NaN */
            }
        }
    }
    pos[i] = found;
}

#if K == 9
/* 3x3 windows wholly inside the input: one work-item computes R neighbouring outputs of a row
   for V channels at once.  Each input column's three rows are sorted once and shared by the
   outputs whose windows contain it (the first stage of the median-of-9 network); what is left
   per output is the max of the lows, the min of the highs and two medians of three.  Three
   sorted columns are live at a time, so registers suffice for any R. */
DEVICE VT med3(const VT a, const VT b, const VT c) { return VMAX(VMIN(a, b), VMIN(VMAX(a, b), c)); }

#define SORTED_COLUMN(j, lo, mid, hi) { \
    const IDX col_ = (IDX)(x0 + (j) < W ? x0 + (j) : W - 1) * C;  /* past the last output: any column */ \
    const VT p_ = VLOAD(row + col_), q_ = VLOAD(row + stride + col_), s_ = VLOAD(row + 2 * stride + col_); \
    const VT l_ = VMIN(p_, q_), h_ = VMAX(p_, q_), m_ = VMAX(l_, s_); \
    lo = VMIN(l_, s_); mid = VMIN(h_, m_); hi = VMAX(h_, m_); }

KERNEL median3x3(GLOBAL T* y, GLOBAL const T* x, const IDX n, DIMS, const int R0, const int NR, const int C0, const int NC) {
    const IDX i = GID;
    if (i >= n) return;
    const int cv = (int)(i % (C / V));
    IDX r = i / (C / V);
    const int blocks = (NC + R - 1) / R;
    const int ox0 = C0 + (int)(r % blocks) * R; r /= blocks;
    const int oy = R0 + (int)(r % NR);
    const IDX b = r / NR;
    const int x0 = ox0 * SWC - LEFT;
    const IDX stride = (IDX)W * C;
    GLOBAL const T* row = x + (b * H + oy * SH - TOP) * stride + cv * V;
    GLOBAL T* out = y + ((b * OH + oy) * OW + ox0) * C + cv * V;
    const int count = C0 + NC - ox0 < R ? C0 + NC - ox0 : R;
    VT l0, m0, h0, l1, m1, h1, l2, m2, h2;
    SORTED_COLUMN(0, l0, m0, h0);
    SORTED_COLUMN(1, l1, m1, h1);
    for (int k = 0; k < R; ++k) {  /* a fixed count, so the loop unrolls; stores past the row are skipped */
        const int j = k * SWC;
#if SWC == 1
        SORTED_COLUMN(j + 2, l2, m2, h2);
#elif SWC == 2
        if (k) { l0 = l2; m0 = m2; h0 = h2; SORTED_COLUMN(j + 1, l1, m1, h1); }
        SORTED_COLUMN(j + 2, l2, m2, h2);
#else
        if (k) { SORTED_COLUMN(j, l0, m0, h0); SORTED_COLUMN(j + 1, l1, m1, h1); }
        SORTED_COLUMN(j + 2, l2, m2, h2);
#endif
        const VT a = VMAX(VMAX(l0, l1), l2);
        const VT c = VMIN(VMIN(h0, h1), h2);
        if (k < count) VSTORE(med3(a, med3(m0, m1, m2), c), out + (IDX)k * C);
#if SWC == 1
        l0 = l1; m0 = m1; h0 = h1; l1 = l2; m1 = m2; h1 = h2;
#endif
    }
}
#endif

KERNEL median_pool_grad(GLOBAL T* dx, GLOBAL const T* dy, GLOBAL const IDX* pos, const IDX n, DIMS) {
    const IDX j = GID;
    if (j >= n) return;
    const int ch = (int)(j % C);
    IDX r = j / C;
    const int xx = (int)(r % W); r /= W;
    const int yy = (int)(r % H);
    const IDX b = r / H;
    const int ry = yy + TOP - KH + 1, rx = xx + LEFT - KW + 1;
    const int oy0 = ry <= 0 ? 0 : (ry + SH - 1) / SH, ox0 = rx <= 0 ? 0 : (rx + SW - 1) / SW;
    const int oy1 = (yy + TOP) / SH < OH - 1 ? (yy + TOP) / SH : OH - 1;
    const int ox1 = (xx + LEFT) / SW < OW - 1 ? (xx + LEFT) / SW : OW - 1;
    T acc = (T)0;
    for (int oy = oy0; oy <= oy1; ++oy) {
        for (int ox = ox0; ox <= ox1; ++ox) {
            const IDX o = ((b * OH + oy) * OW + ox) * C + ch;
            if (pos[o] == j) acc += dy[o];
        }
    }
    dx[j] = acc;
}
"""


def fill_literal(dialect: str, dtype: str) -> str:
    """A C literal no element of ``dtype`` exceeds (the padding of partial windows): for
    floats NaN, which sorts with the input's own NaNs, after every number."""
    if dtype.startswith("float"):
        return "NAN"
    value = int(np.iinfo(np.dtype(dtype)).max)
    if dtype in ("int64", "uint64"):
        return f"{value}{'UL' if dtype == 'uint64' else 'L'}" + ("L" if dialect == "cuda" else "")
    return f"{value}{'U' if dtype.startswith('uint') else ''}"


def source(dialect: str, dtype: str, kh: int, kw: int, sw: int, vector: int, wide_index: bool) -> str:
    """The program for ``dtype`` and a ``kh`` x ``kw`` window: ``median3x3`` is specialised for
    column stride ``sw`` and ``vector`` channels per work-item (OpenCL; 1 for CUDA);
    ``wide_index``: 64-bit positions."""
    ctype = CTYPES[dialect][dtype]
    idx = ("long" if dialect == "opencl" else "long long") if wide_index else "int"
    head = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if dialect == "opencl" and dtype == "float64" else ""
    defines = (
        f"#define T {ctype}\n#define IDX {idx}\n#define KH {kh}\n#define KW {kw}\n"
        f"#define FILL {fill_literal(dialect, dtype)}\n#define IS_FLOAT {int(dtype.startswith('float'))}\n#define SWC {sw}\n#define V {vector}\n#define R {ROW_OUTPUTS}\n"
        "#define CAT_(a, b) a##b\n#define CAT(a, b) CAT_(a, b)\n"
    )
    return head + defines + DIALECTS[dialect] + _BODY
