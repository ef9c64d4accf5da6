"""OpenCL kernels of MatMul, BatchMatMul and FusedMatMul: one table in ``register_all``.

C = A B runs as two launches, the structure of a CPU BLAS:

1. ``pack`` copies A into row panels, Ap[batch][M/RM][K][RM], and B into column
   panels, Bp[batch][N/RN][K][RN], both in one buffer (transposes, batch
   broadcasting and the zero padding of the last panels happen here, so the
   multiply itself never checks bounds);
2. ``mm``: each work-item computes an RM x RN block of C held in registers:
   per step of k it loads one vector of RN values of B (a vector load from the
   panel) and broadcasts RM scalars of A, RM fused multiply-adds on vectors.
   float32 uses 6 x 16 (twelve 8-wide accumulators on AVX2, the shape of a BLAS
   micro-kernel), float64 6 x 8, int32 8 x 8, int64 8 x 4.

The panels are what local-memory tiles give a GPU kernel: every work-item streams
two contiguous panels, which on a CPU device (PoCL) stay in L1/L2 cache, with no
barriers.  GPUs get the classic local-memory kernel instead (``mm_local``): a
16 x 16 work-group computes a 64 x 64 tile of C, staging 64 x 16 tiles of A and
16 x 64 tiles of B in local memory, each work-item accumulating a 4 x 4 block in
registers with 4-wide vector loads; A and B are first copied into zero-padded
row-major buffers so the tile loop never checks bounds.
Small products (M·N·K up to 32768 per batch entry, e.g. 32 x 32 x 32) skip the
packing: one launch of ``mm_small``, a work-item per element of C, reading A and
B in place (two launches and a temporary buffer cost more than such a
product).  Medium products on CPU devices (up to ``DIRECT_WORK`` multiply-adds per
batch entry) take ``mm_direct``: the same register blocks, A read in place by scalar
loads from RM rows, B in place when its rows are contiguous and vector-aligned, else
packed alone; packing A took as long as the product itself there (the attention's
[128, 64, 64] @ [128, 64, 16] BatchMatMul went from about 1 ms to 0.27 ms on Intel's
CPU runtime).  ``OPKERNEL_OPENCL_MATMUL=direct|packed|local|small`` overrides the
choice (``auto``: small for small products, then direct or packed on CPU devices,
local elsewhere).  On PoCL the OpenCL built-ins vload/vstore/fma are calls, not inlined,
and a call in the loop forces the accumulators out of registers: the loop uses
plain pointer loads and ``a * b + c`` (contracted to FMA by the compiler).
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any, Callable, Sequence

import numpy as np

import opkernel as ok

from .array_kernels import BE, zeros
from .backend import OpenCLBackend, ctype
from .common import broadcast_strides, contiguous_strides, dims, fail
from .elementwise import ACTIVATIONS, FLOAT_HELPERS, KernelRow, float32_compute, register_table
from .programs import family

ENV_MATMUL = "OPKERNEL_OPENCL_MATMUL"

#: dtype -> (vector width = RN, rows per work-item = RM)
TILES = {"float32": (16, 6), "float64": (8, 6), "int32": (8, 8), "int64": (4, 8)}
DTYPES = tuple(TILES)


@family("matmul", DTYPES)
def _matmul_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    RN, RM = TILES[dtype]
    VT = f"{T}{RN}"
    acc = "\n".join(f"  {VT} c{r} = ({VT})(0);" for r in range(RM))
    fma = "\n".join(f"    c{r} += pa[{r}] * b;" for r in range(RM))
    store = "\n".join(
        f"  if (row + {r} < M) {{ tmpv = c{r}; for (int j = 0; j < nv; ++j) C[(long)(row + {r}) * N + col + j] = tmp[j]; }}"
        for r in range(RM)
    )
    whole = "\n".join(f"    *(__global {VT}*)(C + (long)(row + {r}) * N + col) = c{r};" for r in range(RM))
    arows = "\n".join(f"  __global const T* a{r} = A + aoff + (long)min(row + {r}, M - 1) * sam;" for r in range(RM))
    dfma = "\n".join(f"    c{r} += a{r}[ka] * b;" for r in range(RM))
    return f"""
