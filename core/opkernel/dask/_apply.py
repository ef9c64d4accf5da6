"""``ok.dask.apply``: an op over dask arrays, as a lazy dask array.

Shapes and dtypes come from the op's definition (its shape function and type
attrs) and chunks from its partitioning rule, so building the graph runs no
kernel.  The graph's tasks call :mod:`._worker` on numpy chunks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from .. import op_registry, plugins
from .._infer import infer_shapes
from ..dtypes import DType, as_dtype
from ..errors import InvalidArgumentError, OpTypeError, ShapeError
from ..op_registry import OpDef
from ..ops.nn_ops import explicit_padding, spatial_attr, window_output_size
from . import _worker
from .rules import Batch, Contraction, Elementwise, Reduction, Rule, Window, rule_for

if TYPE_CHECKING:
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

__all__ = ["apply"]


def _import_dask() -> None:
    """Import Dask at the first apply, not with this module: dask.array imports every
    array library it can register (cupy among them), which importing opkernel's
    modules must not do."""
    g = globals()
    if "da" not in g:
        import dask.array
        from dask.base import tokenize
        from dask.highlevelgraph import HighLevelGraph

        g.update(da=dask.array, tokenize=tokenize, HighLevelGraph=HighLevelGraph)

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _is_traced(fn: Any) -> bool:
    from ..function import ConcreteFunction, Function

    return isinstance(fn, (Function, ConcreteFunction)) or (hasattr(fn, "graphs") and hasattr(fn, "graph"))


def _op_name(op: Any) -> str:
    if isinstance(op, str):
        return op
    name = getattr(op, "_op_name", None)
    if isinstance(name, str):
        return name
    raise InvalidArgumentError(
        f"ok.dask.apply takes an op name, a generated op wrapper (ok.ops.matmul) or a traced function "
        f"(ok.function, ok.load), got {op!r}"
    )


@dataclass
class _Call:
    """One validated op call: its inputs grouped as the OpDef declares them, its
    bound attrs (type attrs included), the output's shape and dtype."""

    op_def: OpDef
    groups: list[Any]  # per declared input: a dask array / numpy array, or a list of them
    attrs: dict[str, Any]  # explicit and default attrs, inferred type and length attrs
    out_shape: tuple[int, ...]
    out_dtype: DType

    @property
    def name(self) -> str:
        return self.op_def.name

    def frozen(self, **changes: Any) -> tuple[tuple[str, Any], ...]:
        """The explicit attrs passed to each chunk's call (inferred type attrs left to the engine)."""
        attrs = {k: v for k, v in self.attrs.items() if k not in self.op_def.inferred_attrs}
        attrs.update(changes)
        return tuple(sorted((k, _worker.freeze(v)) for k, v in attrs.items()))

    def error(self, message: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"op '{self.name}': {message}", op=self.name)


def _is_dask(x: Any) -> bool:
    return isinstance(x, da.Array)


def _host_value(x: Any, dtype: DType | None) -> np.ndarray:
    if dtype is not None and not isinstance(x, np.ndarray):
        return np.asarray(x, dtype=dtype.np)
    return np.asarray(x)


