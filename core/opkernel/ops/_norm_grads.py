"""The second derivative shared by the normalizations (FusedLayerNormGrad's and
FusedBatchNormGradV3's gradients): both normalize x over a set of elements (a row; a
channel's batch and positions) and scale it by a factor constant over that set, so
their first derivatives, and these, are one formula over different axes."""

from __future__ import annotations

from typing import Any, Callable

from ..tensor import Tensor
from ..tensor import ops_module as _ops

__all__ = ["normalization_grad_grad"]


def normalization_grad_grad(dy: Any, x: Any, scale: Any, epsilon: float, axes: list[int], n: float,
                            sum_scale: Callable[[Any], Any], gx: Tensor | None, gs: Tensor | None,
                            gb: Tensor | None) -> tuple[Any, Any, Any]:
    """The gradients (of dy, of x, of scale) of the first derivative of a normalization
    over ``axes`` (``n`` elements each), recomputing its statistics from ``x``.

    Per set of n elements, with r = rsqrt(var + epsilon), xh = (x - mean) * r,
    g = dy * scale and P(v) = v - mean(v) - xh * mean(v * xh) (the projection the first
    derivative applies), the first derivative is dx = r * P(g), dscale = sum(dy * xh),
    doffset = sum(dy).  For incoming gradients Gx, Gs, Gb (Gs and Gb broadcast as scale):
      d/d dy    = scale * r * P(Gx) + Gs * xh + Gb
      d/d scale = sum_scale(dy * r * P(Gx))
      d/d x     = r * P(Gs * dy) - r^2 / n * (w * P(Gx) + u * P(g))
                  + r^2 * xh / n * (u * w / n - (sum(Gx * g) - sum(Gx) * sum(g) / n))
    with u = sum(Gx * xh) and w = sum(g * xh) (r's own derivative is -r^2 * xh / n).
    ``scale`` (and Gs, Gb) arrive already shaped to broadcast against x; ``sum_scale``
    reduces an x-shaped value to scale's own shape.  The scale's gradient is None when Gx
    is (no term reaches it)."""
    ops = _ops()

    def mean(v: Any) -> Any:
        return ops.mean(v, axes, keep_dims=True)

    def total(v: Any) -> Any:
        return ops.sum(v, axes, keep_dims=True)

    xc = ops.sub(x, mean(x))
    r = ops.rsqrt(ops.add(mean(ops.square(xc)), epsilon))
    xh = ops.mul(xc, r)
    g = ops.mul(dy, scale)

    def proj(v: Any) -> Any:
        return ops.sub(ops.sub(v, mean(v)), ops.mul(xh, mean(ops.mul(v, xh))))

    zeros = ops.zeros_like(x)
    terms_dy: list[Any] = []
    terms_x: list[Any] = []
    d_scale = None
    if gx is not None:
        p_gx = proj(gx)
        terms_dy.append(ops.mul(ops.mul(scale, r), p_gx))
        d_scale = sum_scale(ops.mul(ops.mul(dy, r), p_gx))
        u, w = total(ops.mul(gx, xh)), total(ops.mul(g, xh))
        r2 = ops.square(r)
        a_b = ops.sub(total(ops.mul(gx, g)), ops.real_div(ops.mul(total(gx), total(g)), n))
        terms_x.append(ops.neg(ops.mul(ops.real_div(r2, n), ops.add(ops.mul(w, p_gx), ops.mul(u, proj(g))))))
        terms_x.append(ops.mul(ops.real_div(ops.mul(r2, xh), n), ops.sub(ops.real_div(ops.mul(u, w), n), a_b)))
    if gs is not None:
        terms_dy.append(ops.mul(gs, xh))
        terms_x.append(ops.mul(r, proj(ops.mul(gs, dy))))
    if gb is not None:
        terms_dy.append(ops.add(zeros, gb))

    def added(terms: list[Any]) -> Any:
        out = terms[0] if terms else zeros
        for t in terms[1:]:
            out = ops.add(out, t)
        return out

    return added(terms_dy), added(terms_x), d_scale
