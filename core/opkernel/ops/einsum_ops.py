"""Einsum: its spec, shape function, gradient and generic kernel, following TensorFlow's
``linalg_ops.cc`` (EinsumShape), ``einsum_op_impl.h`` and ``linalg_grad.py``.

The equation is ``"<labels>,<labels>-><labels>"`` with one or two operands (TensorFlow's
kernels take no more), one character per label (letters, as TensorFlow's parser, any
character but ``.,->``) and at most one ``...`` per operand, whose dimensions broadcast as
numpy's.  A label repeated within an operand takes its diagonal; repeated in the output,
it places the result on a diagonal (zeros elsewhere); a label of one operand that is
absent from the output and the other operand is summed.  The generic kernel, on every backend, is TensorFlow's plan in other
ops: diagonals (a SelectV2 by the identity and a Sum), sums, then a Transpose and Reshape of each operand
into [batch, free, contracted] and one BatchMatMul, reshaped and transposed into the
output's order.

Registered with the built-in op library (``opkernel.ops._builtin``).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from ..errors import InvalidArgumentError
from ..gradients import register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import Tensor, ops_module as _ops
from ._grad_util import unbroadcast

__all__ = ["EinsumPlan", "einsum_plan", "register_generic_kernels", "register_gradients", "register_ops"]

_OP = "Einsum"
_ELLIPSIS = "..."


def _fail(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op {_OP!r}: {message}", op=_OP)


def _tokens(subscripts: str, what: str) -> list[str]:
    """A subscript string as labels, with "..." as one token."""
    if subscripts.count(_ELLIPSIS) > 1 or subscripts.replace(_ELLIPSIS, "").count(".") or (
            _ELLIPSIS not in subscripts and "." in subscripts):
        raise _fail(f"{what} {subscripts!r} has a '.' that is not one '...' ellipsis")
    head, sep, tail = subscripts.partition(_ELLIPSIS)
    out = list(head) + ([_ELLIPSIS] if sep else []) + list(tail)
    for t in out:
        if t in "->":
            raise _fail(f"{what} {subscripts!r}: a subscript cannot be {t!r}")
    return out


class EinsumPlan(NamedTuple):
    """An equation checked against its operands' shapes."""

    inputs: list[list[str]]              # each operand's labels, "..." one token
    output: list[str]
    sizes: dict[str, int]                # every letter label's size
    ellipsis: tuple[int, ...]            # the broadcast shape of the ellipsis dims
    ellipsis_ranks: list[int]            # each operand's count of ellipsis dims


def parse_equation(equation: str, n: int) -> tuple[list[list[str]], list[str]]:
    """The operands' and the output's label lists, after the checks that need no shapes."""
    if not isinstance(equation, str) or equation.count("->") != 1:
        raise _fail(f"the equation must have exactly one '->', got {equation!r}")
    lhs, rhs = equation.replace(" ", "").split("->")
    parts = lhs.split(",")
    if len(parts) != n:
        raise _fail(f"the equation {equation!r} names {len(parts)} operands, but {n} were given")
    if n not in (1, 2):
        raise _fail(f"the equation must have 1 or 2 operands, got {n}")
    inputs = [_tokens(p, "operand subscripts") for p in parts]
    output = _tokens(rhs, "output subscripts")
    for t in output:
        if t != _ELLIPSIS and not any(t in labels for labels in inputs):
            raise _fail(f"output subscript {t!r} appears in no operand of {equation!r}")
    return inputs, output


