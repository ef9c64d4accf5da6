"""OpenCL kernels of ResizeBilinear, ResizeBilinearGrad, ResizeNearestNeighbor and
ResizeNearestNeighborGrad.

The host computes the sample positions and weights along each axis
(``opkernel.ops.image_ops``: TensorFlow's float32 arithmetic), so every backend samples
the same positions with the same weights; the kernels read those small tables.
* ResizeBilinear: a work-item per output element, the lerp along x then y in float, as
  TensorFlow's compute_lerp (no contraction into fused multiply-adds).
* ResizeBilinearGrad: a work-item per input element gathers the parts of the gradient
  elements that sampled it, in TensorFlow's order (row-major over the gradient, the four
  corners in order): the host lists, per input row and column, the gradient rows and
  columns that sample it.  Deterministic, no atomics; float16 adds in float32 and rounds
  once, as TensorFlow's.
* ResizeNearestNeighbor gathers by element size; its gradient sums each input
  position's gradient elements in order, as ScatterNd does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.ops.image_ops import bilinear_table, nearest_index, resize_grad_sizes, resize_size

from .array_kernels import BE, MOVABLE
from .backend import OpenCLBackend, ctype
from .elementwise import KernelRow, cast, float32_compute, register_table
from .nd_kernels import _SCATTER_TYPES, _grouped_sum, _rows_buffer
from .programs import family

_RESIZE_TYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "float16")


@family("resize_bilinear", _RESIZE_TYPES)
def _bilinear_source(dtype: str) -> str:
    half = dtype == "float16"
    T = "half" if half else ctype(ok.as_dtype(dtype))
    load = "vload_half(i, x)" if half else "(float)x[i]"
    return f"""
#pragma OPENCL FP_CONTRACT OFF
inline float at(__global const {T}* x, long i) {{ return {load}; }}
// out[n, y, x, c]: the four neighbors of row table (ylo, yhi, ylerp) and column table
// (xlo, xhi, xlerp), each read as float, lerped along x then along y.
__kernel void resize_bilinear(__global float* out, __global const {T}* x, __global const long* ylo,
                              __global const long* yhi, __global const float* yl, __global const long* xlo,
                              __global const long* xhi, __global const float* xl, long H, long W, long C,
                              long OH, long OW) {{
  long i = get_global_id(0);
  long c = i % C; long t = i / C; long ox = t % OW; t /= OW; long oy = t % OH; long n = t / OH;
  long top = (n * H + ylo[oy]) * W, bottom = (n * H + yhi[oy]) * W;
  float a = xl[ox], b = yl[oy];
  float tl = at(x, (top + xlo[ox]) * C + c), tr = at(x, (top + xhi[ox]) * C + c);
  float bl = at(x, (bottom + xlo[ox]) * C + c), br = at(x, (bottom + xhi[ox]) * C + c);
  float upper = tl + (tr - tl) * a;
  float lower = bl + (br - bl) * a;
  out[i] = upper + (lower - upper) * b;
}}
"""


@family("resize_bilinear_grad", ("float32", "float64"))
def _bilinear_grad_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    return f"""
#pragma OPENCL FP_CONTRACT OFF
// dx[n, h, w, c]: over the gradient rows y that sample row h (ys[ystart[h] .. ystart[h + 1]),
// ascending) and the columns x that sample column w, each corner of (y, x) that is (h, w),
// in the order top-left, top-right, bottom-left, bottom-right: the part g * wy * wx in
// float, then converted to T and added, as TensorFlow's loop over the gradient does.
__kernel void resize_bilinear_grad(__global {T}* dx, __global const float* g, __global const long* ylo,
                                   __global const long* yhi, __global const float* yl, __global const long* xlo,
                                   __global const long* xhi, __global const float* xl, __global const long* ystart,
                                   __global const long* ys, __global const long* xstart, __global const long* xs,
                                   long H, long W, long C, long RH, long RW) {{
  long i = get_global_id(0);
  long c = i % C; long t = i / C; long w = t % W; t /= W; long h = t % H; long n = t / H;
  {T} acc = 0;
  for (long p = ystart[h]; p < ystart[h + 1]; p++) {{
    long y = ys[p];
    float b = yl[y], ib = 1.0f - b;
    int top = ylo[y] == h, bottom = yhi[y] == h;
    for (long q = xstart[w]; q < xstart[w + 1]; q++) {{
      long x = xs[q];
      float a = xl[x], ia = 1.0f - a;
      int left = xlo[x] == w, right = xhi[x] == w;
      float v = g[((n * RH + y) * RW + x) * C + c];
      if (top && left) acc += ({T})(v * ib * ia);
      if (top && right) acc += ({T})(v * ib * a);
      if (bottom && left) acc += ({T})(v * b * ia);
      if (bottom && right) acc += ({T})(v * b * a);
    }}
  }}
  dx[i] = acc;
}}
"""


def _tables(be: OpenCLBackend, lower: np.ndarray, upper: np.ndarray, lerp: np.ndarray) -> list[Any]:
    return [_rows_buffer(be, lower), _rows_buffer(be, upper), be.from_numpy(np.ascontiguousarray(lerp, np.float32))]


def resize_bilinear(images: Any, size: np.ndarray, align_corners: bool, half_pixel_centers: bool, T: ok.DType,
                    **attrs: Any) -> Any:
    oh, ow = resize_size("ResizeBilinear", tuple(images.shape), size, align_corners, half_pixel_centers)
    n, h, w, c = images.shape
    be = BE()
    if (oh, ow) == (h, w):  # the image in float32, as TensorFlow's (an infinity stays one)
        return be.copy(images) if images.dtype == np.float32 else cast(be, images, np.dtype(np.float32), "ResizeBilinear")
    out = be.new_array((n, oh, ow, c), np.dtype(np.float32))
    if out.size:
        ys, xs = bilinear_table(h, oh, align_corners, half_pixel_centers), bilinear_table(w, ow, align_corners, half_pixel_centers)
        tables = _tables(be, *ys) + _tables(be, *xs)
        k = be.programs.kernel("resize_bilinear", T.name, "resize_bilinear", "ResizeBilinear")
        be.launch1d(k, out.size, out.base_data, images.base_data, *(t.base_data for t in tables),
                    *(np.int64(v) for v in (h, w, c, oh, ow)))
    return out


def _samplers(lower: np.ndarray, upper: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, order): for each input position p, the gradient positions whose lower or
    upper neighbor is p, ascending, as order[start[p] .. start[p + 1])."""
    positions = np.arange(len(lower), dtype=np.int64)
    both = lower != upper
    targets = np.concatenate([lower, upper[both]])
    sources = np.concatenate([positions, positions[both]])
    order = np.lexsort((sources, targets))
    start = np.zeros(size + 1, np.int64)
    np.add.at(start, targets + 1, 1)
    return np.cumsum(start), sources[order] if order.size else np.zeros(1, np.int64)