def _bind(op_def: OpDef, inputs: Sequence[Any], attrs: dict[str, Any]) -> _Call:
    name = op_def.name
    if len(inputs) != len(op_def.inputs):
        declared = ", ".join(a.name for a in op_def.inputs)
        raise InvalidArgumentError(
            f"op '{name}' takes {len(op_def.inputs)} inputs ({declared}), got {len(inputs)}", op=name
        )
    if len(op_def.outputs) != 1 or op_def.outputs[0].is_list:
        raise InvalidArgumentError(
            f"op '{name}' has {len(op_def.outputs)} outputs; ok.dask.apply runs ops with one output", op=name
        )
    for key in attrs:
        if key in op_def.inferred_attrs:
            raise InvalidArgumentError(
                f"op '{name}': attr '{key}' is inferred from the inputs; do not pass it", op=name
            )
    bound = {k: op_def.coerce_attr(k, v) for k, v in attrs.items()}
    groups: list[Any] = [list(v) if arg.is_list else v for arg, v in zip(op_def.inputs, inputs)]
    for arg, group in zip(op_def.inputs, groups):
        if arg.is_list and not isinstance(group, list):
            raise InvalidArgumentError(f"op '{name}': input '{arg.name}' is a list of arrays, got {group!r}", op=name)
        if arg.number_attr:
            bound.setdefault(arg.number_attr, len(group))
    # Type attrs from inputs that carry a dtype, then Python literals take them.
    for arg, group in zip(op_def.inputs, groups):
        items = group if arg.is_list else [group]
        for x in items:
            if arg.type_attr and hasattr(x, "dtype") and arg.type_attr not in bound:
                bound[arg.type_attr] = as_dtype(x.dtype)
    for i, (arg, group) in enumerate(zip(op_def.inputs, groups)):
        want = bound.get(arg.type_attr) if arg.type_attr else arg.dtype
        if arg.is_list:
            groups[i] = [x if _is_dask(x) else _host_value(x, want) for x in group]
        else:
            groups[i] = group if _is_dask(group) else _host_value(group, want)
        items = groups[i] if arg.is_list else [groups[i]]
        for x in items:
            dt = as_dtype(x.dtype)
            if arg.type_attr:
                bound.setdefault(arg.type_attr, dt)
                if dt != bound[arg.type_attr]:
                    raise OpTypeError(
                        f"op '{name}': input '{arg.name}' has dtype {dt.name}, but attr '{arg.type_attr}' "
                        f"is {bound[arg.type_attr].name} from the other inputs", op=name,
                    )
                op_def.check_type_attr(arg.type_attr, dt, arg.name)
            elif arg.dtype is not None and dt != arg.dtype:
                raise OpTypeError(
                    f"op '{name}': input '{arg.name}' must have dtype {arg.dtype.name}, got {dt.name}", op=name
                )
    for attr in op_def.attrs:
        if attr.name not in bound and attr.has_default:
            bound[attr.name] = attr.default
    shapes = [[x.shape for x in g] if isinstance(g, list) else g.shape for g in groups]
    values = [None if isinstance(g, list) or _is_dask(g) else g for g in groups]
    for g in groups:
        for x in g if isinstance(g, list) else [g]:
            if any(math.isnan(d) for d in x.shape):
                raise ShapeError(
                    f"op '{name}': an input has unknown chunk sizes {x.shape}; call compute_chunk_sizes() first",
                    op=name,
                )
    shape_attrs = {k: v for k, v in bound.items() if k not in op_def.inferred_attrs or k in attrs}
    inferred = infer_shapes(op_def, shapes, shape_attrs, values)[0]
    out = inferred.as_list() if inferred.rank is not None else None
    if out is None or any(d is None for d in out):
        raise ShapeError(
            f"op '{name}': its shape function cannot tell the output's shape ({inferred}) from these inputs; "
            "an input whose value decides it (reduction axes, a shape) must be numbers or a numpy array, "
            "not a dask array", op=name,
        )
    out_arg = op_def.outputs[0]
    out_dtype = bound[out_arg.type_attr] if out_arg.type_attr else out_arg.dtype
    if out_dtype is None:
        raise InvalidArgumentError(f"op '{name}': cannot tell the output's dtype", op=name)
    return _Call(op_def, groups, bound, tuple(int(d or 0) for d in out), as_dtype(out_dtype))


def _as_dask(x: Any) -> da.Array:
    """``x`` as a dask array whose chunks along every non-empty axis are non-empty: Dask's
    blockwise takes a chunk of one element for a broadcast one, so (0, 1) against (1,)
    made an Add of two one-element arrays two elements long.  An empty axis keeps one
    empty chunk."""
    if not _is_dask(x):
        return da.from_array(x, chunks=-1)
    if any(0 in c and n for c, n in zip(x.chunks, x.shape)):
        x = x.rechunk(tuple(tuple(k for k in c if k) or (0,) for c in x.chunks))
    return x


def _meta(call: _Call, ndim: int | None = None) -> np.ndarray:
    return np.empty((0,) * (len(call.out_shape) if ndim is None else ndim), dtype=call.out_dtype.np)