def einsum_plan(equation: str, shapes: Sequence[Sequence[int | None]]) -> EinsumPlan:
    """The equation checked against the operands' shapes (None: an unknown dimension)."""
    inputs, output = parse_equation(equation, len(shapes))
    sizes: dict[str, int] = {}
    ellipses: list[tuple[int | None, ...]] = []
    ranks: list[int] = []
    for k, (labels, shape) in enumerate(zip(inputs, shapes)):
        letters = [t for t in labels if t != _ELLIPSIS]
        extra = len(shape) - len(letters)
        if extra < 0 or (extra and _ELLIPSIS not in labels):
            raise _fail(f"operand {k} has rank {len(shape)} but subscripts {''.join(labels)!r} "
                        f"({len(letters)} labels{' and an ellipsis' if _ELLIPSIS in labels else ''})")
        at = labels.index(_ELLIPSIS) if _ELLIPSIS in labels else len(labels)
        dims = list(shape[:at]) + list(shape[at + extra:])
        ellipses.append(tuple(shape[at:at + extra]))
        ranks.append(extra)
        for t, d in zip(letters, dims):
            if d is None:
                continue
            have = sizes.setdefault(t, int(d))
            if have == 1:  # a label of size 1 broadcasts against the others (as TensorFlow's)
                sizes[t] = int(d)
            elif int(d) not in (1, have):
                raise _fail(f"label {t!r} has size {have} in one place and {d} in operand {k}: sizes must agree "
                            f"(or one be 1)")
    try:
        broadcast = np.broadcast_shapes(*[tuple(1 if d is None else d for d in e) for e in ellipses])
    except ValueError:
        raise _fail(f"the ellipsis dimensions {[list(e) for e in ellipses]} do not broadcast") from None
    if broadcast and _ELLIPSIS not in output:
        raise _fail(f"the output has {len(broadcast)} broadcast dimension(s) but no ellipsis (...) in its subscripts "
                    f"{equation!r}")
    return EinsumPlan(inputs, output, sizes, tuple(int(d) for d in broadcast), ranks)


# ---------------------------------------------------------------- shape function


def _einsum_shape(c: InferenceContext) -> None:
    shapes = [c.input(i) for i in range(c.num_inputs())]
    if any(s.rank is None for s in shapes):
        try:
            _, output = parse_equation(c.get_attr("equation"), c.num_inputs())
        except InvalidArgumentError as e:
            raise c.error(str(e)) from None
        if _ELLIPSIS in output:
            c.set_output(0, c.unknown_shape())
        else:
            c.set_output(0, c.unknown_shape_of_rank(len(output)))
        return
    try:
        plan = einsum_plan(c.get_attr("equation"), [s.as_list() for s in shapes])
    except InvalidArgumentError as e:
        raise c.error(str(e)) from None
    unknown_ellipsis = any(None in s.as_list() for s in shapes)
    dims: list[Any] = []
    for t in plan.output:
        if t == _ELLIPSIS:
            dims += [c.unknown_dim()] * len(plan.ellipsis) if unknown_ellipsis else list(plan.ellipsis)
        else:
            dims.append(plan.sizes.get(t))
    c.set_output(0, c.make_shape(dims))


def register_ops() -> None:
    register_op("Einsum").input("inputs: N * T").output("output: T").attr("equation: string").attr(
        "N: int >= 1"
    ).attr("T: type").set_shape_fn(_einsum_shape).doc(
        "Tensor contraction according to the Einstein summation convention.\n\n"
        "equation: '<labels>,<labels>-><labels>' with one or two operands; labels are letters, "
        "'...' stands for broadcast dimensions. A label in both operands and not in the output is "
        "summed over their products; a label repeated within an operand takes its diagonal; a "
        "label of one operand only, not in the output, is summed.\n"
        "inputs: One or two tensors.\n"
        "output: The labels of the output, in its order."
    )


# ---------------------------------------------------------------- the generic kernel


def _axes(labels: list[str], ellipsis_rank: int) -> list[str]:
    """Per-axis names: letters, and "...0".."...k" for the ellipsis dims (aligned right
    to the broadcast ellipsis, so names agree between operands)."""
    out: list[str] = []
    for t in labels:
        out += [f"...{ellipsis_rank - j}" for j in range(ellipsis_rank)] if t == _ELLIPSIS else [t]
    return out


def _transpose(x: Any, names: list[str], order: list[str]) -> Any:
    perm = [names.index(n) for n in order]
    return x if perm == list(range(len(perm))) else _ops().transpose(x, np.array(perm, np.int64))


def _reshape(x: Any, shape: Sequence[int]) -> Any:
    shape = [int(d) for d in shape]
    return x if list(x.shape) == shape else _ops().reshape(x, np.array(shape, np.int64))


def _diagonals(x: Any, names: list[str]) -> tuple[Any, list[str]]:
    """x with each repeated name reduced to its diagonal (mask by the identity, sum)."""
    ops = _ops()
    while len(set(names)) != len(names):
        first = next(n for i, n in enumerate(names) if n in names[:i])
        p, q = names.index(first), len(names) - 1 - names[::-1].index(first)
        size = int(x.shape[p])
        mask_shape = [1] * len(names)
        mask_shape[p] = mask_shape[q] = size
        dtype = x.dtype.np if isinstance(x, Tensor) else np.dtype(x.dtype)
        mask = np.eye(size, dtype=bool).reshape(mask_shape)  # selected, so off-diagonal NaNs do not reach the sum
        x = ops.sum(ops.select_v2(mask, x, np.zeros((), dtype)), np.array([q], np.int64))
        names = names[:q] + names[q + 1:]
    return x, names


