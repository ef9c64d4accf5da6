"""OpenCL kernels of TensorFlow's stateless random ops (opkernel.ops.random_ops).

One work-item per Philox group (4 outputs of 32 or 16 bits, 2 of 64): it runs Philox
4x32-10 at ``counter + group`` and TensorFlow's distribution on the words
(random_distributions.h), so uniform floats and integers are TensorFlow's bit for bit.
Normal and truncated normal values take the logarithm, sine, cosine and square root in
double precision, rounded to float (on a device without cl_khr_fp64 in float): within an
ulp of TensorFlow's CPU numbers (the C library's float functions), not always equal; a
truncated normal whose value lands within that ulp of the cut-off at 2 may then keep or
drop another sample than TensorFlow.  The key, counter, shape, seed and bounds are read
on the host (host-memory arguments), as TensorFlow's GPU kernels read their seed.

StatelessMultinomial: one work-item per sample; it draws its uniform double from the
same stream the CPU kernel reads (two words a sample, on from row to row) and walks its
row's cumulative sums of exp(logit - max) in double, as TensorFlow's CPU kernel does (so
it needs cl_khr_fp64).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import opkernel as ok
from opkernel.errors import KernelNotFoundError, ResourceExhaustedError
from opkernel.ops import random_ops as R

from .backend import OpenCLBackend, ctype
from .programs import family

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int32", "int64", "uint32", "uint64")
_LOGITS = ("float16", "float32", "float64", "int32", "int64")


def BE() -> OpenCLBackend:
    return ok.engine.backend_instance("opencl")  # type: ignore[return-value]


_PHILOX = r"""
#pragma OPENCL FP_CONTRACT OFF
inline void philox10(uint4 c, uint k0, uint k1, uint *w) {
  for (int r = 0; r < 10; r++) {
    uint h0 = mul_hi(0xD2511F53u, c.x), l0 = 0xD2511F53u * c.x;
    uint h1 = mul_hi(0xCD9E8D57u, c.z), l1 = 0xCD9E8D57u * c.z;
    c = (uint4)(h1 ^ c.y ^ k0, l1, h0 ^ c.w ^ k1, l0);
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  w[0] = c.x; w[1] = c.y; w[2] = c.z; w[3] = c.w;
}
inline uint4 counter_add(uint4 base, ulong n) {
  ulong lo = (((ulong)base.y << 32) | base.x) + n;
  ulong hi = (((ulong)base.w << 32) | base.z) + (lo < n ? 1 : 0);
  return (uint4)((uint)lo, (uint)(lo >> 32), (uint)hi, (uint)(hi >> 32));
}
inline float unit_float(uint x) { return as_float((127u << 23) | (x & 0x7fffffu)) - 1.0f; }
"""

_FLOAT_MATH = r"""
inline void box_muller_float(uint x0, uint x1, float *f0, float *f1) {
  float u1 = unit_float(x0);
  if (u1 < 1.0e-7f) u1 = 1.0e-7f;
#ifdef cl_khr_fp64
  const float v1 = (float)(2.0 * M_PI * (double)unit_float(x1));
  const float lg = (float)log((double)u1);
  const float u2 = (float)sqrt((double)(-2.0f * lg));
  *f0 = (float)sin((double)v1) * u2;
  *f1 = (float)cos((double)v1) * u2;
#else
  const float v1 = 2.0f * M_PI_F * unit_float(x1);
  const float u2 = sqrt(-2.0f * log(u1));
  *f0 = sin(v1) * u2;
  *f1 = cos(v1) * u2;
#endif
}
typedef struct { uint4 counter; uint w[4]; int used; uint k0, k1; } Samples;
inline uint next_word(Samples *s) {
  if (s->used == 4) { philox10(s->counter, s->k0, s->k1, s->w); s->counter = counter_add(s->counter, 1); s->used = 0; }
  return s->w[s->used++];
}
"""

_DOUBLE_MATH = r"""
inline double unit_double(uint x0, uint x1) {
  return as_double((1023ul << 52) | ((ulong)(x0 & 0xfffffu) << 32) | x1) - 1.0;
}
inline void box_muller_double(uint x0, uint x1, uint x2, uint x3, double *d0, double *d1) {
  double u1 = unit_double(x0, x1);
  if (u1 < 1.0e-7) u1 = 1.0e-7;
  const double v1 = 2 * M_PI * unit_double(x2, x3);
  const double u2 = sqrt(-2.0 * log(u1));
  *d0 = sin(v1) * u2;
  *d1 = cos(v1) * u2;
}
"""


def _store(dtype: str) -> str:
    """``STORE(out, i, float value)`` for a 32-bit-computed output type."""
    if dtype == "float16":
        return "#define STORE(out, i, v) vstore_half_rte((v), (i), (__global half*)(out))\n"
    if dtype == "bfloat16":  # round to nearest even on the high 16 bits (no NaN here)
        return ("inline ushort to_bf16(float v) { uint u = as_uint(v); return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }\n"
                "#define STORE(out, i, v) ((__global ushort*)(out))[i] = to_bf16(v)\n")
    return "#define STORE(out, i, v) (out)[i] = (v)\n"


@family("philox", FLOATS + INTS)
def _philox_source(dtype: str) -> str:
    head = _PHILOX
    args = "long size, uint k0, uint k1, uint4 base"
    if dtype in INTS:
        T = ctype(ok.as_dtype(dtype))
        U = "ulong" if dtype.endswith("64") else "uint"
        if U == "ulong":
            body = """
  for (int k = 0; k < 2; k++) {
    ulong bits = ((ulong)w[2 * k + 1] << 32) | w[2 * k];
    if (at + k < size) out[at + k] = (T)(FULL ? bits : lo + bits % range);
  }"""
        else:
            body = """
  for (int k = 0; k < 4; k++)
    if (at + k < size) out[at + k] = (T)(FULL ? w[k] : (uint)lo + w[k] % (uint)range);"""
        per = 2 if U == "ulong" else 4
        kernels = []
        for name, full in (("philox_int", 0), ("philox_full_int", 1)):
            kernels.append(f"""
__kernel void {name}(__global {T}* out, {args}, ulong lo, ulong range) {{
  const long g = get_global_id(0), at = g * {per};
  uint w[4];
  philox10(counter_add(base, (ulong)g), k0, k1, w);
{body.replace('(T)', f'({T})').replace('FULL', str(full))}
}}""")
        return head + "\n".join(kernels) + "\n"
    if dtype == "float64":
        return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + head + _DOUBLE_MATH + r"""
typedef struct { uint4 counter; uint w[4]; int used; uint k0, k1; } Samples;
inline uint next_word(Samples *s) {
  if (s->used == 4) { philox10(s->counter, s->k0, s->k1, s->w); s->counter = counter_add(s->counter, 1); s->used = 0; }
  return s->w[s->used++];
}
__kernel void philox_uniform(__global double* out, long size, uint k0, uint k1, uint4 base) {
  const long g = get_global_id(0), at = g * 2;
  uint w[4];
  philox10(counter_add(base, (ulong)g), k0, k1, w);
  out[at] = unit_double(w[0], w[1]);
  if (at + 1 < size) out[at + 1] = unit_double(w[2], w[3]);
}
__kernel void philox_normal(__global double* out, long size, uint k0, uint k1, uint4 base) {
  const long g = get_global_id(0), at = g * 2;
  uint w[4];
  double d0, d1;
  philox10(counter_add(base, (ulong)g), k0, k1, w);
  box_muller_double(w[0], w[1], w[2], w[3], &d0, &d1);
  out[at] = d0;
  if (at + 1 < size) out[at + 1] = d1;
}
__kernel void philox_truncated(__global double* out, long size, uint k0, uint k1, uint4 base) {
  const long g = get_global_id(0), at = g * 2;
  Samples s; s.counter = counter_add(base, (ulong)g * 128); s.used = 4; s.k0 = k0; s.k1 = k1;
  int index = 0;
  while (index < 2) {
    uint a = next_word(&s), b = next_word(&s), c = next_word(&s), e = next_word(&s);
    double d[2];
    box_muller_double(a, b, c, e, &d[0], &d[1]);
    for (int k = 0; k < 2 && index < 2; k++)
      if (fabs(d[k]) < 2.0) { if (at + index < size) out[at + index] = d[k]; index++; }
  }
}
"""
    T = "float" if dtype == "float32" else "void"
    fp64 = "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n"
    uniform = (
        "STORE(out, at + k, unit_float(w[k]))" if dtype == "float32"
        else f"STORE(out, at + k, (float)(w[k] & {'0x3ffu' if dtype == 'float16' else '0x7fu'}) * "
             f"{'(1.0f / 1024)' if dtype == 'float16' else '(1.0f / 128)'})"
    )
    return fp64 + head + _FLOAT_MATH + _store(dtype) + f"""
__kernel void philox_uniform(__global {T}* out, long size, uint k0, uint k1, uint4 base) {{
  const long g = get_global_id(0), at = g * 4;
  uint w[4];
  philox10(counter_add(base, (ulong)g), k0, k1, w);
  for (int k = 0; k < 4; k++) if (at + k < size) {uniform};
}}
__kernel void philox_normal(__global {T}* out, long size, uint k0, uint k1, uint4 base) {{
  const long g = get_global_id(0), at = g * 4;
  uint w[4];
  float f[4];
  philox10(counter_add(base, (ulong)g), k0, k1, w);
  box_muller_float(w[0], w[1], &f[0], &f[1]);
  box_muller_float(w[2], w[3], &f[2], &f[3]);
  for (int k = 0; k < 4; k++) if (at + k < size) STORE(out, at + k, f[k]);
}}
__kernel void philox_truncated(__global {T}* out, long size, uint k0, uint k1, uint4 base) {{
  const long g = get_global_id(0), at = g * 4;
  Samples s; s.counter = counter_add(base, (ulong)g * 256); s.used = 4; s.k0 = k0; s.k1 = k1;
  int index = 0;
  while (index < 4) {{
    uint a = next_word(&s), b = next_word(&s);
    float f[2];
    box_muller_float(a, b, &f[0], &f[1]);
    for (int k = 0; k < 2 && index < 4; k++)
      if (fabs(f[k]) < 2.0f) {{ if (at + index < size) STORE(out, at + index, f[k]); index++; }}
  }}
}}
"""


@family("multinomial", tuple(f"{t}:{o}" for t in _LOGITS for o in ("int32", "int64")))
def _multinomial_source(key: str) -> str:
    logits, out = key.split(":")
    L, O = ctype(ok.as_dtype(logits)), ctype(ok.as_dtype(out))
    read = "(double)vload_half(j, row)" if logits == "float16" else "(double)row[j]"
    finite = "isfinite(v)" if logits.startswith("float") else "1"
    lowest = {"float16": "-65504.0", "float32": "-(double)FLT_MAX", "float64": "-DBL_MAX",
              "int32": "-2147483648.0", "int64": "-9223372036854775808.0"}[logits]
    ptr = "__global const half*" if logits == "float16" else f"__global const {L}*"
    return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + _PHILOX + r"""
inline double unit_double(uint x0, uint x1) {
  return as_double((1023ul << 52) | ((ulong)(x0 & 0xfffffu) << 32) | x1) - 1.0;
}
""" + f"""
// out [batch, n]; sample i of the whole stream reads words 2i and 2i + 1 (one Philox call holds two samples)
__kernel void multinomial(__global {O}* out, {ptr} logits, int classes, long n, uint k0, uint k1, uint4 base) {{
  const long i = get_global_id(0), b = i / n;
  {ptr} row = logits + b * classes;
  uint w[4];
  philox10(counter_add(base, (ulong)(i / 2)), k0, k1, w);
  const double u = (i % 2) ? unit_double(w[2], w[3]) : unit_double(w[0], w[1]);
  double top = {lowest};
  for (int j = 0; j < classes; j++) {{ double v = {read}; if ({finite} && v > top) top = v; }}
  double total = 0;
  for (int j = 0; j < classes; j++) {{ double v = {read}; if ({finite}) total += exp(v - top); }}
  const double to_find = u * total;
  double running = 0;
  int found = classes;
  for (int j = 0; j < classes; j++) {{
    double v = {read};
    if ({finite}) running += exp(v - top);
    if (running > to_find) {{ found = j; break; }}
  }}
  out[i] = ({O})found;
}}
"""




_KIND = {R.UNIFORM: "uniform", R.NORMAL: "normal", R.TRUNCATED: "truncated", R.INT: "int", R.FULL_INT: "full_int"}


def _fill(op: str, code: int, dtype: ok.DType, dims: tuple[int, ...], key: tuple[int, int],
          counter: tuple[int, int, int, int], lo: int, span: int) -> Any:
    kind = _KIND[code]
    be = BE()
    out = be.new_array(dims, dtype.np)
    size = math.prod(dims)
    if not size:
        return out
    if not be.supports_dtype(ok.float64) and dtype.name == "float64":
        raise KernelNotFoundError(f"op {op!r}: float64 needs a device with cl_khr_fp64", op=op)
    per = R.GROUP[dtype.name]
    k = be.programs.kernel("philox", dtype.name, f"philox_{kind}", op)
    base = np.array(counter, np.uint32).view(be.cl.cltypes.uint4)[0]
    extra = (np.uint64(lo & (2**64 - 1)), np.uint64(span)) if kind in ("int", "full_int") else ()
    be.launch(k, (-(-size // per),), None, out.base_data, np.int64(size), np.uint32(key[0]), np.uint32(key[1]), base, *extra)
    return out


def stateless_multinomial(logits: Any, num_samples: Any, seed: Any, T: ok.DType, output_dtype: ok.DType,
                          **attrs: Any) -> Any:
    op = "StatelessMultinomial"
    batch, classes, n = R.check_multinomial(op, logits, num_samples)
    key, counter = R.key_counter(*R.seed_words(op, seed))
    be = BE()
    if not be.fp64:
        raise KernelNotFoundError(f"op {op!r}: the OpenCL kernel sums in double and needs a device with cl_khr_fp64", op=op)
    out = be.new_array((batch, n), output_dtype.np)
    if batch * n:
        if batch * n >= 2**31:
            raise ResourceExhaustedError(f"op {op!r}: {batch * n} samples are more than one launch indexes", op=op)
        k = be.programs.kernel("multinomial", f"{T.name}:{output_dtype.name}", "multinomial", op)
        base = np.array(counter, np.uint32).view(be.cl.cltypes.uint4)[0]
        be.launch(k, (batch * n,), None, out.base_data, logits.base_data, np.int32(classes), np.int64(n),
                  np.uint32(key[0]), np.uint32(key[1]), base)
    return out


def rng_read_and_skip(resource: Any, alg: Any, delta: Any, **attrs: Any) -> np.ndarray:
    """The state (three int64s) read back to the host, moved on and written into the
    variable's buffer (the engine holds its lock); the old state is the result."""
    op = "RngReadAndSkip"
    R.check_alg(op, alg)
    d = R.check_delta(op, delta)
    be = BE()
    old = np.array(be.to_numpy(resource), copy=True)
    with be.launch_lock:  # in order with the queued launches
        resource.set(R.skipped_state(op, old, d))
    be.dirty(resource)  # the host copy of the old value goes
    return old


def register_all() -> None:
    from .elementwise import KernelRow, register_table

    floats = {"dtype": list(FLOATS)}
    ints = {"dtype": list(INTS)}
    table: list[KernelRow] = [
        (op, fn, {"dtype": ["int32", "int64"]} if op == "StatelessRandomUniformInt" else (ints if "Int" in op else floats),
         host)
        for op, fn, host in R.fill_kernels(_fill)
    ]
    table += [
        ("StatelessRandomGetKeyCounter", lambda seed, **attrs: R.key_counter_outputs(seed), None, ("seed",)),
        ("StatelessMultinomial", stateless_multinomial, {"T": list(_LOGITS)}, ("num_samples", "seed")),
        ("RngReadAndSkip", rng_read_and_skip, None, ("alg", "delta")),
    ]
    register_table(table)