def _resize_bilinear_grad(grads: Any, original_image: Any, align_corners: bool, half_pixel_centers: bool, T: ok.DType,
                          **attrs: Any) -> Any:
    op = "ResizeBilinearGrad"
    n, rh, rw, c = grads.shape if grads.ndim == 4 else (0, 0, 0, 0)
    oh, ow = resize_grad_sizes(op, tuple(grads.shape), tuple(original_image.shape), align_corners, half_pixel_centers)
    be = BE()
    out = be.new_array((n, oh, ow, c), np.dtype(T.np))
    if out.size:
        ys, xs = bilinear_table(oh, rh, align_corners, half_pixel_centers), bilinear_table(ow, rw, align_corners, half_pixel_centers)
        tables = _tables(be, *ys) + _tables(be, *xs)
        ystart, yorder = _samplers(ys.lower, ys.upper, oh)
        xstart, xorder = _samplers(xs.lower, xs.upper, ow)
        lists = [_rows_buffer(be, a) for a in (ystart, yorder, xstart, xorder)]
        k = be.programs.kernel("resize_bilinear_grad", T.name, "resize_bilinear_grad", op)
        be.launch1d(k, out.size, out.base_data, grads.base_data, *(t.base_data for t in tables + lists),
                    *(np.int64(v) for v in (oh, ow, c, rh, rw)))
    return out


resize_bilinear_grad = float32_compute(_resize_bilinear_grad)


def resize_nearest_neighbor(images: Any, size: np.ndarray, align_corners: bool, half_pixel_centers: bool,
                            **attrs: Any) -> Any:
    oh, ow = resize_size("ResizeNearestNeighbor", tuple(images.shape), size, align_corners, half_pixel_centers)
    n, h, w, c = images.shape
    be = BE()
    out = be.new_array((n, oh, ow, c), images.dtype)
    if out.size:
        rows, cols = nearest_index(h, oh, align_corners, half_pixel_centers), nearest_index(w, ow, align_corners, half_pixel_centers)
        starts = ((np.arange(n, dtype=np.int64)[:, None, None] * h + rows[None, :, None]) * w + cols[None, None, :]) * c
        k = be.programs.kernel("nd_gather", str(images.dtype.itemsize), "nd_gather", "ResizeNearestNeighbor")
        be.launch1d(k, out.size, out.base_data, images.base_data, _rows_buffer(be, starts.reshape(-1)).base_data,
                    np.int64(c))
    return out


def resize_nearest_neighbor_grad(grads: Any, size: np.ndarray, align_corners: bool, half_pixel_centers: bool,
                                 T: ok.DType, **attrs: Any) -> Any:
    """Each input position's gradient elements summed in order (float16 sums rounded to
    half at every step, as TensorFlow's half accumulator)."""
    op = "ResizeNearestNeighborGrad"
    n, rh, rw, c = grads.shape if grads.ndim == 4 else (0, 0, 0, 0)
    oh, ow = resize_grad_sizes(op, tuple(grads.shape), size, align_corners, half_pixel_centers)
    be = BE()
    out = be.new_array((n, oh, ow, c), grads.dtype)
    if out.size:
        rows, cols = nearest_index(oh, rh, align_corners, half_pixel_centers), nearest_index(ow, rw, align_corners, half_pixel_centers)
        target = (np.arange(n, dtype=np.int64)[:, None, None] * oh + rows[None, :, None]) * ow + cols[None, None, :]
        _grouped_sum(be, op, T.name, out, grads, target.reshape(-1), c)
    return out




def register_all() -> None:
    table: list[KernelRow] = [
        ("ResizeBilinear", resize_bilinear, {"T": list(_RESIZE_TYPES)}, ("size",)),
        ("ResizeBilinearGrad", resize_bilinear_grad, {"T": ["float16", "float32", "float64"]}, ()),
        ("ResizeNearestNeighbor", resize_nearest_neighbor, {"T": sorted(set(MOVABLE) & {
            "int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "bfloat16", "float32", "float64"})},
         ("size",)),
        ("ResizeNearestNeighborGrad", resize_nearest_neighbor_grad,
         {"T": sorted({"uint8", "int8", "int32", "float32", "float64"} & set(_SCATTER_TYPES)) + ["float16"]}, ("size",)),
    ]
    register_table(table)
