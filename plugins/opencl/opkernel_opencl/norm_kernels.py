"""OpenCL kernels of FusedLayerNorm and FusedLayerNormGrad.

A work-item per row (the normalized last axis) computes the row's mean and uncorrected
variance in two passes and writes the row (on CPU devices, rows of a multiple of 8 values
read as vectors of 8: ``common.vector_rows``); the gradient's work-items also keep each
row's mean and rstd, which a work-item per column then reads to sum the scale's and
offset's gradients over the rows in order (deterministic, no atomics).  float16 is
computed in float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.ops.layer_norm_ops import check_layer_norm

from .array_kernels import BE, zeros
from .backend import ctype
from .common import fail, vector_row_source, vector_rows
from .elementwise import KernelRow, float32_compute, register_table
from .programs import family


def _layer_norm_v8_source(dtype: str) -> str:
    """The layer norm pair's ``*_v8`` kernels."""
    T = ctype(ok.as_dtype(dtype))
    return vector_row_source(dtype, f"""
// The layer norm pair on a CPU device for rows of C % 8 == 0 (common.vector_rows): each row
// read as vectors of 8, the lanes' sums combined pairwise at the end.
#define V8 {T}8
inline void row_stats8(__global const V8* xr, long n, long C, {T} eps, {T}* mean, {T}* rstd) {{
  V8 s = 0;
  for (long i = 0; i < n; i++) s += xr[i];
  {T} m = OK_HSUM8(s) / ({T})C; V8 v = 0;
  for (long i = 0; i < n; i++) {{ V8 d = xr[i] - m; v += d * d; }}
  *mean = m; *rstd = ({T})1 / sqrt(OK_HSUM8(v) / ({T})C + eps);
}}
__kernel void layer_norm_v8(__global {T}* y, __global const {T}* x, __global const {T}* scale,
                            __global const {T}* offset, long C, {T} eps) {{
  long r = get_global_id(0), n = C / 8;
  __global const V8* xr = (__global const V8*)(x + r * C); __global V8* yr = (__global V8*)(y + r * C);
  __global const V8* sc = (__global const V8*)scale; __global const V8* of = (__global const V8*)offset;
  {T} m, rstd; row_stats8(xr, n, C, eps, &m, &rstd);
  for (long i = 0; i < n; i++) yr[i] = (xr[i] - m) * rstd * sc[i] + of[i];
}}
__kernel void layer_norm_grad_x_v8(__global {T}* dx, __global {T}* means, __global {T}* rstds, __global const {T}* dy,
                                   __global const {T}* x, __global const {T}* scale, long C, {T} eps) {{
  long r = get_global_id(0), n = C / 8;
  __global const V8* xr = (__global const V8*)(x + r * C); __global const V8* dr = (__global const V8*)(dy + r * C);
  __global V8* out = (__global V8*)(dx + r * C); __global const V8* sc = (__global const V8*)scale;
  {T} m, rstd; row_stats8(xr, n, C, eps, &m, &rstd);
  V8 sg = 0, sgx = 0;
  for (long i = 0; i < n; i++) {{ V8 g = dr[i] * sc[i]; sg += g; sgx += g * ((xr[i] - m) * rstd); }}
  {T} mg = OK_HSUM8(sg) / ({T})C, mgx = OK_HSUM8(sgx) / ({T})C;
  for (long i = 0; i < n; i++) out[i] = rstd * (dr[i] * sc[i] - mg - (xr[i] - m) * rstd * mgx);
  means[r] = m; rstds[r] = rstd;
}}
""")