#define T {T}
#define RM {RM}
#define RN {RN}
// One launch packs both operands into one buffer P: Ap[b][Mp/RM][K][RM] from A at P, then
// Bp[b][Np/RN][K][RN] from B at P + boff (boff a multiple of RN, so B's panels keep the
// alignment of P for mm's vector loads).  Element (m, k) of A's batch b is at
// a_off(b) + m*sam + k*sak, element (k, n) of B's at b_off(b) + k*sbk + n*sbn.  Work-item
// (k, p, b) of a 3-D range (dimension 0 padded to whole work-groups) copies row k of panel p:
// panels p < Mp/RM are A's, the rest B's, so a work-group (along k) never diverges.  It
// copies the panel's whole row with a constant trip count; only the last panel checks its
// bound.  On a CPU device a work-item per element ran 4-6x slower (its index arithmetic and
// a gather with runtime strides for each element copied), and one launch for both operands
// saves a launch's host time (tens of microseconds on PoCL) per product.
__kernel void pack(__global T* restrict P, __global const T* restrict A, __global const T* restrict B,
                   int M, int N, int K, int Mp, int Np, long boff, int sam, int sak, int sbk, int sbn,
                   int brank, dims_t bshape, dims_t abstr, dims_t bbstr) {{
  int k = get_global_id(0); if (k >= K) return;
  int p = get_global_id(1); int b = get_global_id(2); int pa = Mp / RM;
  long aoff = 0; long bo = 0; int q = b;
  for (int d = brank - 1; d >= 0; --d) {{ int n = bshape.v[d]; aoff += (q % n) * abstr.v[d]; bo += (q % n) * bbstr.v[d]; q /= n; }}
  if (p < pa) {{
    __global const T* src = A + aoff + (long)p * RM * sam + (long)k * sak;
    __global T* dst = P + (((long)b * pa + p) * K + k) * RM;
    if (p * RM + RM <= M) {{ for (int r = 0; r < RM; ++r) dst[r] = src[r * sam]; }}
    else {{ for (int r = 0; r < RM; ++r) dst[r] = p * RM + r < M ? src[r * sam] : (T)0; }}
  }} else {{
    int nb = p - pa;
    __global const T* src = B + bo + (long)k * sbk + (long)nb * RN * sbn;
    __global T* dst = P + boff + (((long)b * (Np / RN) + nb) * K + k) * RN;
    if (nb * RN + RN <= N) {{ for (int c = 0; c < RN; ++c) dst[c] = src[c * sbn]; }}
    else {{ for (int c = 0; c < RN; ++c) dst[c] = nb * RN + c < N ? src[c * sbn] : (T)0; }}
  }}
}}
// C[b] = A[b] B[b] for small products: one work-item per element, A and B read in place.
__kernel void mm_small(__global T* restrict C, __global const T* restrict A, __global const T* restrict B,
                       int M, int N, int K, int sam, int sak, int sbk, int sbn,
                       int brank, dims_t bshape, dims_t abstr, dims_t bbstr) {{
  int n = get_global_id(0); int m = get_global_id(1); int b = get_global_id(2);
  if (m >= M || n >= N) return;
  int aoff = 0; int boff = 0; int q = b;
  for (int d = brank - 1; d >= 0; --d) {{ int e = bshape.v[d]; aoff += (q % e) * abstr.v[d]; boff += (q % e) * bbstr.v[d]; q /= e; }}
  __global const T* pa = A + aoff + m * sam;
  __global const T* pb = B + boff + n * sbn;
  T acc = (T)0;
  for (int k = 0; k < K; ++k) acc += pa[k * sak] * pb[k * sbk];
  C[((long)b * M + m) * N + n] = acc;
}}
// C[b] = A[b] B[b] with A read in place: element (m, k) of batch b at aoff(b) + m*sam + k*sak,
// RM scalar loads per step of k from RM rows (the last rows clamped to M - 1; their sums are
// not stored).  B is read as vectors of RN: vector k of column panel nb at
// B + bo(b) + nb*pstride + k*sbkv*RN, which is B itself when its rows are contiguous and
// vector-aligned (pstride RN, sbkv its row stride / RN), or B's panels from pack (pstride
// K*RN, sbkv 1).  Small and medium products on a CPU device spend as long packing A as
// multiplying: the rows of A stay in L1 cache without it.
__kernel void mm_direct(__global T* restrict C, __global const T* restrict A, __global const T* restrict B,
                        int M, int N, int K, int sam, int sak, int pstride, int sbkv, int npw,
                        int brank, dims_t bshape, dims_t abstr, dims_t bbstr) {{
  int mb = get_global_id(0); int b = get_global_id(2);
  int nb0 = get_global_id(1) * npw; int nb1 = min(nb0 + npw, (N + RN - 1) / RN);
  long aoff = 0; long bo = 0; int q = b;
  for (int d = brank - 1; d >= 0; --d) {{ int n = bshape.v[d]; aoff += (q % n) * abstr.v[d]; bo += (q % n) * bbstr.v[d]; q /= n; }}
  int row = mb * RM;
{arows}
  C += (long)b * M * N;
  for (int nb = nb0; nb < nb1; ++nb) {{
    __global const {VT}* pb = (__global const {VT}*)(B + bo + (long)nb * pstride);
{acc}
    long ka = 0;
    for (int k = 0; k < K; ++k) {{
      {VT} b = *pb;
{dfma}
      pb += sbkv; ka += sak;
    }}
    int col = nb * RN; int nv = min(RN, N - col);
    if (N % RN == 0 && row + RM <= M) {{
{whole}
    }} else {{
      {VT} tmpv; __private T* tmp = (__private T*)&tmpv;
{store}
    }}
  }}
}}
// C[b] = A[b] B[b] from the panels in P (see pack).
__kernel void mm(__global T* restrict C, __global const T* restrict P, int M, int N, int K, int Mp, int Np, long boff) {{
  int mb = get_global_id(0); int nb = get_global_id(1); int b = get_global_id(2);
  __global const T* pa = P + ((long)b * Mp + (long)mb * RM) * K;
  __global const {VT}* pb = (__global const {VT}*)(P + boff + ((long)b * Np + (long)nb * RN) * K);
{acc}
  for (int k = 0; k < K; ++k) {{
    {VT} b = pb[k];
{fma}
    pa += RM;
  }}
  C += (long)b * M * N;
  int row = mb * RM; int col = nb * RN; int nv = min(RN, N - col);
  if (N % RN == 0 && row + RM <= M) {{
    // A whole block, one vector store per row: with N a multiple of RN every row of C
    // starts on a vector boundary (the buffer's start is aligned).  12-15% faster on
    // products with a short K, where the stores are a larger share of the work.
{whole}
    return;
  }}
  {VT} tmpv; __private T* tmp = (__private T*)&tmpv;  // not vstore: a call, and an ABI warning for wide vectors
{store}
}}
#undef T
"""


#: Work-group size along dimension 0 of the packing launches (PoCL vectorises groups of 64).
_GROUP = 64


def _groups_of(n: int) -> int:
    """``n`` rounded up to whole work-groups of ``_GROUP``."""
    return -(-n // _GROUP) * _GROUP


LOCAL_TILE, LOCAL_K = 64, 16


@family("matmul_local", DTYPES)
def _matmul_local_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    acc = "\n".join(f"  {T}4 c{r} = ({T}4)(0);" for r in range(4))
    fma = "\n".join(f"      c{r} += a.s{r} * bv;" for r in range(4))
    store = "\n".join(
        f"  if (row + {r} < M) {{ tmpv = c{r}; for (int j = 0; j < 4; ++j) if (col + j < N) C[(long)(row + {r}) * N + col + j] = tmp[j]; }}"
        for r in range(4)
    )
    return f"""