def _checked(call: _Call, result: da.Array) -> da.Array:
    if tuple(result.shape) != call.out_shape:
        raise InvalidArgumentError(
            f"op '{call.name}': its partitioning rule gives shape {result.shape}, its shape function "
            f"{call.out_shape}; the declared rule does not fit this op", op=call.name,
        )
    return result


# ------------------------------------------------------------------ elementwise

def _elementwise_block(*blocks: Any, op: str, attrs: Any, layout: tuple[int | None, ...]) -> Any:
    inputs: list[Any] = []
    it = iter(blocks)
    for n in layout:
        inputs.append(next(it) if n is None else [next(it) for _ in range(n)])
    return _worker.run(op, attrs, *inputs)


def _elementwise(call: _Call) -> da.Array:
    flat: list[da.Array] = []
    layout: list[int | None] = []
    for g in call.groups:
        items = g if isinstance(g, list) else [g]
        layout.append(len(items) if isinstance(g, list) else None)
        flat.extend(_as_dask(x) for x in items)
    ndim = len(call.out_shape)
    out_ind = _LETTERS[:ndim]
    pairs: list[Any] = []
    for x in flat:
        pairs += [x, out_ind[ndim - x.ndim:]]
    fn = partial(_elementwise_block, op=call.name, attrs=call.frozen(), layout=tuple(layout))
    name = f"{_slug(call.name)}-{tokenize(call.name, call.frozen(), *flat)}"
    return da.blockwise(fn, out_ind, *pairs, name=name, dtype=call.out_dtype.np, meta=_meta(call))


# ------------------------------------------------------------------ reductions

def _axes(call: _Call, rule: Reduction, ndim: int) -> tuple[int, ...]:
    value = call.groups[rule.axes_input]
    if _is_dask(value):
        raise call.error("the reduction axes must be given as numbers or a numpy array, not a dask array")
    axes = [int(a) for a in np.asarray(value).ravel()]
    return tuple(sorted({a + ndim if a < 0 else a for a in axes}))


def _reduce_block(x: Any, axis: tuple[int, ...] | int | None = None, keepdims: bool = False, *,
                  op: str, attrs: Any, idx: Any, computing_meta: bool = False) -> Any:
    axes = tuple(range(x.ndim)) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    return _worker.run(op, attrs + (("keep_dims", bool(keepdims)),), x, np.asarray(axes, dtype=idx))


