"""OpenCL kernels of median pooling (registered when opkernel-opencl is installed).

Nothing here imports pyopencl: the backend instance a kernel receives
(``ctx.backend``, an ``opkernel_opencl`` OpenCLBackend) carries the pyopencl
module, the context and queue, and allocates and launches.  Programs are built
on first use, once per (backend, dtype, window size), from ``device.source``.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, cast

import numpy as np

import opkernel as ok

from .device import CTYPES, ROW_OUTPUTS, source
from .geometry import Window, window
from .ops import MEDIAN_POOL, MEDIAN_POOL_GRAD

if TYPE_CHECKING:
    from opkernel_opencl.backend import OpenCLBackend

__all__ = ["TYPES", "MedianPool2D", "MedianPool2DGrad", "kernels"]

TYPES = tuple(CTYPES["opencl"])

KERNELS = ("median_pool", "median3x3", "median_pos", "median_pool_grad")

_lock = threading.Lock()
_built: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], dict[str, Any]]] = weakref.WeakKeyDictionary()


def kernels(be: Any, op: str, dtype: str, g: Window, vector: int, wide: bool) -> dict[str, Any]:
    """The kernels for ``dtype`` and ``g``'s window on backend ``be`` (built once, then cached)."""
    key = (dtype, g.kh, g.kw, g.sw, vector, wide)
    with _lock:
        programs = _built.setdefault(be, {})
        found = programs.get(key)
        if found is None:
            src = source("opencl", dtype, g.kh, g.kw, g.sw, vector, wide)
            try:
                program = be.cl.Program(be.context, src).build()
            except be.cl.Error as e:
                raise ok.errors.InternalError(
                    f"op '{op}': the median pooling program for {dtype}, window {g.kh}x{g.kw}, failed to build "
                    f"on OpenCL device {be.device.name.strip()!r}: {e}",
                    op=op,
                ) from e
            names = KERNELS if g.taps == 9 else tuple(k for k in KERNELS if k != "median3x3")
            found = programs[key] = {name: be.cl.Kernel(program, name) for name in names}
    return found


def _vector(channels: int, dtype: str) -> int:
    """Channels per work-item of median3x3: at most 32 bytes, since PoCL passes a 64-byte
    vector (double8) to its builtins with an ABI that x86 without AVX-512 does not share,
    and the program crashes."""
    itemsize = np.dtype(dtype).itemsize
    return next(v for v in (8, 4, 2, 1) if channels % v == 0 and v * itemsize <= 32)


def _args(g: Window, n: int, wide: bool) -> list[Any]:
    index = np.int64 if wide else np.int32
    return [index(n), *(np.int32(v) for v in (g.h, g.w, g.c, g.oh, g.ow, g.sh, g.sw, g.top, g.left))]


def _region(rows: tuple[int, int], cols: tuple[int, int]) -> list[Any]:
    return [np.int32(rows[0]), np.int32(rows[1] - rows[0]), np.int32(cols[0]), np.int32(cols[1] - cols[0])]


def _buffer(x: Any) -> Any:
    return x.base_data if x.offset == 0 else x.copy().base_data


class _Kernel(ok.OpKernel):
    op = ""

    def __init__(self, ctx: ok.OpKernelConstruction) -> None:
        self.ksize = ctx.get_attr("ksize")
        self.strides = ctx.get_attr("strides")
        self.padding = ctx.get_attr("padding")
        self.dtype = ctx.get_attr("T").name

    def window(self, x: Any) -> tuple[Window, bool]:
        g = window(self.op, x.shape, self.ksize, self.strides, self.padding)
        return g, max(g.n * g.h * g.w * g.c, g.n * g.oh * g.ow * g.c) >= 2**31

    def kernels(self, be: Any, g: Window, wide: bool) -> dict[str, Any]:
        return kernels(be, self.op, self.dtype, g, _vector(g.c, self.dtype), wide)


class MedianPool2D(_Kernel):
    op = MEDIAN_POOL

    def compute(self, ctx: ok.OpKernelContext) -> None:
        be, x = cast("OpenCLBackend", ctx.backend), ctx.input(0)
        g, wide = self.window(x)
        out = ctx.allocate_output(0, g.out_shape)
        if not out.size:
            return
        ks, data = self.kernels(be, g, wide), _buffer(x)
        r0, r1, c0, c1 = g.interior()
        strips = [((0, g.oh), (0, g.ow))]
        if g.taps == 9 and r0 < r1 and c0 < c1:
            blocks = -(-(c1 - c0) // ROW_OUTPUTS)
            n = g.n * (r1 - r0) * blocks * (g.c // _vector(g.c, self.dtype))
            be.launch1d(ks["median3x3"], n, out.base_data, data, *_args(g, n, wide), *_region((r0, r1), (c0, c1)))
            strips = [((0, r0), (0, g.ow)), ((r1, g.oh), (0, g.ow)), ((r0, r1), (0, c0)), ((r0, r1), (c1, g.ow))]
        for rows, cols in strips:
            n = g.n * (rows[1] - rows[0]) * (cols[1] - cols[0]) * g.c
            if n:
                be.launch1d(ks["median_pool"], n, out.base_data, data, *_args(g, n, wide), *_region(rows, cols))


class MedianPool2DGrad(_Kernel):
    op = MEDIAN_POOL_GRAD

    def compute(self, ctx: ok.OpKernelContext) -> None:
        be, x, dy = cast("OpenCLBackend", ctx.backend), ctx.input(0), ctx.input(1)
        g, wide = self.window(x)
        if tuple(dy.shape) != g.out_shape:
            raise ok.errors.InvalidArgumentError(
                f"op '{self.op}': grad must have the shape of the pooled output {list(g.out_shape)}, "
                f"got {list(dy.shape)}",
                op=self.op,
            )
        dx = ctx.allocate_output(0, x.shape)
        if not dx.size:
            return
        if not dy.size:
            dx.fill(0)
            return
        ks = self.kernels(be, g, wide)
        pos = be.new_array(g.out_shape, np.dtype(np.int64 if wide else np.int32))
        be.launch1d(ks["median_pos"], dy.size, pos.base_data, _buffer(x), *_args(g, dy.size, wide))
        be.launch1d(ks["median_pool_grad"], dx.size, dx.base_data, _buffer(dy), pos.base_data, *_args(g, dx.size, wide))