#define T {T}
#define TS {LOCAL_TILE}
#define TK {LOCAL_K}
// out[b][R][Cp] (zero padded) from in: element (r, c) of batch b at off(b) + r*sr + c*sc.
__kernel void pad2d(__global T* restrict out, __global const T* restrict in, int R, int Cn, int Rp, int Cp,
                    int sr, int sc, int brank, dims_t bshape, dims_t bstr) {{
  int i = get_global_id(0);
  int c = i % Cp; int t = i / Cp; int r = t % Rp; int b = t / Rp;
  int off = 0; int q = b;
  for (int d = brank - 1; d >= 0; --d) {{ int n = bshape.v[d]; off += (q % n) * bstr.v[d]; q /= n; }}
  out[i] = (r < R && c < Cn) ? in[off + r * sr + c * sc] : (T)0;
}}
__kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void mm_local(__global T* restrict C, __global const T* restrict A, __global const T* restrict B,
              int M, int N, int Kp, int Mp, int Np) {{
  __local T As[TK][TS];
  __local T Bs[TK][TS];
  int tx = get_local_id(0); int ty = get_local_id(1); int lid = ty * 16 + tx;
  int row0 = get_group_id(1) * TS; int col0 = get_group_id(0) * TS; int b = get_global_id(2);
  A += (long)b * Mp * Kp; B += (long)b * Kp * Np; C += (long)b * M * N;
{acc}
  for (int k0 = 0; k0 < Kp; k0 += TK) {{
    for (int l = 0; l < 4; ++l) {{
      int e = lid + l * 256;
      int ar = e / TK; int ac = e % TK; As[ac][ar] = A[(long)(row0 + ar) * Kp + k0 + ac];
      int br = e / TS; int bc = e % TS; Bs[br][bc] = B[(long)(k0 + br) * Np + col0 + bc];
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TK; ++kk) {{
      {T}4 a = vload4(0, &As[kk][ty * 4]);
      {T}4 bv = vload4(0, &Bs[kk][tx * 4]);
{fma}
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  int row = row0 + ty * 4; int col = col0 + tx * 4;
  {T}4 tmpv; __private T* tmp = (__private T*)&tmpv;
{store}
}}
#undef T
"""


#: Products with at most this many multiply-adds per batch entry take ``mm_small``.
SMALL_WORK = 32 * 32 * 32


#: Products with more multiply-adds than this per batch entry pack A as well on CPU
#: devices (``packed``); smaller ones read A in place (``direct``).  At 1024³ reading A
#: in place ran ~10% slower (rows 4 KiB apart share L1 sets); at 512³ the two were even.
DIRECT_WORK = 1 << 27


def matmul_variant(be: OpenCLBackend, work: int | None = None) -> str:
    """``small`` (one launch, for products of at most ``SMALL_WORK`` multiply-adds when
    ``work`` is given), ``direct`` (register tiles reading A in place, for CPU devices
    and products of at most ``DIRECT_WORK``), ``packed`` (register tiles over panels of
    A and B, larger products on CPU devices) or ``local`` (local-memory tiles, for GPUs)."""
    choice = os.environ.get(ENV_MATMUL, "auto").strip().lower()
    if choice in ("packed", "local", "small", "direct"):
        return choice
    if work is not None and work <= SMALL_WORK:
        return "small"
    # The local kernel needs 16 x 16 work-groups.
    if be.is_cpu or be.max_work_group < 256:
        return "direct" if work is not None and work <= DIRECT_WORK else "packed"
    return "local"


def _gemm_local(
    be: OpenCLBackend, op: str, dtype: str, out: Any, a: Any, b: Any, M: int, N: int, K: int,
    a_mk: tuple[int, int], b_kn: tuple[int, int], batch: Sequence[int], a_batch: Sequence[int], b_batch: Sequence[int],
) -> Any:
    nb = int(math.prod(batch)) if batch else 1
    Mp, Np, Kp = (-(-M // LOCAL_TILE) * LOCAL_TILE, -(-N // LOCAL_TILE) * LOCAL_TILE, -(-K // LOCAL_K) * LOCAL_K)

    def k(name: str) -> Any:
        return be.programs.kernel("matmul_local", dtype, name, op)

    brank, bshape = np.int32(len(batch)), dims(batch)
    ap = be.new_array((nb * Mp * Kp,), a.dtype)
    bp = be.new_array((nb * Kp * Np,), a.dtype)
    be.launch1d(k("pad2d"), ap.size, ap.base_data, a.base_data, np.int32(M), np.int32(K), np.int32(Mp), np.int32(Kp),
                np.int32(a_mk[0]), np.int32(a_mk[1]), brank, bshape, dims(a_batch))
    be.launch1d(k("pad2d"), bp.size, bp.base_data, b.base_data, np.int32(K), np.int32(N), np.int32(Kp), np.int32(Np),
                np.int32(b_kn[0]), np.int32(b_kn[1]), brank, bshape, dims(b_batch))
    be.launch(k("mm_local"), (Np // 4, Mp // 4, nb), (16, 16, 1), out.base_data, ap.base_data, bp.base_data,
              np.int32(M), np.int32(N), np.int32(Kp), np.int32(Mp), np.int32(Np))
    return out


def gemm(
    be: OpenCLBackend, op: str, dtype: str, a: Any, b: Any, M: int, N: int, K: int,
    a_mk: tuple[int, int], b_kn: tuple[int, int], batch: Sequence[int] = (),
    a_batch: Sequence[int] = (), b_batch: Sequence[int] = (),
) -> Any:
    """C[batch..., M, N] = A B, where element (m, k) of A's batch b is at
    a_off(b) + m*a_mk[0] + k*a_mk[1] (likewise B), a_off from ``a_batch`` strides."""
    out = be.new_array(tuple(batch) + (M, N), a.dtype)
    if out.size == 0:
        return out
    if K == 0:
        return zeros(be, op, out.shape, a.dtype)
    variant = matmul_variant(be, M * N * K)
    if variant == "local":
        return _gemm_local(be, op, dtype, out, a, b, M, N, K, a_mk, b_kn, batch, a_batch, b_batch)
    RN, RM = TILES[dtype]
    nb = int(math.prod(batch)) if batch else 1
    if variant == "small":
        be.launch(be.programs.kernel("matmul", dtype, "mm_small", op), (N, M, nb), None, out.base_data, a.base_data,
                  b.base_data, values=_small_values(M, N, K, a_mk, b_kn, tuple(batch), tuple(a_batch), tuple(b_batch)))
        return out
    if variant == "direct":
        return _gemm_direct(be, op, dtype, out, a, b, M, N, K, a_mk, b_kn, batch, a_batch, b_batch)
    return _gemm_packed(be, op, dtype, out, a, b, M, N, K, a_mk, b_kn, batch, a_batch, b_batch)


def _gemm_packed(
    be: OpenCLBackend, op: str, dtype: str, out: Any, a: Any, b: Any, M: int, N: int, K: int,
    a_mk: tuple[int, int], b_kn: tuple[int, int], batch: Sequence[int] = (), a_batch: Sequence[int] = (),
    b_batch: Sequence[int] = (), fill_a: Callable[[Any, int], None] | None = None,
) -> Any:
    """The packed product into ``out`` (see the module's docstring).  ``fill_a(buffer,
    Mp)``, when given, writes A's panels (``Mp`` rows, the padding rows zero) at the
    start of the packed buffer itself, and ``a`` is not read: the pack launch then
    copies B's panels only (its work-items for A's panels are skipped by a global
    offset)."""
    RN, RM = TILES[dtype]
    nb = int(math.prod(batch)) if batch else 1
    Mp, Np = -(-M // RM) * RM, -(-N // RN) * RN

    def k(name: str) -> Any:
        return be.programs.kernel("matmul", dtype, name, op)

    boff = -(-nb * Mp * K // RN) * RN  # B's panels start on a vector boundary
    packed = be.new_array((boff + nb * Np * K,), out.dtype)
    a_panels = Mp // RM
    if fill_a is not None:
        fill_a(packed.base_data, Mp)
    pack_values, mm_values = _packed_values(M, N, K, Mp, Np, boff, a_mk, b_kn, tuple(batch), tuple(a_batch),
                                            tuple(b_batch))
    be.launch(k("pack"), (_groups_of(K), Np // RN if fill_a else a_panels + Np // RN, nb), (_GROUP, 1, 1),
              packed.base_data, (b if fill_a else a).base_data, b.base_data, values=pack_values,
              offset=(0, a_panels, 0) if fill_a else None)
    be.launch(k("mm"), (a_panels, Np // RN, nb), (1, 1, 1), out.base_data, packed.base_data, values=mm_values)
    return out


#: ``mm_direct`` reads B in place when B has at most this many elements per batch entry
#: (its column panels then stay in L2 cache); a larger B is packed first.
DIRECT_B = 1 << 16
#: Each work-item of ``mm_direct`` runs at least this many steps of k (several column
#: panels when K is short): a work-item costs ~0.2 µs to start on Intel's CPU runtime,
#: as long as 16 steps of its loop.
DIRECT_STEPS = 64


def _gemm_direct(
    be: OpenCLBackend, op: str, dtype: str, out: Any, a: Any, b: Any, M: int, N: int, K: int,
    a_mk: tuple[int, int], b_kn: tuple[int, int], batch: Sequence[int], a_batch: Sequence[int],
    b_batch: Sequence[int],
) -> Any:
    """The product into ``out`` by ``mm_direct``: A read in place; B in place when its rows
    are contiguous and start on vector boundaries, else packed into column panels first
    (one launch of ``pack`` over B's panels only)."""
    RN, RM = TILES[dtype]
    nb = int(math.prod(batch)) if batch else 1
    Mp, Np = -(-M // RM) * RM, -(-N // RN) * RN

    def k(name: str) -> Any:
        return be.programs.kernel("matmul", dtype, name, op)

    itemsize = out.dtype.itemsize
    if (b_kn[1] == 1 and b_kn[0] % RN == 0 and N % RN == 0 and K * N <= DIRECT_B
            and all(s % RN == 0 for s in b_batch) and be.base_align % (RN * itemsize) == 0):
        src, pstride, sbkv, bbstr = b, RN, b_kn[0] // RN, tuple(b_batch)
    else:
        src = be.new_array((nb * Np * K,), out.dtype)
        pack_values, _ = _packed_values(M, N, K, Mp, Np, 0, (0, 0), b_kn, tuple(batch), (), tuple(b_batch))
        be.launch(k("pack"), (_groups_of(K), Np // RN, nb), (_GROUP, 1, 1), src.base_data, b.base_data, b.base_data,
                  values=pack_values, offset=(0, Mp // RM, 0))
        pstride, sbkv, bbstr = K * RN, 1, tuple(s * Np * K for s in contiguous_strides(batch))
    panels = Np // RN
    npw = min(panels, -(-DIRECT_STEPS // K))  # column panels per work-item: at least DIRECT_STEPS steps of k
    values = _direct_values(M, N, K, a_mk, pstride, sbkv, npw, tuple(batch), tuple(a_batch), bbstr)
    be.launch(k("mm_direct"), (Mp // RM, -(-panels // npw), nb), (1, 1, 1), out.base_data, a.base_data, src.base_data,
              values=values)
    return out


# The by-value arguments of the MatMul kernels, made once per product shape (a model's
# few, at every step): numpy scalars cost about a microsecond each to make, and the
# backend finds the kernel object holding them by the tuple's identity (``launch(values=)``).
@functools.lru_cache(maxsize=256)
def _packed_values(
    M: int, N: int, K: int, Mp: int, Np: int, boff: int, a_mk: tuple[int, int], b_kn: tuple[int, int],
    batch: tuple[int, ...], a_batch: tuple[int, ...], b_batch: tuple[int, ...],
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    i32 = np.int32
    pack = (i32(M), i32(N), i32(K), i32(Mp), i32(Np), np.int64(boff), i32(a_mk[0]), i32(a_mk[1]), i32(b_kn[0]),
            i32(b_kn[1]), i32(len(batch)), dims(batch), dims(a_batch), dims(b_batch))
    return pack, (i32(M), i32(N), i32(K), i32(Mp), i32(Np), np.int64(boff))


@functools.lru_cache(maxsize=256)
def _direct_values(
    M: int, N: int, K: int, a_mk: tuple[int, int], pstride: int, sbkv: int, npw: int, batch: tuple[int, ...],
    a_batch: tuple[int, ...], b_batch: tuple[int, ...],
) -> tuple[Any, ...]:
    i32 = np.int32
    return (i32(M), i32(N), i32(K), i32(a_mk[0]), i32(a_mk[1]), i32(pstride), i32(sbkv), i32(npw), i32(len(batch)),
            dims(batch), dims(a_batch), dims(b_batch))


@functools.lru_cache(maxsize=256)
def _small_values(
    M: int, N: int, K: int, a_mk: tuple[int, int], b_kn: tuple[int, int], batch: tuple[int, ...],
    a_batch: tuple[int, ...], b_batch: tuple[int, ...],
) -> tuple[Any, ...]:
    i32 = np.int32
    return (i32(M), i32(N), i32(K), i32(a_mk[0]), i32(a_mk[1]), i32(b_kn[0]), i32(b_kn[1]), i32(len(batch)),
            dims(batch), dims(a_batch), dims(b_batch))


def gemm_filled_a(
    be: OpenCLBackend, op: str, dtype: str, fill_a: Callable[[Any, int], None], b: Any, M: int, N: int, K: int,
    b_kn: tuple[int, int],
) -> Any | None:
    """C[M, N] = A B where ``fill_a`` writes A's panels straight into the packed MatMul's
    buffer (see ``_gemm_packed``: im2col does, saving the packing pass over A).  None when
    the product takes neither the packed nor the direct kernel (or is empty): the caller
    then builds A and calls ``gemm``.  A product that would take the direct kernel takes
    the packed one here, since im2col writes its panels as cheaply as a copy of A."""
    if M * N * K == 0 or matmul_variant(be, M * N * K) not in ("packed", "direct"):
        return None
    out = be.new_array((M, N), b.dtype)
    return _gemm_packed(be, op, dtype, out, None, b, M, N, K, (0, 0), b_kn, fill_a=fill_a)


def _product(op: str, a: Any, b: Any, transpose_a: bool, transpose_b: bool, T: ok.DType) -> Any:
    if a.ndim != 2 or b.ndim != 2:
        raise fail(op, f"inputs must be matrices, got shapes {list(a.shape)} and {list(b.shape)}")
    M, K = (a.shape[1], a.shape[0]) if transpose_a else a.shape
    K2, N = (b.shape[1], b.shape[0]) if transpose_b else b.shape
    if K != K2:
        ea = [M, K]
        eb = [K2, N]
        raise fail(
            op,
            f"Matrix size-incompatible: In[0]: {ea}, In[1]: {eb} (transpose_a={transpose_a}, transpose_b={transpose_b})",
        )
    sa = (1, a.shape[1]) if transpose_a else (a.shape[1], 1)
    sb = (1, b.shape[1]) if transpose_b else (b.shape[1], 1)
    return gemm(BE(), op, T.name, a, b, M, N, K, sa, sb)


def mat_mul(a: Any, b: Any, transpose_a: bool, transpose_b: bool, T: ok.DType, **attrs: Any) -> Any:
    return _product("MatMul", a, b, transpose_a, transpose_b, T)


@family("dense", ("float32", "float64"))
def _dense_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    kernels = "\n".join(
        f"__kernel void bias_{name.lower()}(__global T* restrict y, __global const T* restrict bias, int N) {{\n"
        f"  int c = get_global_id(0); long i = (long)get_global_id(1) * N + c; T a = y[i] + bias[c]; y[i] = {expr};\n}}\n"
        f"__kernel void bias_{name.lower()}_rows(__global T* restrict y, __global const T* restrict bias, int N, int R) {{\n"
        f"  int r = get_global_id(0); if (r >= R) return; __global T* p = y + (long)r * N;\n"
        f"  for (int c = 0; c < N; ++c) {{ T a = p[c] + bias[c]; p[c] = {expr}; }}\n}}"
        for name, expr in ACTIVATIONS.items()
    )
    return (
        f"#define T {T}\n{FLOAT_HELPERS}\n"
        "// y = activation(y + bias), in place on a fresh [R, N] product: a work-item per element\n"
        "// over an (N, R) range (GPUs), or per row (_rows, CPU devices, where a bias index found\n"
        "// by a division per element, i % N, ran 20x slower than the loop over a row).\n"
        f"{kernels}\n#undef T\n"
    )


def fused_mat_mul(
    a: Any, b: Any, bias: Any, transpose_a: bool, transpose_b: bool, activation: str, T: ok.DType, **attrs: Any
) -> Any:
    """The MatMul kernel's product, then one launch adding the bias and applying the
    activation in place (MatMul, BiasAdd and the activation would be three launches
    and two more buffers)."""
    op = "FusedMatMul"  # the activation attr is one of ACTIVATIONS: the engine checks it
    out = _product(op, a, b, transpose_a, transpose_b, T)
    N = out.shape[1]
    if bias.ndim != 1 or bias.shape[0] != N:
        raise fail(op, f"bias must be 1-D with size the number of columns of the product ({N}), got shape {list(bias.shape)}")
    return bias_activation_in_place(op, out, bias, activation, T)


def bias_activation_in_place(op: str, out: Any, bias: Any, activation: str, T: ok.DType) -> Any:
    """One launch writing activation(out + bias) into ``out``, a fresh array whose last
    dimension is the bias' (FusedMatMul's product, FusedConv2D's NHWC output)."""
    if out.size:
        be = BE()
        N = out.shape[-1]
        R = out.size // N
        name = f"bias_{activation.lower()}"
        if be.is_cpu:
            be.launch(be.programs.kernel("dense", T.name, name + "_rows", op), (_groups_of(R),), (_GROUP,),
                      out.base_data, bias.base_data, np.int32(N), np.int32(R))
        else:
            be.launch(be.programs.kernel("dense", T.name, name, op), (N, R), None, out.base_data, bias.base_data, np.int32(N))
    return out


def batch_mat_mul(x: Any, y: Any, adj_x: bool, adj_y: bool, T: ok.DType, **attrs: Any) -> Any:
    op = "BatchMatMul"
    if x.ndim < 2 or y.ndim < 2:
        raise fail(op, f"inputs must have rank >= 2, got shapes {list(x.shape)} and {list(y.shape)}")
    rx, cx = x.shape[-2:]
    ry, cy = y.shape[-2:]
    M, K = (cx, rx) if adj_x else (rx, cx)
    K2, N = (cy, ry) if adj_y else (ry, cy)
    if K != K2:
        raise fail(op, f"Matrix size-incompatible: In[0]: {list(x.shape)}, In[1]: {list(y.shape)} (adj_x={adj_x}, adj_y={adj_y})")
    try:
        batch = tuple(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]))
    except ValueError:
        raise fail(op, f"batch dimensions must broadcast, got shapes {list(x.shape)} and {list(y.shape)}") from None
    if len(batch) > 8:
        raise fail(op, f"at most 8 batch dimensions are supported, got {len(batch)}")
    xs, ys = contiguous_strides(x.shape), contiguous_strides(y.shape)
    sa = (xs[-1], xs[-2]) if adj_x else (xs[-2], xs[-1])
    sb = (ys[-1], ys[-2]) if adj_y else (ys[-2], ys[-1])
    xb = broadcast_strides(x.shape[:-2], batch) if batch else []
    yb = broadcast_strides(y.shape[:-2], batch) if batch else []
    # broadcast_strides counts in batch elements; scale to matrix elements
    xb = [s * rx * cx for s in xb]
    yb = [s * ry * cy for s in yb]
    return gemm(BE(), op, T.name, x, y, M, N, K, sa, sb, batch, xb, yb)


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    table: list[KernelRow] = [
        ("MatMul", float32_compute(mat_mul), {"T": list(DTYPES) + ["float16"]}, ()),
        ("BatchMatMul", float32_compute(batch_mat_mul), {"T": list(DTYPES) + ["float16"]}, ()),
        ("FusedMatMul", float32_compute(fused_mat_mul), {"T": ["float32", "float64", "float16"]}, ()),
    ]
    register_table(table)