def _mean_accumulator(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """What Mean sums in, as the op does (TensorFlow's reduction_ops.h): 64 bits for the
    integers, float32 for the 16-bit floats, else the type itself."""
    if dtype.kind == "i":
        return np.dtype(np.int64)
    if dtype.kind in "ub":
        return np.dtype(np.uint64)
    if dtype.kind == "f" and dtype.itemsize < 4 or dtype.name == "bfloat16":
        return np.dtype(np.float32)
    return dtype


def _mean_chunk(x: Any, axis: Any = None, keepdims: bool = False, *, attrs: Any, idx: Any,
                computing_meta: bool = False) -> Any:
    """A chunk's partial sum, in Mean's accumulator type."""
    acc = _mean_accumulator(np.dtype(x.dtype))
    return _reduce_block(np.asarray(x).astype(acc, copy=False), axis, keepdims, op="Sum",
                         attrs=tuple(kv for kv in attrs if kv[0] != "T"), idx=idx)


def _mean_aggregate(x: Any, axis: Any = None, keepdims: bool = False, *, attrs: Any, idx: Any, count: int,
                    out: Any, computing_meta: bool = False) -> Any:
    total = _mean_chunk(x, axis, keepdims, attrs=attrs, idx=idx)
    if np.issubdtype(total.dtype, np.integer):
        if count == 0:  # the op's mean of nothing: 0 for integers
            return np.zeros_like(total, dtype=out)
        if np.issubdtype(total.dtype, np.unsignedinteger):
            return np.asarray(total // count).astype(out)
        q = np.abs(total) // count  # toward zero, as C++'s integer division
        return np.where(total < 0, -q, q).astype(out)
    with np.errstate(invalid="ignore", divide="ignore"):  # the mean of nothing is nan, as the op's
        return np.asarray(np.true_divide(total, count)).astype(out)


def _reduction(call: _Call, rule: Reduction) -> da.Array:
    x = _as_dask(call.groups[0])
    if rule.kind == "arg":
        return _arg_reduction(call, rule, x)
    axes = _axes(call, rule, x.ndim)
    idx = np.asarray(call.groups[rule.axes_input]).dtype
    keep = bool(call.attrs.get("keep_dims", False))
    attrs = tuple(kv for kv in call.frozen() if kv[0] != "keep_dims")
    if rule.kind == "mean":  # partial sums in the op's accumulator type, one division at the end
        count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        chunk = partial(_mean_chunk, attrs=attrs, idx=idx)
        aggregate: Callable[..., Any] = partial(_mean_aggregate, attrs=attrs, idx=idx, count=count, out=call.out_dtype.np)
        combine = chunk
    else:
        chunk = combine = aggregate = partial(_reduce_block, op=call.name, attrs=attrs, idx=idx)
    if not axes:  # no axis reduced: the op on each chunk alone
        return da.map_blocks(partial(_reduce_block, op=call.name, attrs=attrs, idx=idx, axis=(), keepdims=keep),
                             x, dtype=call.out_dtype.np, meta=_meta(call))
    return da.reduction(
        x, chunk, aggregate, combine=combine, axis=axes, keepdims=keep, dtype=call.out_dtype.np,
        meta=_meta(call), name=_slug(call.name), concatenate=True,
    )


def _arg_chunk(x: np.ndarray, offset: int, *, op: str, attrs: Any, axis: int, idx: Any) -> tuple[Any, Any]:
    """The chunk's winner along ``axis`` (kept as a length-1 axis) and its global index."""
    pos = np.asarray(_worker.run(op, attrs, x, np.asarray(axis, dtype=idx)))
    pos = np.expand_dims(pos.astype(np.int64), axis)
    return np.take_along_axis(x, pos, axis), pos + offset


def _arg_combine(cands: list[tuple[Any, Any]], *, op: str, attrs: Any, axis: int, idx: Any, out: Any) -> Any:
    values = np.concatenate([c[0] for c in cands], axis=axis)
    index = np.concatenate([c[1] for c in cands], axis=axis)
    pos = np.asarray(_worker.run(op, attrs, values, np.asarray(axis, dtype=idx))).astype(np.int64)
    return np.take_along_axis(index, np.expand_dims(pos, axis), axis).squeeze(axis).astype(out)


def _arg_reduction(call: _Call, rule: Reduction, x: da.Array) -> da.Array:
    axes = _axes(call, rule, x.ndim)
    if len(axes) != 1:
        raise call.error(f"an index reduction takes one axis, got {list(axes)}")
    axis = axes[0]
    idx = np.asarray(call.groups[rule.axes_input]).dtype
    attrs = call.frozen()
    tok = tokenize(call.name, attrs, x.name, axis)
    cname, name = f"{_slug(call.name)}-chunk-{tok}", f"{_slug(call.name)}-{tok}"
    offsets = np.cumsum((0,) + x.chunks[axis])
    chunk_fn = partial(_arg_chunk, op=call.name, attrs=attrs, axis=axis, idx=idx)
    # A zero-size chunk along the axis has no winner: only the others compete (all of them
    # when every chunk is empty, so the op says what it says of an empty axis).
    along = [j for j, n in enumerate(x.chunks[axis]) if n] or list(range(x.numblocks[axis]))
    dsk: dict[Any, Any] = {}
    for block in np.ndindex(*x.numblocks):
        if block[axis] in along:
            dsk[(cname, *block)] = (chunk_fn, (x.name, *block), int(offsets[block[axis]]))
    combine = partial(_arg_combine, op=call.name, attrs=attrs, axis=axis, idx=idx, out=call.out_dtype.np)
    out_blocks = [n for i, n in enumerate(x.numblocks) if i != axis]
    for out in np.ndindex(*out_blocks):
        cands = [(cname, *out[:axis], j, *out[axis:]) for j in along]
        dsk[(name, *out)] = (combine, cands)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[x])
    chunks = tuple(c for i, c in enumerate(x.chunks) if i != axis)
    return da.Array(graph, name, chunks, meta=_meta(call))


# ------------------------------------------------------------------ windows

@dataclass(frozen=True)
class _Slice:
    """One output block along one spatial axis: outputs [o0, o1) come from input
    rows [a, b) run with padding ``pads`` (EXPLICIT) or the op's own padding,
    as the slice's outputs [o0 - first, o1 - first)."""

    o0: int
    o1: int
    a: int
    b: int
    first: int
    pads: tuple[int, int]


def plan_axis(size: int, k_eff: int, stride: int, padding: str, pads: tuple[int, int],
              bounds: Sequence[int]) -> list[_Slice]:
    """The output blocks along one spatial axis of ``size`` input rows whose chunks
    start at ``bounds`` (ascending, from 0), and the input slice of each.

    A slice starts on the stride grid and, for SAME, ends where ``size`` does modulo
    the stride (or at the array's end), so the op's own SAME padding of the slice
    has the array's padding before it and places its windows where the array's
    are; rows the slice lacks are only under windows that are trimmed away.
    EXPLICIT pads the array's edges only: a slice inside the array starts on the
    first row of its first window.
    """
    out, before, _ = window_output_size(size, k_eff, 1, stride, padding, pads)
    cuts = sorted({min(out, max(0, -(-b // stride))) for b in bounds} | {0, out})
    slices = []
    for o0, o1 in zip(cuts, cuts[1:]):
        if o1 <= o0:
            continue
        need_a, need_b = o0 * stride - before, (o1 - 1) * stride - before + k_eff
        if padding == "EXPLICIT":
            a = max(need_a, 0)
            if a >= size:  # every window of the block lies in the bottom padding: start on its
                # stride grid at the last such row inside the array (its windows slide into the padding)
                a = max(need_a - -(-(need_a - size + 1) // stride) * stride, 0)
            b = min(need_b, size)
            if b <= a:  # every window lies in the top padding: one real row keeps the slice non-empty
                b = min(a + 1, size)
            first = 0 if a == 0 else (a + before) // stride  # the slice's first window is this output
            slices.append(_Slice(o0, o1, a, b, first, (pads[0] if a == 0 else 0, pads[1] if b == size else 0)))
            continue
        a = max(need_a, 0) // stride * stride
        if need_b >= size:
            b = size
        elif padding == "SAME":
            b = min(size, need_b + (size - need_b) % stride)
        else:
            b = need_b
        slices.append(_Slice(o0, o1, a, b, a // stride, (0, 0)))
    return slices


def _window_block(pieces: Any, filt: Any, starts: tuple[int, int], sl: tuple[_Slice, _Slice], *,
                  op: str, attrs: Any, axes: tuple[int, int], explicit: str | None, padding: str, fmt: str) -> Any:
    x = _worker.concat_grid(pieces)
    index = [slice(None)] * x.ndim
    for ax, s, start in zip(axes, sl, starts):
        index[ax] = slice(s.a - start, s.b - start)
    x = x[tuple(index)]
    if explicit is not None and dict(attrs).get(padding) == "EXPLICIT":
        (t, b), (l, r) = sl[0].pads, sl[1].pads
        pads = (0, 0, t, b, l, r, 0, 0) if fmt == "NHWC" else (0, 0, 0, 0, t, b, l, r)
        attrs = tuple((k, pads if k == explicit else v) for k, v in attrs)
    y = _worker.run(op, attrs, x) if filt is None else _worker.run(op, attrs, x, filt)
    index = [slice(None)] * y.ndim
    for ax, s in zip(axes, sl):
        index[ax] = slice(s.o0 - s.first, s.o1 - s.first)
    return np.ascontiguousarray(y[tuple(index)])


def _window(call: _Call, rule: Window) -> da.Array:
    x = _as_dask(call.groups[0])
    if x.ndim != 4:
        raise ShapeError(f"op '{call.name}': a window op's input must be 4-D, got shape {x.shape}", op=call.name)
    attrs = call.attrs
    fmt = str(attrs[rule.data_format]) if rule.data_format else "NHWC"
    h_ax, w_ax, c_ax = (1, 2, 3) if fmt == "NHWC" else (2, 3, 1)
    padding = str(attrs[rule.padding])
    try:
        sh, sw = spatial_attr(attrs[rule.strides], fmt, rule.strides)
        dh, dw = spatial_attr(attrs[rule.dilations], fmt, rule.dilations) if rule.dilations else (1, 1)
        filt = None
        if rule.filter is not None:
            f = call.groups[rule.filter]
            kh, kw = int(f.shape[0]), int(f.shape[1])
            filt = _as_dask(f).rechunk((-1, -1, -1, -1))
            x = x.rechunk({c_ax: -1})  # a convolution reads every input channel
        else:
            kh, kw = spatial_attr(attrs[str(rule.ksize)], fmt, str(rule.ksize))
        ph, pw = explicit_padding(
            padding, attrs[rule.explicit_paddings] if rule.explicit_paddings else (), fmt,
            None if rule.filter is not None else (kh, kw),
        )
    except ValueError as e:
        raise call.error(str(e)) from None
    if 0 in call.out_shape:  # VALID with a window larger than the input: nothing to compute
        return da.empty(call.out_shape, dtype=call.out_dtype.np, chunks=-1)
    plans = []
    for ax, k, s, d, p in ((h_ax, kh, sh, dh, ph), (w_ax, kw, sw, dw, pw)):
        bounds = np.cumsum((0,) + x.chunks[ax])
        plans.append(plan_axis(x.shape[ax], (k - 1) * d + 1, s, padding, p, bounds[:-1].tolist()))
    tok = tokenize(call.name, call.frozen(), x.name, None if filt is None else filt.name)
    name = f"{_slug(call.name)}-{tok}"
    fn = partial(_window_block, op=call.name, attrs=call.frozen(), axes=(h_ax, w_ax),
                 explicit=rule.explicit_paddings, padding=rule.padding, fmt=fmt)
    bounds_h = np.cumsum((0,) + x.chunks[h_ax])
    bounds_w = np.cumsum((0,) + x.chunks[w_ax])

    def covering(bounds: np.ndarray, a: int, b: int) -> range:
        return range(int(np.searchsorted(bounds, a, "right")) - 1, int(np.searchsorted(bounds, b, "left")))

    dsk: dict[Any, Any] = {}
    c_blocks = 1 if filt is not None else x.numblocks[c_ax]
    for n in range(x.numblocks[0]):
        for i, s_h in enumerate(plans[0]):
            rows = covering(bounds_h, s_h.a, s_h.b)
            for j, s_w in enumerate(plans[1]):
                cols = covering(bounds_w, s_w.a, s_w.b)
                for c in range(c_blocks):
                    def key(r: int, q: int) -> tuple[Any, ...]:
                        block = [n, 0, 0, 0]
                        block[h_ax], block[w_ax], block[c_ax] = r, q, c
                        return (x.name, *block)

                    if fmt == "NHWC":
                        pieces = [[[[key(r, q)] for q in cols] for r in rows]]
                    else:
                        pieces = [[[[key(r, q) for q in cols] for r in rows]]]
                    out = [n, 0, 0, 0]
                    out[h_ax], out[w_ax], out[c_ax] = i, j, c
                    starts = (int(bounds_h[rows[0]]), int(bounds_w[cols[0]]))
                    f_key = None if filt is None else (filt.name, 0, 0, 0, 0)
                    dsk[(name, *out)] = (fn, pieces, f_key, starts, (s_h, s_w))
    chunks: list[tuple[int, ...]] = [x.chunks[0], (), (), ()]
    chunks[h_ax] = tuple(s.o1 - s.o0 for s in plans[0])
    chunks[w_ax] = tuple(s.o1 - s.o0 for s in plans[1])
    chunks[c_ax] = (call.out_shape[c_ax],) if filt is not None else x.chunks[c_ax]
    deps = [x] if filt is None else [x, filt]
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=deps)
    return da.Array(graph, name, tuple(chunks), meta=_meta(call))


# ------------------------------------------------------------------ contractions

def _contract_block(a: Any, b: Any, *, op: str, attrs: Any, axis: int) -> Any:
    return np.expand_dims(_worker.run(op, attrs, a, b), axis)


def _contraction(call: _Call, rule: Contraction) -> da.Array:
    a, b = (_as_dask(g) for g in call.groups[:2])
    ta, tb = bool(call.attrs.get(rule.transpose_a)), bool(call.attrs.get(rule.transpose_b))
    if not rule.batched and (a.ndim != 2 or b.ndim != 2):
        raise ShapeError(f"op '{call.name}': both inputs must be 2-D, got {a.shape} and {b.shape}", op=call.name)
    ndim = len(call.out_shape)
    batch = _LETTERS[: ndim - 2]
    i, j, k = "xyz"
    a_ind = batch[len(batch) - (a.ndim - 2):] + (k + i if ta else i + k)
    b_ind = batch[len(batch) - (b.ndim - 2):] + (j + k if tb else k + j)
    out_ind = batch + i + k + j
    fn = partial(_contract_block, op=call.name, attrs=call.frozen(), axis=ndim - 1)
    name = f"{_slug(call.name)}-{tokenize(call.name, call.frozen(), a, b)}"
    parts = da.blockwise(fn, out_ind, a, a_ind, b, b_ind, adjust_chunks={k: 1}, name=name,
                         dtype=call.out_dtype.np, meta=_meta(call, ndim + 1))
    if parts.shape[ndim - 1] == 1:
        return parts.squeeze(axis=ndim - 1)
    return parts.sum(axis=ndim - 1, dtype=call.out_dtype.np)


# ------------------------------------------------------------------ batch axes

def _batch_block(*blocks: Any, op: str, attrs: Any, layout: tuple[int | None, ...]) -> Any:
    return _elementwise_block(*blocks, op=op, attrs=attrs, layout=layout)


def _batch(call: _Call, rule: Batch) -> da.Array:
    x = _as_dask(call.groups[0])
    nb = rule.batch_axes(x.ndim)
    if x.ndim < nb or len(call.out_shape) < nb:
        raise ShapeError(f"op '{call.name}': Batch({nb}) needs inputs of rank >= {nb}, got {x.shape}", op=call.name)
    batch = _LETTERS[:nb]
    pairs: list[Any] = []
    layout: list[int | None] = []
    used = nb
    for pos, g in enumerate(call.groups):
        items = g if isinstance(g, list) else [g]
        layout.append(len(items) if isinstance(g, list) else None)
        for item in items:
            arr = _as_dask(item)
            own = _LETTERS[used: used + arr.ndim]
            used += arr.ndim
            if arr.ndim == x.ndim and arr.shape[:nb] == x.shape[:nb]:
                arr = arr.rechunk({**{d: x.chunks[d] for d in range(nb)}, **{d: -1 for d in range(nb, arr.ndim)}})
                pairs += [arr, batch + own[nb:]]
            else:
                pairs += [arr.rechunk(-1), own]
    new = _LETTERS[used: used + len(call.out_shape) - nb]
    out_ind = batch + new
    fn = partial(_batch_block, op=call.name, attrs=call.frozen(), layout=tuple(layout))
    name = f"{_slug(call.name)}-{tokenize(call.name, call.frozen(), *pairs[::2])}"
    return da.blockwise(fn, out_ind, *pairs, new_axes={c: d for c, d in zip(new, call.out_shape[nb:])},
                        concatenate=True, name=name, dtype=call.out_dtype.np, meta=_meta(call))


# ------------------------------------------------------------------ apply

def _slug(op: str) -> str:
    return op.replace(">", "-").lower()


_BUILDERS: dict[type, Callable[[_Call, Any], da.Array]] = {
    Elementwise: lambda call, rule: _elementwise(call),
    Reduction: _reduction,
    Window: _window,
    Contraction: _contraction,
    Batch: _batch,
}


# ------------------------------------------------------------------ traced functions

def _graph_output_spec(graph: Any, specs: list[Any], what: str) -> Any:
    from ..function import infer_shapes as graph_shapes

    if len(graph.outputs) != 1 or not isinstance(graph.output_structure, int):
        raise InvalidArgumentError(f"{what}: ok.dask.apply maps functions with one output tensor, "
                                   f"this one has {len(graph.outputs)}")
    edge = graph.outputs[0]
    if edge.kind == "node":
        return graph_shapes(graph, specs)[edge.index][edge.output]
    if edge.kind == "input":
        return specs[edge.index]
    raise InvalidArgumentError(f"{what}: its output does not depend on its inputs; nothing to map")


def _traced_block(data: bytes, *blocks: Any, token: str) -> Any:
    return _worker.run_saved(token, data, *blocks)


def _traced(fn: Any, arrays: Sequence[Any], attrs: dict[str, Any]) -> da.Array:
    """A traced function mapped over axis 0 of every input (a batch of samples)."""
    import os
    import tempfile

    from ..function import ConcreteFunction, Function
    from ..graph import TensorSpec
    from ..saving import save

    what = f"traced function {getattr(fn, '__name__', type(fn).__name__)!r}"
    if attrs:
        raise InvalidArgumentError(f"{what}: ok.dask.apply takes no attrs for a function, got {sorted(attrs)}")
    xs = [_as_dask(np.asarray(a) if not _is_dask(a) else a) for a in arrays]
    if not xs or any(x.ndim == 0 for x in xs) or len({x.shape[0] for x in xs}) != 1:
        raise ShapeError(f"{what}: ok.dask.apply maps it over axis 0 (the batch), so every input must have that "
                         f"axis, of one length; got shapes {[x.shape for x in xs]}")
    specs = [TensorSpec((None, *x.shape[1:]), as_dtype(x.dtype)) for x in xs]
    graph: Any
    if isinstance(fn, Function):
        graph = fn.get_concrete_function(*specs).graph
    elif isinstance(fn, ConcreteFunction):
        graph = fn.graph
    else:  # a function ok.load gave back: its first trace whose inputs take any batch size
        graph = next((g for g in fn.graphs if all(s.shape and s.shape[0] is None for s in g.inputs)), None)
        if graph is None:
            raise ShapeError(f"{what}: every saved trace has a fixed batch size ({[list(g.inputs) for g in fn.graphs]}); "
                             "save one traced with TensorSpec((None, ...)) to map it over chunks of the batch axis")
    out = _graph_output_spec(graph, specs, what)
    if out.shape is None or len(out.shape) < 1 or out.shape[0] is not None or None in out.shape[1:]:
        raise ShapeError(f"{what}: its output must keep the batch axis first and know the rest, got {out.shape} "
                         f"for inputs {[s.shape for s in specs]}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fn.okg")
        save(graph, path)
        with open(path, "rb") as f:
            data = f.read()
    token = tokenize(data)
    batch = xs[0].chunks[0]
    pairs: list[Any] = []
    used = 1
    for x in xs:
        own = _LETTERS[used: used + x.ndim - 1]
        used += x.ndim - 1
        pairs += [x.rechunk({0: batch, **{d: -1 for d in range(1, x.ndim)}}), "a" + own]
    new = _LETTERS[used: used + len(out.shape) - 1]
    blob = da.from_array(np.frombuffer(data, np.uint8), chunks=-1)
    name = f"traced-{getattr(fn, '__name__', 'function')}-{tokenize(token, *pairs[::2])}"
    return da.blockwise(
        partial(_traced_block, token=token), "a" + new, blob, "z", *pairs,
        new_axes={c: int(d) for c, d in zip(new, out.shape[1:])}, concatenate=True, name=name,
        dtype=out.dtype.np, meta=np.empty((0,) * len(out.shape), out.dtype.np),
    )


def apply(op: Any, *arrays: Any, **attrs: Any) -> da.Array:
    """Op ``op`` (a name or a generated wrapper) over dask arrays, as a lazy dask array.

    ``arrays`` are the op's inputs in order (dask arrays; numpy arrays and scalars
    are taken too; a list input is a list); ``attrs`` its non-inferred attrs.
    The result's shape and dtype come from the op's shape function, its chunks
    from the op's partitioning rule (:mod:`opkernel.dask.rules`); nothing is
    computed until the result is.  Each chunk runs on the worker's active backend.
    """
    _import_dask()
    if not isinstance(op, str) and not hasattr(op, "_op_name") and _is_traced(op):
        return _traced(op, arrays, attrs)
    name = _op_name(op)
    plugins.ensure_loaded()
    op_def = op_registry.get_op_def(name)
    rule: Rule = rule_for(name)
    call = _bind(op_def, arrays, attrs)
    return _checked(call, _BUILDERS[type(rule)](call, rule))
