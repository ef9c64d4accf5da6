"""Random calls for the differential test: one ``case.Case`` per (seed, op, index).

numpy only, like case.py.  A call is made from the op's signature (``Signature``:
its inputs and attrs as TensorFlow's OpDef dump gives them, with each type attr's
dtypes narrowed to those both libraries declare) and a ``numpy.random.Generator``
seeded by ``(seed, crc32(op), index)``, so a case is the same wherever and whenever it
is made, and ``differential.py --op X --index I`` remakes it alone.

What is random: the dtype of every type attr; shapes of rank 0 to 4 with empty and
size-1 dimensions; broadcasting (and shapes that do not broadcast); values with
NaN, ±inf, ±0, denormals, the dtype's extremes and integer limits; index, axis and
shape inputs mostly valid and sometimes not (out of range, negative, duplicated);
every attr the op has (strides, paddings, data formats, masks, keep_dims...).  Calls
TensorFlow rejects are as much part of the test as those it runs: opkernel must
reject them too.

``GENERATORS`` names the ops with a generator; ``NOT_GENERATED`` names the shared ops
without one, each with its reason.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from opkernel.ops.data_flow_ops import QUEUE_OPS
from opkernel.ops.lookup_ops import LOOKUP_OPS
from opkernel.ops.resource_variable_ops import RESOURCE_VARIABLE_OPS

from case import Case
from cases_nn import _conv_out_shape, _max_pool_argmax, _window_taps

try:
    import ml_dtypes

    BFLOAT16: Any = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover - opkernel and TensorFlow both depend on it
    BFLOAT16 = None

#: The dtypes random inputs may take (TensorFlow's enum names to ours).
DTYPE_NAMES = {
    "DT_BOOL": "bool", "DT_INT8": "int8", "DT_INT16": "int16", "DT_INT32": "int32", "DT_INT64": "int64",
    "DT_UINT8": "uint8", "DT_UINT16": "uint16", "DT_UINT32": "uint32", "DT_UINT64": "uint64",
    "DT_HALF": "float16", "DT_BFLOAT16": "bfloat16", "DT_FLOAT": "float32", "DT_DOUBLE": "float64",
    "DT_COMPLEX64": "complex64", "DT_COMPLEX128": "complex128", "DT_STRING": "string",
}
FLOATS = ("float16", "bfloat16", "float32", "float64")
#: Ops whose outputs sum or multiply many inputs: no values near the dtype's largest,
#: whose overflow to inf depends on the order of the additions.
ACCUMULATING = frozenset({
    "AddN", "AvgPool", "AvgPoolGrad", "BatchMatMul", "BiasAddGrad", "Conv2D", "Conv2DBackpropFilter",
    "Conv2DBackpropInput", "MatMul", "Mean", "Prod", "Sum", "UnsortedSegmentSum", "SoftmaxCrossEntropyWithLogits",
    "SparseSoftmaxCrossEntropyWithLogits", "LogSoftmax", "Softmax", "ApplyAdam", "ApplyMomentum",
    "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
    "ResizeBilinearGrad", "ResizeNearestNeighborGrad", "Einsum", "SparseSegmentSum", "SparseSegmentMean", "Bincount",
    "DenseBincount", "LRN",
})


@dataclass(frozen=True)
class Signature:
    """What the generator needs of an op: its inputs in order, its attrs, and for each
    type attr the dtypes both libraries declare (the parent process builds it)."""

    op: str
    inputs: tuple[dict[str, Any], ...]                   # {"name", "type", "type_attr", "number_attr", "is_ref"}
    attrs: dict[str, dict[str, Any]]                     # name -> {"type", "allowed", "default"?, "minimum"}
    dtypes: dict[str, tuple[str, ...]] = field(default_factory=dict)   # type attr -> dtype names


def rng_for(seed: int, op: str, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(op.encode()), index])


class G:
    """One call's random choices; the generators below use its helpers."""

    def __init__(self, sig: Signature, rng: np.random.Generator) -> None:
        self.sig, self.rng = sig, rng
        self.chosen: dict[str, str] = {}
        # Half the calls have ordinary values only; the others a share of special ones.
        self.special = 0.0 if rng.random() < 0.5 else float(rng.choice([0.05, 0.2, 0.5]))
        self.huge = sig.op not in ACCUMULATING

    # -- choices
    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, seq: Any) -> Any:
        seq = list(seq)
        return seq[int(self.rng.integers(len(seq)))]

    def int(self, lo: int, hi: int) -> int:
        """An int in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def dtype(self, attr: str, among: tuple[str, ...] | None = None) -> str:
        if attr not in self.chosen:
            options = self.sig.dtypes.get(attr, ())
            if among is not None:
                options = tuple(d for d in options if d in among) or options
            if not options:
                raise ValueError(f"{self.sig.op}: no dtype both libraries allow for attr {attr!r}")
            self.chosen[attr] = self.pick(options)
        return self.chosen[attr]

    def dim(self) -> int:
        r = self.rng.random()
        return 0 if r < 0.08 else 1 if r < 0.3 else self.int(2, 5)

    def shape(self, lo: int = 0, hi: int = 4) -> tuple[int, ...]:
        return tuple(self.dim() for _ in range(self.int(lo, hi)))

    def broadcast_partner(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with ``shape`` (a suffix, 1s, more dims), or now and then one that does not."""
        r = self.rng.random()
        if r < 0.3:
            return shape
        if r < 0.45:
            return shape[self.int(0, len(shape)):]
        if r < 0.7:
            return tuple(1 if self.coin(0.4) else d for d in shape)
        if r < 0.85:
            return self.shape(0, 2) + tuple(1 if self.coin(0.3) else d for d in shape)
        if r < 0.95 and shape:
            i = self.int(0, len(shape) - 1)
            return shape[:i] + (shape[i] + self.int(1, 2),) + shape[i + 1:]          # does not broadcast
        return self.shape()

    # -- values
    def values(self, shape: tuple[int, ...], dtype: str, lo: float | None = None, hi: float | None = None,
               special: float | None = None) -> np.ndarray:
        g, p = self.rng, self.special if special is None else special
        if dtype == "string":
            return np.array([self.pick([b"", b"a", b"0", b"1.5", b"-7"]) for _ in range(int(np.prod(shape)))],
                            np.bytes_).reshape(shape) if shape else np.array(self.pick([b"", b"3"]), np.bytes_)
        if dtype == "bool":
            return g.integers(0, 2, shape).astype(bool)
        if dtype.startswith("complex"):
            part = "float32" if dtype == "complex64" else "float64"
            c = np.empty(shape, dtype)
            c.real, c.imag = self.values(shape, part, lo, hi, p), self.values(shape, part, lo, hi, p)
            return c
        if dtype in FLOATS:
            np_dtype = BFLOAT16 if dtype == "bfloat16" else np.dtype(dtype)
            if lo is not None and hi is not None:
                a = g.uniform(lo, hi, shape)
            else:
                a = g.standard_normal(shape) * float(self.pick([1.0, 1.0, 3.0, 100.0]))
            a = np.asarray(a).astype(np.float32 if dtype in ("float16", "bfloat16") else dtype)
            if p:
                fi = np.finfo(np_dtype)
                specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, float(fi.smallest_subnormal),
                            -float(fi.smallest_subnormal), float(fi.tiny)]
                if self.huge:
                    specials += [float(fi.max), float(fi.min)]
                mask = g.random(shape) < p
                a = np.where(mask, np.asarray(specials, a.dtype)[g.integers(0, len(specials), shape)], a)
            return np.asarray(a).astype(np_dtype)
        info = np.iinfo(np.dtype(dtype))
        lo_i = max(info.min, int(lo) if lo is not None else -10)
        hi_i = min(info.max, int(hi) if hi is not None else 10)
        a = g.integers(lo_i, hi_i, shape, endpoint=True, dtype=np.int64) if lo_i <= hi_i else np.zeros(shape, np.int64)
        a = a.astype(np.dtype(dtype))
        if p and lo is None:
            extremes = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=np.dtype(dtype))
            mask = g.random(shape) < p
            a = np.where(mask, extremes[g.integers(0, len(extremes), shape)], a).astype(np.dtype(dtype))
        return np.asarray(a)

    def x(self, shape: tuple[int, ...], attr: str = "T", **kw: Any) -> np.ndarray:
        """A tensor of the dtype chosen for ``attr``."""
        return self.values(shape, self.dtype(attr), **kw)

    def input(self, i: int, shape: tuple[int, ...], **kw: Any) -> np.ndarray:
        """A tensor for the op's i-th input: its fixed dtype, or the one chosen for its type attr."""
        inp = self.sig.inputs[i]
        return self.values(shape, inp["type"] or self.dtype(inp["type_attr"]), **kw)

    def index(self, values: Any, attr: str | None = None, fixed: str | None = None) -> np.ndarray:
        """Index values (a list or an int) as an array of the dtype of ``attr`` (int32 or int64)."""
        dtype = fixed or (self.dtype(attr, ("int32", "int64")) if attr else "int32")
        return np.asarray(values, np.int64).astype(dtype)

    def axis(self, rank: int, allow_bad: float = 0.08) -> int:
        """An axis of a tensor of ``rank``: mostly in [-rank, rank), now and then out of it."""
        if self.coin(allow_bad) or rank == 0:
            return self.pick([rank, -rank - 1, rank + 2]) if rank else self.pick([0, -1, 1])
        return self.int(-rank, rank - 1)