def _einsum(inputs: list[Any], equation: str, **attrs: Any) -> Any:
    ops = _ops()
    plan = einsum_plan(equation, [tuple(x.shape) for x in inputs])
    full_out = _axes(plan.output, len(plan.ellipsis))
    out_names = list(dict.fromkeys(full_out))
    operands: list[tuple[Any, list[str]]] = []
    for k, x in enumerate(inputs):
        names = _axes(plan.inputs[k], plan.ellipsis_ranks[k])
        x, names = _diagonals(x, names)
        others = set(out_names).union(*[_axes(plan.inputs[j], plan.ellipsis_ranks[j]) for j in range(len(inputs)) if j != k])
        summed = [i for i, n in enumerate(names) if n not in others]
        if summed:
            x = ops.sum(x, np.array(summed, np.int64))
            names = [n for n in names if n in others]
        operands.append((x, names))
    size = {**plan.sizes, **{f"...{len(plan.ellipsis) - i}": d for i, d in enumerate(plan.ellipsis)}}
    if len(operands) == 1:
        x, names = operands[0]
        y = _transpose(x, names, out_names) if names != out_names else ops.identity(x)
        return _place_diagonals(y, out_names, full_out, size)
    (a, an), (b, bn) = operands
    batch = [n for n in out_names if n in an and n in bn]
    free_a = [n for n in an if n not in bn]
    free_b = [n for n in bn if n not in an]
    contract = [n for n in an if n in bn and n not in out_names]
    # a label's (or ellipsis) dim of one operand may be 1 where the other's is not: broadcast it
    for n in batch + contract:
        if int(a.shape[an.index(n)]) != size[n]:
            a = ops.broadcast_to(a, np.array([size[m] if m == n else int(a.shape[i]) for i, m in enumerate(an)], np.int64))
        if int(b.shape[bn.index(n)]) != size[n]:
            b = ops.broadcast_to(b, np.array([size[m] if m == n else int(b.shape[i]) for i, m in enumerate(bn)], np.int64))
    dims = [math.prod(size[n] for n in group) for group in (batch, free_a, contract, free_b)]
    a3 = _reshape(_transpose(a, an, batch + free_a + contract), (dims[0], dims[1], dims[2]))
    b3 = _reshape(_transpose(b, bn, batch + contract + free_b), (dims[0], dims[2], dims[3]))
    c = ops.batch_mat_mul(a3, b3)
    c = _reshape(c, [size[n] for n in batch + free_a + free_b])
    return _place_diagonals(_transpose(c, batch + free_a + free_b, out_names), out_names, full_out, size)


def _place_diagonals(x: Any, names: list[str], full: list[str], size: dict[str, int]) -> Any:
    """x, whose axes are ``names`` (each once), with axes ``full``: a name repeated there
    puts x on the diagonal of its axes (zeros elsewhere)."""
    if full == names:
        return x
    ops = _ops()
    extra: list[str] = []
    dtype = x.dtype.np if isinstance(x, Tensor) else np.dtype(x.dtype)
    for i, n in enumerate(full):
        if n in full[:i]:
            rank = len(names) + len(extra) + 1
            x = ops.expand_dims(x, np.int64(-1))
            mask_shape = [1] * rank
            mask_shape[names.index(n)] = mask_shape[-1] = size[n]
            x = ops.select_v2(np.eye(size[n], dtype=bool).reshape(mask_shape), x, np.zeros((), dtype))
            extra.append(f"{n}#{i}")
    have = names + extra
    want = [n if n not in full[:i] else f"{n}#{i}" for i, n in enumerate(full)]
    perm = [have.index(n) for n in want]
    return x if perm == list(range(len(perm))) else ops.transpose(x, np.array(perm, np.int64))


#: The types of BatchMatMul, which the kernel's products run on.
_TYPES = ["bfloat16", "float16", "float32", "float64", "int16", "int32", "int64", "complex64", "complex128"]


def register_generic_kernels() -> None:
    """Einsum on any backend, composed of other ops."""
    register_kernel(_OP, backend="*", type_constraints={"T": _TYPES})(_einsum)


# ---------------------------------------------------------------- gradient


