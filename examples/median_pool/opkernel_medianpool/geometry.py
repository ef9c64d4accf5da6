"""Window geometry of median pooling, shared by the shape function and every kernel.

The arithmetic is the core's (``opkernel.ops.nn_ops``: ``spatial_attr``,
``window_output_size``), so MedianPool2D has exactly MaxPool's output sizes and
SAME padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from opkernel.errors import InvalidArgumentError
from opkernel.ops.nn_ops import spatial_attr, window_output_size

__all__ = ["Window", "window"]


@dataclass(frozen=True)
class Window:
    """Where each output's window lies in an (n, h, w, c) input.

    Output ``(oy, ox)`` reads input rows ``oy * sh - top + [0, kh)`` and columns
    ``ox * sw - left + [0, kw)``; rows and columns outside the input (SAME
    padding) are not part of the window.
    """

    n: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    sh: int
    sw: int
    oh: int
    ow: int
    top: int
    left: int

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.oh, self.ow, self.c)

    @property
    def taps(self) -> int:
        return self.kh * self.kw

    def _inside(self, out: int, k: int, s: int, before: int, size: int) -> np.ndarray:
        """(out, k) bool: whether tap ``i`` of output ``o`` lies inside ``[0, size)``."""
        pos = np.arange(out)[:, None] * s - before + np.arange(k)[None, :]
        return (pos >= 0) & (pos < size)

    def row_inside(self) -> np.ndarray:
        """(oh, kh) bool."""
        return self._inside(self.oh, self.kh, self.sh, self.top, self.h)

    def col_inside(self) -> np.ndarray:
        """(ow, kw) bool."""
        return self._inside(self.ow, self.kw, self.sw, self.left, self.w)

    def counts(self) -> np.ndarray:
        """(oh, ow) int: how many elements of each window lie inside the input."""
        return self.row_inside().sum(1)[:, None] * self.col_inside().sum(1)[None, :]  # type: ignore[no-any-return]

    def interior(self) -> tuple[int, int, int, int]:
        """Output rows [r0, r1) and columns [c0, c1) whose windows lie wholly inside the input."""
        rows = np.flatnonzero(self.row_inside().all(1))
        cols = np.flatnonzero(self.col_inside().all(1))
        if not rows.size or not cols.size:
            return 0, 0, 0, 0
        return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def window(op: str, shape: Sequence[int], ksize: Sequence[int], strides: Sequence[int], padding: str) -> Window:
    """The Window of op ``op`` for an NHWC input of ``shape``; InvalidArgumentError
    naming the op for a bad rank, ksize, strides or padding."""
    if len(shape) != 4:
        raise InvalidArgumentError(f"op '{op}': input must be 4-D (NHWC), got shape {list(shape)}", op=op)
    n, h, w, c = (int(d) for d in shape)
    try:
        kh, kw = spatial_attr(ksize, "NHWC", "ksize")
        sh, sw = spatial_attr(strides, "NHWC", "strides")
        oh, top, _ = window_output_size(h, kh, 1, sh, padding)
        ow, left, _ = window_output_size(w, kw, 1, sw, padding)
    except ValueError as e:
        raise InvalidArgumentError(f"op '{op}': {e}", op=op) from None
    return Window(n, h, w, c, kh, kw, sh, sw, oh, ow, top, left)