Gen = Callable[[G], tuple[tuple[Any, ...], dict[str, Any]]]
GENERATORS: dict[str, Gen] = {}


def gen(*ops: str) -> Callable[[Gen], Gen]:
    def register(fn: Gen) -> Gen:
        for op in ops:
            GENERATORS[op] = fn
        return fn
    return register


# ------------------------------------------------------------------ elementwise

UNARY = ("Abs", "Atan", "Ceil", "Cos", "Cosh", "Elu", "Erf", "Exp", "Expm1", "Floor", "Sinh", "Log", "Log1p", "Neg", "Relu", "Relu6", "Rsqrt", "Selu", "Sigmoid",
         "Sign", "Sin", "Softplus", "Sqrt", "Square", "Tanh", "Identity", "StopGradient", "OnesLike", "ZerosLike",
         "Conj", "Real", "Imag", "Angle", "ComplexAbs", "Shape", "Size", "Rank", "LogicalNot", "Where", "Tan", "Asin",
         "Acos", "Asinh", "Acosh", "Atanh", "Reciprocal", "Round", "IsNan", "IsInf", "IsFinite", "LeakyRelu")


@gen(*UNARY)
def _unary(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    inp = g.sig.inputs[0]
    dtype = inp["type"] or g.dtype(inp["type_attr"])
    attrs: dict[str, Any] = {}
    if g.sig.op in ("Shape", "Size"):
        attrs["out_type"] = g.dtype("out_type")
    return (g.values(g.shape(), dtype),), attrs


@gen("EnsureShape")
def _ensure_shape(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A shape the input has, with some dimensions unknown; now and then one it has not."""
    shape = g.shape()
    want: list[Any] | None = [None if g.coin(0.3) else d for d in shape]
    if g.coin(0.15):
        want = [*(want or []), 2]  # another rank
    elif g.coin(0.1):
        want = None  # unknown rank
    return (g.values(shape, g.dtype("T")),), {"shape": want}


@gen("Softmax", "LogSoftmax")
def _softmax(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (g.x(g.shape(0 if g.coin(0.05) else 1, 4)),), {}


BINARY = ("Add", "Sub", "Mul", "RealDiv", "FloorDiv", "FloorMod", "Maximum", "Minimum", "Pow", "Equal", "NotEqual",
          "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr", "Complex", "Atan2", "SquaredDifference",
          "LeakyReluGrad", "EluGrad", "BitwiseAnd", "BitwiseOr", "BitwiseXor")


@gen(*BINARY)
def _binary(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    a = g.shape()
    b = g.broadcast_partner(a)
    if g.coin():
        a, b = b, a
    ins = g.sig.inputs
    x, y = (g.values(s, i["type"] or g.dtype(i["type_attr"])) for s, i in zip((a, b), ins))
    attrs = {}
    if g.sig.op in ("Equal", "NotEqual") and "incompatible_shape_error" in g.sig.attrs:
        attrs["incompatible_shape_error"] = g.coin(0.8)
    if g.sig.op == "Complex":
        attrs["Tout"] = "complex64" if x.dtype == np.float32 else "complex128"
    return (x, y), attrs


@gen("ReluGrad")
def _relu_grad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    return (g.x(s), g.x(s if g.coin(0.9) else g.broadcast_partner(s))), {}


@gen("ClipByValue")
def _clip(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    lo_shape = () if g.coin(0.6) else s if g.coin(0.8) else g.broadcast_partner(s)
    hi_shape = () if g.coin(0.6) else s if g.coin(0.8) else g.broadcast_partner(s)
    return (g.x(s), g.x(lo_shape), g.x(hi_shape)), {}


@gen("SelectV2")
def _select_v2(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    shapes = [s, g.broadcast_partner(s), g.broadcast_partner(s)]
    g.rng.shuffle(shapes)
    return (g.values(shapes[0], "bool"), g.x(shapes[1]), g.x(shapes[2])), {}


@gen("Select")
def _select(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    r = g.rng.random()
    c = s if r < 0.6 else (s[:1] if s and r < 0.85 else g.broadcast_partner(s))
    t = s if g.coin(0.9) else g.broadcast_partner(s)
    return (g.values(c, "bool"), g.x(s), g.x(t)), {}


@gen("AddN")
def _add_n(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    n = g.int(1, 4)
    shapes = [s if g.coin(0.93) else g.broadcast_partner(s) for _ in range(n)]
    return ([g.x(sh) for sh in shapes],), {}


@gen("Cast")
def _cast(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    src, dst = g.dtype("SrcT"), g.dtype("DstT")
    return (g.values(g.shape(), src),), {"DstT": dst, "Truncate": g.coin(0.2)}


@gen("StringToNumber")
def _string_to_number(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    words = [b"", b"0", b"-0", b"1", b"-7", b"3.25", b"1e3", b"-1e-40", b"nan", b"-inf", b"inf", b"0x1f", b" 5",
             b"5 ", b"+4", b"1e400", b"2147483647", b"2147483648", b"-2147483649", b"9223372036854775808",
             b"abc", b"1.5.2", b"nan(1)", b"Infinity", b"00012", b"4294967295"]
    s = g.shape(0, 2)
    n = int(np.prod(s))
    a = np.array([g.pick(words) for _ in range(n)], np.bytes_).reshape(s) if s else np.array(g.pick(words), np.bytes_)
    return (a,), {"out_type": g.dtype("out_type")}


# ------------------------------------------------------------------ reductions


@gen("All", "Any", "Max", "Min", "Mean", "Prod", "Sum")
def _reduce(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    r = len(s)
    if g.coin(0.4):
        axes: Any = g.axis(r)
    else:
        axes = [g.axis(r, 0.04) for _ in range(g.int(0, max(r, 1)))]
        if g.coin(0.8):
            axes = sorted(set(a % r for a in axes)) if r else []
    return (g.input(0, s), g.index(axes, "Tidx")), {"keep_dims": g.coin()}


@gen("ArgMax", "ArgMin")
def _arg_reduce(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(0 if g.coin(0.05) else 1, 4)
    return (g.x(s), g.index(g.axis(len(s)), "Tidx")), {"output_type": g.dtype("output_type")}


# ------------------------------------------------------------------ shapes and data movement


def _reshape_target(g: G, shape: tuple[int, ...]) -> list[int]:
    n = int(np.prod(shape))
    if g.coin(0.1):
        return [g.int(-2, 6) for _ in range(g.int(0, 3))]          # usually the wrong size
    dims: list[int] = []
    rest = n
    for _ in range(g.int(0, 3)):
        d = g.pick([f for f in range(1, 7) if rest % f == 0] or [1]) if rest else g.pick([0, 1, 3])
        dims.append(d)
        rest = rest // d if d and rest else rest
    dims.append(rest)
    g.rng.shuffle(dims)
    if dims and g.coin(0.3) and n:
        dims[g.int(0, len(dims) - 1)] = -1
    return dims


@gen("Reshape")
def _reshape(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    return (g.x(s), g.index(_reshape_target(g, s), "Tshape")), {}


@gen("ExpandDims")
def _expand_dims(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(0, 3)
    axis = g.int(-len(s) - 1, len(s)) if g.coin(0.9) else g.pick([len(s) + 1, -len(s) - 2])
    return (g.x(s), g.index(axis if g.coin(0.8) else [axis], "Tdim")), {}


@gen("Squeeze")
def _squeeze(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = tuple(1 if g.coin(0.5) else d for d in g.shape())
    r = len(s)
    ones = [i for i, d in enumerate(s) if d == 1]
    axes = [] if g.coin(0.3) or not r else [i - r if g.coin(0.3) else i for i in ones if g.coin(0.6)]
    if r and g.coin(0.1):
        axes.append(g.axis(r, 0.5))
    return (g.x(s),), {"axis": axes}


@gen("Transpose")
def _transpose(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    perm = list(g.rng.permutation(len(s)))
    if g.coin(0.12) and perm:
        perm[g.int(0, len(perm) - 1)] = g.pick([len(s), -1, perm[0]])
    elif g.coin(0.05):
        perm = perm + [len(s)]
    return (g.x(s), g.index(perm, "Tperm")), {}


@gen("InvertPermutation")
def _invert_permutation(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    n = g.int(0, 6)
    p = list(g.rng.permutation(n))
    if g.coin(0.15) and p:
        p[g.int(0, n - 1)] = g.pick([n, -1, p[0]])
    return (g.index(p, "T") if g.coin(0.95) else g.index([p], "T"),), {}


@gen("Tile")
def _tile(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(0, 3)
    m = [g.int(0, 3) for _ in s]
    if g.coin(0.08):
        m = m + [2] if g.coin() else [-1] * len(s) or [1]
    return (g.x(s), g.index(m, "Tmultiples")), {}


@gen("BroadcastTo")
def _broadcast_to(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    target = g.shape()
    s = g.broadcast_partner(target)
    s = s[-len(target):] if len(s) > len(target) and g.coin(0.8) else s
    return (g.x(s), g.index(list(target), "Tidx")), {}


@gen("Fill")
def _fill(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dims = [g.dim() for _ in range(g.int(0, 4))]
    if g.coin(0.06) and dims:
        dims[0] = -1
    return (g.index(dims, "index_type"), g.x(() if g.coin(0.95) else (1,))), {}


@gen("Pad")
def _pad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    pads = [[g.int(0, 2), g.int(0, 2)] for _ in s]
    if g.coin(0.08):
        pads = pads + [[0, 1]] if g.coin() else [[-1, 0]] * len(s) or [[0, 0]]
    return (g.x(s), g.index(pads, "Tpaddings") if pads else g.index(np.zeros((0, 2)), "Tpaddings")), {}


@gen("PadV2")
def _pad_v2(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    (x, pads), _ = _pad(g)
    dtype = g.dtype("T")
    constant = g.values((), dtype) if g.coin(0.95) else g.values((1,), dtype)
    return (g.values(np.shape(x), dtype), pads, constant), {}


@gen("Slice")
def _slice(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    begin = [g.int(0, d) for d in s]
    size = [g.int(-1, d - b) if g.coin(0.8) else -1 for b, d in zip(begin, s)]
    if g.coin(0.1) and s:
        i = g.int(0, len(s) - 1)
        size[i] = s[i] - begin[i] + 1
    return (g.x(s), g.index(begin, "Index"), g.index(size, "Index")), {}


def _strided_args(g: G, s: tuple[int, ...]) -> tuple[list[int], list[int], list[int], dict[str, Any]]:
    n = len(s) + g.int(-1, 1) if s else g.int(0, 1)
    n = max(n, 0)
    begin, end, strides = [], [], []
    for i in range(n):
        d = s[i] if i < len(s) else 3
        begin.append(g.int(-d - 1, d + 1))
        end.append(g.int(-d - 1, d + 1))
        strides.append(g.pick([1, 1, 2, -1, -2, 3]) if g.coin(0.97) else 0)
    masks = {k: (int(g.rng.integers(0, 1 << max(n, 1))) if g.coin(0.35) else 0)
             for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    if bin(masks["ellipsis_mask"]).count("1") > 1 and g.coin(0.8):
        masks["ellipsis_mask"] &= -masks["ellipsis_mask"]        # keep the lowest: usually one ellipsis
    return begin, end, strides, masks


@gen("StridedSlice")
def _strided_slice(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    b, e, st, masks = _strided_args(g, s)
    idx = g.dtype("Index", ("int32", "int64"))
    return (g.x(s), g.index(b, fixed=idx), g.index(e, fixed=idx), g.index(st, fixed=idx)), masks


@gen("StridedSliceGrad")
def _strided_slice_grad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    b, e, st, masks = _strided_args(g, s)
    dy_shape = _numpy_strided_shape(s, b, e, st, masks)
    if dy_shape is None or g.coin(0.05):
        dy_shape = g.shape()
    idx = g.dtype("Index", ("int32", "int64"))
    return (g.index(list(s), fixed=idx), g.index(b, fixed=idx), g.index(e, fixed=idx), g.index(st, fixed=idx),
            g.x(dy_shape)), masks


def _numpy_strided_shape(s: tuple[int, ...], begin: list[int], end: list[int], strides: list[int],
                         masks: dict[str, int]) -> tuple[int, ...] | None:
    """The shape numpy gives for the same slice, or None when numpy has no such slice."""
    if 0 in strides:
        return None
    index: list[Any] = []
    for i, (b, e, st) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if masks["ellipsis_mask"] & bit:
            index.append(Ellipsis)
        elif masks["new_axis_mask"] & bit:
            index.append(None)
        elif masks["shrink_axis_mask"] & bit:
            index.append(b)
        else:
            index.append(slice(None if masks["begin_mask"] & bit else b, None if masks["end_mask"] & bit else e, st))
    if index.count(Ellipsis) > 1:
        return None
    try:
        return np.zeros(s)[tuple(index)].shape
    except (IndexError, ValueError, TypeError):
        return None


@gen("Pack")
def _pack(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(0, 3)
    n = g.int(1, 4)
    shapes = [s if g.coin(0.95) else g.shape(0, 3) for _ in range(n)]
    return ([g.x(sh) for sh in shapes],), {"axis": g.int(-len(s) - 1, len(s)) if g.coin(0.92) else len(s) + 1}


@gen("Unpack")
def _unpack(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(1, 4)
    axis = g.axis(len(s))
    num = s[axis] if -len(s) <= axis < len(s) and g.coin(0.95) else g.int(0, 4)
    return (g.x(s),), {"num": num, "axis": axis}


@gen("ConcatV2")
def _concat(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(0 if g.coin(0.05) else 1, 4)
    axis = g.axis(len(s))
    shapes = []
    for _ in range(g.int(2, 4)):
        sh = list(s)
        if sh and -len(s) <= axis < len(s):
            sh[axis] = g.dim()
        if g.coin(0.05):
            sh = list(g.broadcast_partner(tuple(sh)))
        shapes.append(tuple(sh))
    return ([g.x(sh) for sh in shapes], g.index(axis, "Tidx")), {}


@gen("ConcatOffset")
def _concat_offset(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(1, 4)
    axis = g.axis(len(s))
    shapes = []
    for _ in range(g.int(2, 4)):
        sh = list(s)
        if -len(s) <= axis < len(s):
            sh[axis] = g.dim()
        if g.coin(0.06):
            sh[g.int(0, len(sh) - 1)] += 1
        shapes.append(sh)
    dt = g.dtype("shape_type", ("int32", "int64"))
    return (np.int32(axis), [np.asarray(sh, dt) for sh in shapes]), {}


@gen("Split")
def _split(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = list(g.shape(1, 4))
    axis = g.axis(len(s))
    num = g.int(1, 3)
    if -len(s) <= axis < len(s) and g.coin(0.9):
        s[axis] = num * g.int(0, 2)
    return (np.int32(axis), g.x(tuple(s))), {"num_split": num}


@gen("SplitV")
def _split_v(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Sizes that add up (one of them -1 now and then), and now and then ones that do not."""
    s = list(g.shape(1, 4))
    axis = g.axis(len(s))
    num = g.int(1, 4)
    sizes = [g.int(0, 3) for _ in range(num)]
    if -len(s) <= axis < len(s) and g.coin(0.85):
        s[axis] = sum(sizes)
    if num > 1 and g.coin(0.3):
        sizes[g.int(0, num - 1)] = -1
    if g.coin(0.05):
        sizes[g.int(0, num - 1)] = -2
    return (g.x(tuple(s)), g.index(sizes, "Tlen" if g.sig.dtypes.get("Tlen") else None), np.int32(axis)), {"num_split": num}


@gen("BroadcastArgs")
def _broadcast_args(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    a = g.shape(0, 4)
    b = g.broadcast_partner(a)
    return (g.index(list(a), "T"), g.index(list(b), "T")), {}


@gen("Diag")
def _diag(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (g.x(g.shape(1 if g.coin(0.95) else 0, 3)),), {}


@gen("DepthToSpace", "SpaceToDepth")
def _depth_space(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    bs = g.int(2, 3)
    b, h, w, c = g.int(0, 2), g.int(1, 3), g.int(1, 3), g.int(1, 3)
    if g.sig.op == "DepthToSpace":
        c *= bs * bs
    else:
        h, w = h * bs, w * bs
    if g.coin(0.1):  # not divisible
        c, h = c + 1, h + 1
    shape = (b, h, w, c) if g.coin(0.95) else (h, w, c)
    return (g.x(shape),), {"block_size": bs}


@gen("SpaceToBatchND", "BatchToSpaceND")
def _space_batch(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    m = g.int(0, 3) if g.coin(0.95) else 4
    blocks = [g.int(1, 3) for _ in range(m)]
    rest = g.shape(0, 2)
    if g.sig.op == "SpaceToBatchND":
        pads = [[g.int(0, 2), g.int(0, 2)] for _ in range(m)]
        spatial = [max(k * g.int(1, 2) - lo - hi, 0) for k, (lo, hi) in zip(blocks, pads)]
        batch = g.int(0, 2)
        attr = "Tpaddings"
    else:
        spatial = [g.int(1, 3) for _ in range(m)]
        pads = [[g.int(0, k * d), 0] for k, d in zip(blocks, spatial)]
        pads = [[lo, g.int(0, k * d - lo)] for (lo, _), k, d in zip(pads, blocks, spatial)]
        batch = int(np.prod(blocks)) * g.int(0, 2)
        attr = "Tcrops"
    if g.coin(0.1):  # not divisible, or negative
        if spatial and g.coin():
            spatial[0] += 1
        elif pads:
            pads[0][0] = -1
    x = g.x((batch, *spatial, *rest))
    amounts = g.index(pads, attr) if pads else g.index(np.zeros((0, 2)), attr)
    return (x, g.index(blocks, "Tblock_shape") if blocks else g.index(np.zeros(0), "Tblock_shape"), amounts), {}


@gen("LowerBound", "UpperBound")
def _bounds(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Mostly sorted rows (a sort of random values, specials included), now and then not."""
    rows, n, m = g.int(0, 3), g.int(0, 6), g.int(0, 4)
    s = g.x((rows, n))
    if g.coin(0.85):
        s = np.sort(s, axis=-1)
    values = np.concatenate([s[:, :m], g.x((rows, m))], axis=1) if g.coin() else g.x((rows, m))
    attrs = {"out_type": g.pick(["int32", "int64"])} if g.coin(0.3) else {}
    return (s, values), attrs


@gen("Bincount", "DenseBincount")
def _bincount(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = g.shape(0 if g.sig.op == "Bincount" else 0, 3 if g.sig.op == "Bincount" else 2)
    size = g.int(0, 6) if g.coin(0.95) else -1
    arr = g.values(shape, "int32" if g.sig.op == "Bincount" else g.dtype("Tidx"), -1 if g.coin(0.05) else 0, 8)
    weights = g.x(shape) if g.coin() else g.x((0,))
    size_t = np.asarray(size, arr.dtype)
    return (arr, size_t, weights), ({"binary_output": g.coin()} if g.sig.op == "DenseBincount" else {})


@gen("SparseSegmentSum", "SparseSegmentMean")
def _sparse_segment(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    data = g.x((g.int(1, 4), *g.shape(0, 2)))
    n = g.int(0, 5)
    indices = [g.int(0, data.shape[0] - 1) for _ in range(n)]
    ids = sorted(g.int(0, 3) for _ in range(n))
    if n and g.coin(0.1):
        indices[0] = data.shape[0] if g.coin() else -1
    if n > 1 and g.coin(0.1):
        ids = ids[::-1]
    return (data, g.index(indices, "Tidx"), g.index(ids, "Tsegmentids")), {}


@gen("SparseToDense")
def _sparse_to_dense(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = [g.int(1, 4) for _ in range(g.int(1, 3))]
    cells = np.array(list(np.ndindex(*shape)))
    n = g.int(0, min(4, len(cells)))
    chosen = np.sort(g.rng.choice(len(cells), n, replace=False))
    points = cells[chosen]
    if n > 1 and g.coin(0.1):
        points = points[::-1]
    if n and g.coin(0.05):
        points[0, 0] = shape[0]
    indices = points if len(shape) > 1 or g.coin() else points.reshape(-1)
    values = g.x((n,)) if g.coin(0.8) else g.x(())
    attrs = {"validate_indices": g.coin(0.8)}
    return (g.index(indices, "Tindices"), g.index(shape, "Tindices"), values, g.x(())), attrs


@gen("Dilation2D", "Dilation2DBackpropInput", "Dilation2DBackpropFilter")
def _dilation(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    b, h, w, c = g.int(0, 2), g.int(1, 5), g.int(1, 5), g.int(1, 2)
    fh, fw = g.int(1, 3), g.int(1, 3)
    attrs = {"strides": [1, g.int(1, 2), g.int(1, 2), 1], "rates": [1, g.int(1, 2), g.int(1, 2), 1],
             "padding": g.pick(["SAME", "VALID"])}
    x, f = g.x((b, h, w, c)), g.x((fh, fw, c if g.coin(0.95) else c + 1))
    if g.sig.op == "Dilation2D":
        return (x, f), attrs
    if attrs["padding"] == "SAME":
        oh, ow = -(-h // attrs["strides"][1]), -(-w // attrs["strides"][2])
    else:
        oh = max(-(-(h - (fh - 1) * attrs["rates"][1]) // attrs["strides"][1]), 0)
        ow = max(-(-(w - (fw - 1) * attrs["rates"][2]) // attrs["strides"][2]), 0)
    return (x, f, g.x((b, oh, ow, c))), attrs


@gen("LRN")
def _lrn(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    attrs = {"depth_radius": g.int(0, 6), "bias": g.pick([1.0, 2.0, 0.5]), "alpha": g.pick([1.0, 1e-4, 0.3]),
             "beta": g.pick([0.5, 0.75, 1.0])}
    return (g.x((g.int(0, 2), g.int(1, 2), g.int(1, 2), g.int(1, 8)), lo=-3, hi=3),), attrs


@gen("GatherV2")
def _gather(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    params = g.shape(1 if g.coin(0.95) else 0, 4)
    idx_shape = g.shape(0, 2)
    batch_dims = 0 if g.coin(0.7) else g.int(-1, min(len(idx_shape), len(params) - 1) if params else 0)
    if batch_dims > 0:
        idx_shape = params[:batch_dims] + idx_shape[batch_dims:] if g.coin(0.9) else idx_shape
    axis = g.int(max(batch_dims, 0), len(params) - 1) if params else 0
    if g.coin(0.1):
        axis = g.axis(len(params))
    d = params[axis] if -len(params) <= axis < len(params) else 3
    idt = g.dtype("Tindices", ("int32", "int64"))
    hi = d - 1 if g.coin(0.85) else d + 1
    idx = g.rng.integers(-1 if g.coin(0.1) else 0, max(hi, 0) + 1, idx_shape).astype(idt)
    return (g.x(params, "Tparams"), idx, g.index(axis, "Taxis")), {"batch_dims": batch_dims}


@gen("OneHot")
def _one_hot(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(0, 3)
    depth = g.int(0, 5) if g.coin(0.95) else -1
    ti = g.dtype("TI")
    idx = g.values(s, ti, -1, depth + 1)
    axis = -1 if g.coin(0.6) else g.int(-1, len(s)) if g.coin(0.9) else len(s) + 1
    on, off = g.x(()), g.x(())
    return (idx, np.int32(depth), on, off), {"axis": axis}


@gen("Range")
def _range(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = g.dtype("Tidx")
    start = g.values((), dt, -5, 5, special=0)
    limit = g.values((), dt, -8, 12, special=0)
    delta = g.values((), dt, -3, 3, special=0) if g.coin(0.9) else np.zeros((), start.dtype)
    if dt in FLOATS and g.special:
        start = g.values((), dt)
    return (start, limit, delta), {}


@gen("UnsortedSegmentSum")
def _unsorted_segment_sum(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(1, 3)
    k = g.int(0, len(s))
    num = g.int(0, 4)
    ids = g.rng.integers(-1 if g.coin(0.3) else 0, num + (1 if g.coin(0.1) else 0), s[:k] if g.coin(0.95) else s,
                         endpoint=num == 0)
    return (g.x(s), ids.astype(g.dtype("Tindices", ("int32", "int64"))),
            g.index(num if g.coin(0.95) else -1, "Tnumsegments")), {}


# ------------------------------------------------------------------ linear algebra and nn


@gen("MatMul")
def _matmul(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    m, k, n = g.dim(), g.dim(), g.dim()
    ta, tb = g.coin(), g.coin()
    a = (k, m) if ta else (m, k)
    b = (n, k) if tb else (k, n)
    if g.coin(0.06):
        b = (b[0] + 1, b[1])
    return (g.x(a), g.x(b)), {"transpose_a": ta, "transpose_b": tb}


@gen("BatchMatMul")
def _batch_matmul(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    m, k, n = g.dim(), g.dim(), g.dim()
    batch = g.shape(0, 2)
    ax, ay = g.coin(), g.coin()
    a = batch + ((k, m) if ax else (m, k))
    b = (batch if g.coin(0.9) else g.broadcast_partner(batch)) + ((n, k) if ay else (k, n))
    return (g.x(a), g.x(b)), {"adj_x": ax, "adj_y": ay}


_EINSUM_FORMS = [
    ("ij,jk->ik", "ij", "jk"), ("bij,bjk->bik", "bij", "bjk"), ("ij->ji", "ij", None), ("ii->i", "ii", None),
    ("ij->", "ij", None), ("i,j->ij", "i", "j"), ("...ij,...jk->...ik", "...ij", "...jk"), ("ij,kj->", "ij", "kj"),
    ("abc,cd->abd", "abc", "cd"), ("ab,ab->ab", "ab", "ab"), ("a...,a->...", "a...", "a"), ("iij,jk->ik", "iij", "jk"),
]


@gen("Einsum")
def _einsum(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    eq, sa, sb = g.pick(_EINSUM_FORMS)
    sizes = {label: g.dim() for label in "abcdijk"}
    ell = g.shape(0, 2)

    def shape(sub: str) -> tuple[int, ...]:
        head, sep, tail = sub.partition("...")
        return tuple(sizes[c] for c in head) + (tuple(ell) if sep else ()) + tuple(sizes[c] for c in tail)

    xs = [g.x(shape(sa))] + ([g.x(shape(sb))] if sb is not None else [])
    if g.coin(0.05) and sb is not None:
        xs[1] = g.x(tuple(d + 1 for d in xs[1].shape) or (1,))
    return ([*xs],), {"equation": eq}


@gen("BiasAdd")
def _bias_add(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape(2 if g.coin(0.95) else 1, 4)
    fmt = "NHWC" if g.coin(0.7) else "NCHW"
    c = s[-1] if fmt == "NHWC" else (s[1] if len(s) > 1 else 1)
    if g.coin(0.06):
        c += 1
    return (g.x(s), g.x((c,))), {"data_format": fmt}


@gen("BiasAddGrad")
def _bias_add_grad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (g.x(g.shape(2 if g.coin(0.95) else 1, 4)),), {"data_format": "NHWC" if g.coin(0.7) else "NCHW"}


def _window(g: G, rank_ok: bool = True) -> dict[str, Any]:
    k = [1, g.int(1, 3), g.int(1, 3), 1]
    s = [1, g.int(1, 3), g.int(1, 3), 1]
    if g.coin(0.05):
        k[g.pick([0, 3])] = 2
    if g.coin(0.03):
        s[1] = 0
    return {"ksize": k, "strides": s, "padding": g.pick(["VALID", "SAME"])}


@gen("AvgPool", "MaxPool")
def _pool(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = (g.dim(), g.int(0, 5), g.int(0, 5), g.dim()) if g.coin(0.95) else g.shape(3, 3)
    return (g.x(x),), {**_window(g), "data_format": "NHWC"}


@gen("MaxPoolWithArgmax")
def _pool_argmax(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = (g.dim(), g.int(0, 5), g.int(0, 5), g.dim())
    return (g.x(x),), {**_window(g), "Targmax": g.dtype("Targmax"), "include_batch_in_index": g.coin()}


def _pool_out_shape(x: tuple[int, ...], w: dict[str, Any]) -> tuple[int, ...] | None:
    if 0 in w["strides"] or w["ksize"][0] != 1 or w["ksize"][3] != 1 or len(x) != 4:
        return None
    oh, ow, _ = _window_taps(x, w["ksize"], w["strides"], w["padding"])
    return (x[0], max(oh, 0), max(ow, 0), x[3])


@gen("AvgPoolGrad")
def _avg_pool_grad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = (g.dim(), g.int(1, 5), g.int(1, 5), g.dim())
    w = _window(g)
    out = _pool_out_shape(x, w) or g.shape(4, 4)
    return (np.asarray(x, np.int32), g.x(out if g.coin(0.95) else g.shape(4, 4))), {**w, "data_format": "NHWC"}


def _distinct(g: G, shape: tuple[int, ...]) -> np.ndarray | None:
    """Distinct values (no ties within a window: TensorFlow's and our choice of the
    maximum agree only up to ties), of the dtype chosen for T; None when the dtype has
    fewer exactly representable values than the shape has elements."""
    n = int(np.prod(shape))
    dt = g.dtype("T")
    if dt in FLOATS:
        span = {"float16": 2048, "bfloat16": 256}.get(dt, max(n, 1))
    else:
        span = min(1 << (8 * np.dtype(dt).itemsize), 4096)   # a wrap to unsigned keeps them distinct
    if n > span:
        return None
    vals = (g.rng.permutation(span)[:n] - span // 2).astype(np.int64)
    return vals.reshape(shape).astype(BFLOAT16 if dt == "bfloat16" else dt)


def _max_pool_inputs(g: G) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]] | dict[str, Any]:
    """A consistent (input, MaxPool output, argmax, window), or the window alone when it is
    not a valid one (the call then tests its rejection: made-up inputs would be inconsistent)."""
    x = (g.dim(), g.int(1, 5), g.int(1, 5), g.dim())
    w = {**_window(g), "data_format": "NHWC"}
    out_shape = _pool_out_shape(x, w)
    if out_shape is None:
        return w
    xin = _distinct(g, x)
    if xin is None:                    # the dtype cannot hold that many distinct values: one image, one channel
        x = (1, x[1], x[2], 1)
        xin = _distinct(g, x)
        assert xin is not None
        out_shape = _pool_out_shape(x, w)
        assert out_shape is not None
    if 0 in out_shape:
        return xin, np.zeros(out_shape, xin.dtype), np.zeros(out_shape, np.int64), w
    out, arg = _max_pool_argmax(xin, w["ksize"], w["strides"], w["padding"])
    return xin, out.astype(xin.dtype), arg, w


@gen("MaxPoolGrad", "MaxPoolGradGrad")
def _max_pool_grad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    made = _max_pool_inputs(g)
    if isinstance(made, dict):
        x = g.shape(4, 4)
        return (g.x(x), g.x(x), g.x(x)), made
    xin, out, _, w = made
    grad_shape = out.shape if g.sig.op == "MaxPoolGrad" else xin.shape
    return (xin, out, g.x(grad_shape)), w


@gen("MaxPoolGradWithArgmax", "MaxPoolGradGradWithArgmax")
def _max_pool_grad_argmax(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    made = _max_pool_inputs(g)
    include = g.coin(0.3)
    w_attrs: dict[str, Any]
    if isinstance(made, dict):
        x = g.shape(4, 4)
        bad = {k: v for k, v in made.items() if k != "data_format"}
        return (g.x(x), g.x(x), np.zeros(x, np.int64)), {**bad, "include_batch_in_index": include}
    xin, out, arg, w = made
    if include:
        n, h, ww, c = xin.shape
        arg = arg + (np.arange(n) * h * ww * c).reshape(-1, 1, 1, 1)
    if g.coin(0.05) and arg.size:
        arg.flat[0] = xin.size + 3                 # out of range
    grad_shape = out.shape if g.sig.op == "MaxPoolGradWithArgmax" else xin.shape
    w_attrs = {k: v for k, v in w.items() if k != "data_format"}
    targ = g.dtype("Targmax")
    return (xin, g.x(grad_shape), arg.astype(targ)), {**w_attrs, "include_batch_in_index": include}


def _conv_attrs(g: G) -> dict[str, Any]:
    strides = [1, g.int(1, 3), g.int(1, 3), 1]
    dil = [1, 1, 1, 1] if g.coin(0.7) else [1, g.int(1, 2), g.int(1, 2), 1]
    padding = g.pick(["VALID", "SAME", "EXPLICIT"])
    attrs: dict[str, Any] = {"strides": strides, "padding": padding, "dilations": dil}
    if padding == "EXPLICIT":
        attrs["explicit_paddings"] = [0, 0, g.int(0, 2), g.int(0, 2), g.int(0, 2), g.int(0, 2), 0, 0]
    if g.coin(0.05):
        attrs["strides"] = [1, 0, 1, 1] if g.coin() else [2, 1, 1, 1]
    return attrs


def _conv_out(x: tuple[int, ...], f: tuple[int, ...], a: dict[str, Any]) -> tuple[int, ...] | None:
    """Conv2D's output shape for these shapes and attrs (the conformance tables' rule), or
    None where there is none (a zero stride, a window larger than the padded input)."""
    if 0 in a["strides"]:
        return None
    shape = _conv_out_shape(x, f, a)
    return None if min(shape[1:3]) < 0 else shape


def _conv_shapes(g: G) -> tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]:
    x = (g.dim(), g.int(0, 5), g.int(0, 5), g.int(1, 3))
    f = (g.int(1, 3), g.int(1, 3), x[3] if g.coin(0.95) else x[3] + 1, g.int(0 if g.coin(0.05) else 1, 3))
    return x, f, _conv_attrs(g)


@gen("Conv2D")
def _conv2d(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x, f, a = _conv_shapes(g)
    return (g.x(x), g.x(f)), a


@gen("Conv2DBackpropInput")
def _conv2d_backprop_input(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x, f, a = _conv_shapes(g)
    dy = _conv_out(x, f, a) or g.shape(4, 4)
    return (np.asarray(x, np.int32), g.x(f), g.x(dy)), a


@gen("Conv2DBackpropFilter")
def _conv2d_backprop_filter(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x, f, a = _conv_shapes(g)
    dy = _conv_out(x, f, a) or g.shape(4, 4)
    return (g.x(x), np.asarray(f, np.int32), g.x(dy)), a


def _depthwise_shapes(g: G) -> tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]:
    x = (g.dim(), g.int(0, 5), g.int(0, 5), g.int(1, 3))
    f = (g.int(1, 3), g.int(1, 3), x[3] if g.coin(0.95) else x[3] + 1, g.int(0 if g.coin(0.05) else 1, 3))
    a = _conv_attrs(g)
    a.pop("dilations", None)  # TensorFlow's kernels ignore them (tf.nn.depthwise_conv2d dilates by space_to_batch)
    s = a["strides"]
    a["strides"] = [s[0], s[1], s[1], s[3]]  # TensorFlow's kernels take one spatial stride
    return x, f, a


def _depthwise_out(x: tuple[int, ...], f: tuple[int, ...], a: dict[str, Any]) -> tuple[int, ...] | None:
    shape = _conv_out(x, f, a)
    return None if shape is None else (*shape[:3], f[2] * f[3])


@gen("DepthwiseConv2dNative")
def _depthwise(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x, f, a = _depthwise_shapes(g)
    return (g.x(x), g.x(f)), a


@gen("DepthwiseConv2dNativeBackpropInput")
def _depthwise_backprop_input(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x, f, a = _depthwise_shapes(g)
    dy = _depthwise_out(x, f, a) or g.shape(4, 4)
    return (np.asarray(x, np.int32), g.x(f), g.x(dy)), a


@gen("DepthwiseConv2dNativeBackpropFilter")
def _depthwise_backprop_filter(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x, f, a = _depthwise_shapes(g)
    dy = _depthwise_out(x, f, a) or g.shape(4, 4)
    return (g.x(x), np.asarray(f, np.int32), g.x(dy)), a


def _resize_attrs(g: G) -> dict[str, Any]:
    mode = g.pick(("legacy", "align", "half_pixel", "both"))
    return {"align_corners": mode in ("align", "both"), "half_pixel_centers": mode in ("half_pixel", "both")}


def _resize_shapes(g: G) -> tuple[tuple[int, ...], tuple[int, int]]:
    image = (g.dim(), g.int(0 if g.coin(0.05) else 1, 6), g.int(1, 6), g.int(0 if g.coin(0.05) else 1, 3))
    size = (g.int(0 if g.coin(0.05) else 1, 8), g.int(1, 8))
    return image, size


@gen("ResizeBilinear", "ResizeNearestNeighbor")
def _resize(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    image, size = _resize_shapes(g)
    return (g.x(image), np.asarray(size, np.int32)), _resize_attrs(g)


@gen("ResizeBilinearGrad")
def _resize_bilinear_grad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    image, size = _resize_shapes(g)
    grads = g.values((image[0], size[0], size[1], image[3]), "float32")
    return (grads, g.x(image)), _resize_attrs(g)


@gen("ResizeNearestNeighborGrad")
def _resize_nearest_grad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    image, size = _resize_shapes(g)
    return (g.x((image[0], size[0], size[1], image[3])), np.asarray(image[1:3], np.int32)), _resize_attrs(g)


@gen("SoftmaxCrossEntropyWithLogits")
def _softmax_xent(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    b, c = g.dim(), g.dim()
    feats = (b, c)
    labels = (b, c) if g.coin(0.7) else g.pick([(1, c), (c,), (b, 1), (b, c + 1)])
    probs = g.values(labels, g.dtype("T"), 0.0, 1.0)
    return (g.x(feats), probs), {}


@gen("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    b, c = g.dim(), g.dim()
    labels = g.rng.integers(-1 if g.coin(0.1) else 0, c + (1 if g.coin(0.1) else 0), (b,) if g.coin(0.95) else (b + 1,),
                            endpoint=c == 0)
    return (g.x((b, c)), labels.astype(g.dtype("Tlabels"))), {}


# ------------------------------------------------------------------ variables (Ref inputs)


@gen("Assign", "AssignAdd", "AssignSub")
def _assign(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    v = s if g.coin(0.9) or g.sig.op != "Assign" else g.shape()
    return (g.x(s), g.x(v)), {}


@gen("ApplyGradientDescent")
def _apply_gd(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    return (g.x(s), g.x(()), g.x(s)), {}


@gen("ApplyMomentum")
def _apply_momentum(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    return (g.x(s), g.x(s), g.x(()), g.x(s), g.x(())), {"use_nesterov": g.coin()}


@gen("ApplyAdam")
def _apply_adam(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s = g.shape()
    pos = [g.x((), lo=0.01, hi=0.99) for _ in range(6)]
    return (g.x(s), g.x(s), g.x(s, lo=0.0, hi=2.0), *pos, g.x(s)), {"use_nesterov": g.coin()}


#: Shared ops the differential test does not call at random, each with its reason.
# ---------------------------------------------------------------- stateless random ops


def _key_counter(g: G) -> tuple[np.ndarray, np.ndarray]:
    words = g.rng.integers(0, 2**63, 3, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(g.int(0, 1))
    return words[:1], words[1:]


def _seed(g: G) -> np.ndarray:
    return g.rng.integers(-(2**40), 2**40, 2).astype(g.pick(("int32", "int64")) if g.coin() else np.int64)


@gen("StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2", "StatelessRandomUniformFullIntV2")
def _stateless_v2(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    key, counter = _key_counter(g)
    shape = np.array(g.shape(), g.pick(("int32", "int64")))
    return (shape, key, counter, np.int32(g.pick((1, 3)))), {"dtype": g.dtype("dtype")}


@gen("StatelessRandomUniformIntV2")
def _stateless_int_v2(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    key, counter = _key_counter(g)
    dt = g.pick(("int32", "int64"))  # TensorFlow's CPU kernels
    lo = g.int(-1000, 1000)
    return (np.array(g.shape(), np.int32), key, counter, np.int32(1), np.array(lo, dt), np.array(lo + g.int(1, 5000), dt)), {}


@gen("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal")
def _stateless_v1(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    seed = g.rng.integers(-(2**31), 2**31, 2).astype(g.pick(("int32", "int64")))
    return (np.array(g.shape(), np.int32), seed), {"dtype": g.pick(("float32", "float64"))}


@gen("StatelessRandomUniformInt")
def _stateless_int(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    seed = g.rng.integers(-(2**31), 2**31, 2).astype(np.int64)
    dt = g.pick(("int32", "int64"))
    lo = g.int(-50, 50)
    return (np.array(g.shape(), np.int32), seed, np.array(lo, dt), np.array(lo + g.int(1, 100), dt)), {}


@gen("StatelessRandomGetKeyCounter")
def _key_counter_op(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (g.rng.integers(-(2**31), 2**31, 2).astype(g.pick(("int32", "int64"))),), {}


@gen("StatelessMultinomial")
def _multinomial(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    logits = (g.rng.standard_normal((g.int(1, 3), g.int(1, 12))) * 2).astype(g.pick(("float32", "float64")))
    seed = g.rng.integers(-(2**31), 2**31, 2).astype(np.int64)
    return (logits, np.int32(g.int(0, 8)), seed), {"output_dtype": g.pick(("int32", "int64"))}


@gen("RngReadAndSkip")
def _rng_read_and_skip(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    state = g.rng.integers(-(2**63), 2**63 - 1, 3, dtype=np.int64)
    return (state, np.int32(g.pick((1, 3))), np.uint64(g.int(0, 10**6))), {}


# ---------------------------------------------------------------- ReverseV2, MatrixBandPart, scans, LinSpace


@gen("ReverseV2")
def _reverse_v2(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = g.shape(1, 4)
    axes = [a - len(shape) if g.coin() else a for a in range(len(shape)) if g.coin()]
    return (g.values(shape, g.dtype("T")), np.array(axes, g.pick(("int32", "int64")))), {}


@gen("MatrixBandPart")
def _matrix_band_part(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = g.shape(2, 4)
    dt = g.pick(("int32", "int64"))
    lower, upper = g.int(-1, shape[-2]), g.int(-1, shape[-1])
    return (g.values(shape, g.dtype("T")), np.array(lower, dt), np.array(upper, dt)), {}


@gen("Cumsum", "Cumprod")
def _scan(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = g.shape(1, 4)
    axis = g.int(-len(shape), len(shape) - 1)
    return (g.values(shape, g.dtype("T")), np.array(axis, g.pick(("int32", "int64")))), {
        "exclusive": g.coin(), "reverse": g.coin()}


@gen("LinSpace")
def _lin_space(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = g.dtype("T")
    start, stop = (np.array(g.rng.uniform(-100, 100), dt) for _ in range(2))
    return (start, stop, np.array(g.int(1, 50), g.pick(("int32", "int64")))), {}


@gen("TopKV2")
def _top_kv2(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = g.shape(1, 3)
    if not shape[-1]:
        shape = shape[:-1] + (1,)
    k = g.int(0, shape[-1])
    return (g.values(shape, g.dtype("T")), np.array(k, g.pick(("int32", "int64")))), {}


@gen("GatherNd")
def _gather_nd(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = tuple(max(d, 1) for d in g.shape(1, 3))
    depth = g.int(1, len(shape))
    count = g.int(0, 4)
    idx = np.stack([g.rng.integers(0, shape[d], count) for d in range(depth)], -1) if count else np.zeros((0, depth))
    return (g.values(shape, g.dtype("Tparams")), idx.astype(g.pick(("int32", "int64")))), {}


@gen("ScatterNd")
def _scatter_nd(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = tuple(max(d, 1) for d in g.shape(1, 3))
    depth = g.int(1, len(shape))
    count = g.int(0, 4)
    dt = g.pick(("int32", "int64"))
    idx = np.stack([g.rng.integers(0, shape[d], count) for d in range(depth)], -1) if count else np.zeros((0, depth))
    updates = g.values((count,) + shape[depth:], g.dtype("T"))
    return (idx.astype(dt), updates, np.array(shape, dt)), {}


@gen("TensorScatterUpdate")
def _tensor_scatter_update(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = tuple(max(d, 1) for d in g.shape(1, 3))
    depth = g.int(1, len(shape))
    count = g.int(0, 3)
    # distinct slots: TensorFlow leaves the winner of a duplicate open
    slots = g.rng.permutation(int(np.prod(shape[:depth])))[:count]
    idx = np.stack(np.unravel_index(slots, shape[:depth]), -1) if count else np.zeros((0, depth))
    dt = g.dtype("T")
    return (g.values(shape, dt), idx.astype(g.pick(("int32", "int64"))), g.values((len(slots),) + shape[depth:], dt)), {}


@gen("MirrorPad", "MirrorPadGrad")
def _mirror_pad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    mode = g.pick(("REFLECT", "SYMMETRIC"))
    base = tuple(max(d, 2) for d in g.shape(1, 3))
    pads = np.array([[g.int(0, d - (1 if mode == "REFLECT" else 0)) for _ in range(2)] for d in base])
    shape = tuple(int(d + p.sum()) for d, p in zip(base, pads)) if g.sig.op == "MirrorPadGrad" else base
    return (g.values(shape, g.dtype("T")), pads.astype(g.pick(("int32", "int64")))), {"mode": mode}


@gen("FusedBatchNormGradV3")
def _batch_norm_grad(g: G) -> tuple[tuple[Any, ...], dict[str, Any]]:
    c = g.int(1, 3)
    shape = (g.int(1, 3), g.int(1, 3), g.int(1, 3), c)
    x = g.rng.standard_normal(shape).astype(np.float32)
    dy = g.rng.standard_normal(shape).astype(np.float32)
    scale = g.rng.uniform(0.5, 2.0, c).astype(np.float32)
    mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2)) + np.float32(0.5)
    return (dy, x, scale, mean, var, np.zeros(0, np.float32)), {"epsilon": 0.001, "is_training": g.coin()}


NOT_GENERATED: dict[str, str] = {
    "LRNGrad": "its output_image input must be LRN's output for the input image (TensorFlow's kernel divides by "
               "it); cases_nn.py compares it with TensorFlow on LRN's own outputs, and LRN's generated calls check "
               "its gradient",
    "FusedBatchNormV3": "TensorFlow's reserve-space outputs are scratch that varies from run to run (uninitialized "
                        "in inference); its values are the conformance suite's composed cases (cases_nn.py)",
    **{op: "a resource op: a call takes a handle to state, which a generated call of inputs cannot hold; "
           "tests/test_resource_variables.py compares scripts of these ops with TensorFlow step by step"
       for op in (*RESOURCE_VARIABLE_OPS, *LOOKUP_OPS, *QUEUE_OPS)},
}


def generate(sig: Signature, seed: int, index: int) -> Case:
    """Random call number ``index`` of ``sig.op`` for ``seed``."""
    g = G(sig, rng_for(seed, sig.op, index))
    inputs, attrs = GENERATORS[sig.op](g)
    # Ref-input ops (Assign*, Apply*) update variables: their outputs are compared, not gradients.
    grad = not any(i["is_ref"] for i in sig.inputs) and any(_is_float(x) for x in _flat(inputs)) and g.coin(0.6)
    return Case(f"{sig.op}/{seed}:{index}", sig.op, tuple(inputs), attrs, grad=grad, seed=index)


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]


def _is_float(a: Any) -> bool:
    return isinstance(a, np.ndarray) and (a.dtype.kind in "fc" or a.dtype == BFLOAT16)