@family("layer_norm", ("float32", "float64"))
def _layer_norm_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    return f"""
#pragma OPENCL FP_CONTRACT OFF
// The mean and rstd = 1 / sqrt(var + eps) of row xr (C values), two passes.
inline void row_stats(__global const {T}* xr, long C, {T} eps, {T}* mean, {T}* rstd) {{
  {T} s = 0;
  for (long i = 0; i < C; i++) s += xr[i];
  {T} m = s / ({T})C, v = 0;
  for (long i = 0; i < C; i++) {{ {T} d = xr[i] - m; v += d * d; }}
  *mean = m; *rstd = ({T})1 / sqrt(v / ({T})C + eps);
}}
__kernel void layer_norm(__global {T}* y, __global const {T}* x, __global const {T}* scale,
                         __global const {T}* offset, long C, {T} eps) {{
  long r = get_global_id(0);
  __global const {T}* xr = x + r * C; __global {T}* yr = y + r * C;
  {T} m, rstd; row_stats(xr, C, eps, &m, &rstd);
  for (long i = 0; i < C; i++) yr[i] = (xr[i] - m) * rstd * scale[i] + offset[i];
}}
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale; keeps the row's stats.
__kernel void layer_norm_grad_x(__global {T}* dx, __global {T}* means, __global {T}* rstds, __global const {T}* dy,
                                __global const {T}* x, __global const {T}* scale, long C, {T} eps) {{
  long r = get_global_id(0);
  __global const {T}* xr = x + r * C; __global const {T}* dr = dy + r * C; __global {T}* out = dx + r * C;
  {T} m, rstd; row_stats(xr, C, eps, &m, &rstd);
  {T} sg = 0, sgx = 0;
  for (long i = 0; i < C; i++) {{ {T} g = dr[i] * scale[i]; sg += g; sgx += g * ((xr[i] - m) * rstd); }}
  sg /= ({T})C; sgx /= ({T})C;
  for (long i = 0; i < C; i++) out[i] = rstd * (dr[i] * scale[i] - sg - (xr[i] - m) * rstd * sgx);
  means[r] = m; rstds[r] = rstd;
}}
// Column j: dscale[j] = sum over rows of dy * xhat, doffset[j] = sum of dy.
__kernel void layer_norm_grad_params(__global {T}* dscale, __global {T}* doffset, __global const {T}* dy,
                                     __global const {T}* x, __global const {T}* means, __global const {T}* rstds,
                                     long rows, long C) {{
  long j = get_global_id(0);
  {T} ds = 0, db = 0;
  for (long r = 0; r < rows; r++) {{
    {T} d = dy[r * C + j];
    ds += d * ((x[r * C + j] - means[r]) * rstds[r]); db += d;
  }}
  dscale[j] = ds; doffset[j] = db;
}}
{_layer_norm_v8_source(dtype)}"""


def _fused_layer_norm(x: Any, scale: Any, offset: Any, epsilon: float, T: ok.DType, **attrs: Any) -> Any:
    op = "FusedLayerNorm"
    c = check_layer_norm(op, tuple(x.shape), tuple(scale.shape), tuple(offset.shape), epsilon)
    be = BE()
    y = be.new_array(tuple(x.shape), x.dtype)
    if y.size:
        t = np.dtype(T.np).type
        name = "layer_norm_v8" if vector_rows(be, c, y.dtype.itemsize) else "layer_norm"
        k = be.programs.kernel("layer_norm", T.name, name, op)
        be.launch(k, (y.size // c,), None, y.base_data, x.base_data, scale.base_data, offset.base_data, np.int64(c),
                  t(epsilon))
    return y


def _fused_layer_norm_grad(y_backprop: Any, x: Any, scale: Any, epsilon: float, T: ok.DType, **attrs: Any) -> Any:
    op = "FusedLayerNormGrad"
    c = check_layer_norm(op, tuple(x.shape), tuple(scale.shape), None, epsilon)
    if tuple(y_backprop.shape) != tuple(x.shape):
        raise fail(op, f"y_backprop must have x's shape {list(x.shape)}, got {list(y_backprop.shape)}")
    be = BE()
    dx = be.new_array(tuple(x.shape), x.dtype)
    rows = x.size // c if c else 0
    if not dx.size:  # no rows (or an empty last axis): the parameters' gradients are sums of nothing
        return dx, zeros(be, op, (c,), x.dtype), zeros(be, op, (c,), x.dtype)
    dscale, doffset = be.new_array((c,), x.dtype), be.new_array((c,), x.dtype)
    t = np.dtype(T.np).type
    if dx.size:
        means, rstds = be.new_array((rows,), x.dtype), be.new_array((rows,), x.dtype)
        name = "layer_norm_grad_x_v8" if vector_rows(be, c, dx.dtype.itemsize) else "layer_norm_grad_x"
        k = be.programs.kernel("layer_norm", T.name, name, op)
        be.launch(k, (rows,), None, dx.base_data, means.base_data, rstds.base_data, y_backprop.base_data, x.base_data,
                  scale.base_data, np.int64(c), t(epsilon))
        k = be.programs.kernel("layer_norm", T.name, "layer_norm_grad_params", op)
        be.launch(k, (c,), None, dscale.base_data, doffset.base_data, y_backprop.base_data, x.base_data,
                  means.base_data, rstds.base_data, np.int64(rows), np.int64(c))
    return dx, dscale, doffset


fused_layer_norm = float32_compute(_fused_layer_norm)
fused_layer_norm_grad = float32_compute(_fused_layer_norm_grad)


def register_all() -> None:
    floats = {"T": ["float16", "float32", "float64"]}
    table: list[KernelRow] = [
        ("FusedLayerNorm", fused_layer_norm, floats, ()),
        ("FusedLayerNormGrad", fused_layer_norm_grad, floats, ()),
    ]
    register_table(table)