def _operand_grad(grad: Tensor, other: tuple[Tensor, list[str]] | None, x: Tensor, labels: list[str],
                  output: list[str]) -> Tensor:
    """The gradient of one operand with subscripts ``labels``: the output gradient
    contracted with the other operand, summed-only labels broadcast back, ellipsis
    dimensions unbroadcast and repeated labels put on their diagonals."""
    ops = _ops()
    unique = list(dict.fromkeys(labels))
    present = set(output) | (set(other[1]) if other else set())
    kept = [t for t in unique if t == _ELLIPSIS or t in present]
    borrowed = _ELLIPSIS in output and _ELLIPSIS not in kept  # the output broadcast x against dims it lacks
    sub = "".join(([_ELLIPSIS] if borrowed else []) + kept)
    eq = f"{''.join(output)},{''.join(other[1])}->{sub}" if other else f"{''.join(output)}->{sub}"
    if other is not None:  # complex: the other operand conjugated, TensorFlow's convention (as MatMul's)
        partner = ops.conj(other[0]) if other[0].dtype.is_complex else other[0]
    g = ops.einsum([grad, partner] if other else [grad], equation=eq)
    if borrowed and len(g.shape) > len(kept):
        g = ops.sum(g, np.arange(len(g.shape) - len(kept), dtype=np.int64))
    shape = tuple(x.shape)
    if None in shape:
        raise _fail("the gradient needs the operands' dimensions known")
    letters = [t for t in labels if t != _ELLIPSIS]
    k = len(shape) - len(letters)
    at = labels.index(_ELLIPSIS) if _ELLIPSIS in labels else len(labels)
    ell = shape[at:at + k]
    sizes = dict(zip([t for t in labels[:at]] + [t for t in labels[at + 1:]], shape[:at] + shape[at + k:]))
    if _ELLIPSIS in kept:  # the gradient's ellipsis dims are the output's: sum those x's were broadcast to
        e = kept.index(_ELLIPSIS)
        width = len(g.shape) - (len(kept) - 1)
        head, tail = list(g.shape[:e]), list(g.shape[e + width:])
        g = ops.transpose(g, np.array(list(range(e, e + width)) + list(range(e)) + list(range(e + width, len(g.shape))),
                                      np.int64)) if e else g
        g = unbroadcast(g, tuple(ell) + tuple(head) + tuple(tail))
        if e:
            g = ops.transpose(g, np.array(list(range(k, k + e)) + list(range(k)) + list(range(k + e, len(g.shape))),
                                          np.int64))
    names = [n for t in kept for n in ([f"..{i}" for i in range(k)] if t == _ELLIPSIS else [t])]
    for t in unique:  # summed-only labels: broadcast back
        if t != _ELLIPSIS and t not in kept:
            pos = [u for u in unique if u == _ELLIPSIS or u in kept or u == t]
            i = sum(len(ell) if u == _ELLIPSIS else 1 for u in pos[:pos.index(t)])
            g = ops.expand_dims(g, np.int64(i))
            names.insert(i, t)
            g = ops.broadcast_to(g, np.array([sizes[n] if n in sizes else int(g.shape[j]) for j, n in enumerate(names)],
                                             np.int64))
            kept = [u for u in unique if u == _ELLIPSIS or u in kept or u == t]
    full = [n for t in labels for n in ([f"..{i}" for i in range(k)] if t == _ELLIPSIS else [t])]
    g = _place_diagonals(g, names, full, sizes)
    if any(e == 1 and d != 1 for d, e in zip(shape, g.shape)):  # x's label broadcast the other's size-1 one
        g = ops.broadcast_to(g, np.array([d if e == 1 else e for d, e in zip(shape, g.shape)], np.int64))
    stretched = [i for i, (d, e) in enumerate(zip(shape, g.shape)) if d == 1 and e != 1]  # labels of size 1 broadcast
    return ops.sum(g, np.array(stretched, np.int64), keep_dims=True) if stretched else g  # type: ignore[no-any-return]


def _einsum_grad(op: Any, grad: Tensor) -> list[Any]:
    inputs, output = parse_equation(op.get_attr("equation"), len(op.inputs))
    xs = list(op.inputs)
    if len(xs) == 1:
        return [_operand_grad(grad, None, xs[0], inputs[0], output)]
    need = op.needs_input_grad
    return [
        _operand_grad(grad, (xs[1], inputs[1]), xs[0], inputs[0], output) if need[0] else None,
        _operand_grad(grad, (xs[0], inputs[0]), xs[1], inputs[1], output) if need[1] else None,
    ]


def register_gradients() -> None:
    register_gradient(_OP)(_einsum_grad)
