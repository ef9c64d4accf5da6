"""Shapes with unknowns, and TensorFlow's shape-inference context.

A :class:`Dimension` is a non-negative size or unknown (``None``); a
:class:`TensorShape` is a tuple of dimensions, or of unknown rank.  Shape
functions receive an :class:`InferenceContext` (TensorFlow's
``shape_inference::InferenceContext``): it hands out the input shapes (and the
constant value of inputs when known), checks and combines shapes, and collects
the output shapes.  Every check that fails raises :class:`~opkernel.errors.ShapeError`
naming the op, what was expected and what was given, and, where the shape came
straight from an input, which input.

:func:`run_shape_fn` runs an op's shape function; both TensorFlow's C++ style
(``ctx.set_output(...)``, return ``None``) and the older Python ``RegisterShape``
style (return the output shapes) are accepted.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, TypeVar, overload

import numpy as np
import numpy.typing as npt

from .errors import OpkernelError, ShapeError

__all__ = [
    "ArgDefLike",
    "DimLike",
    "Dimension",
    "InferenceContext",
    "OpDefLike",
    "ShapeFn",
    "ShapeLike",
    "TensorShape",
    "as_shape",
    "broadcast_layout",
    "matrix",
    "output_size_from",
    "output_size_inputs",
    "run_shape_fn",
    "scalar",
    "unknown_shape",
    "vector",
]


def _dim_value(value: DimLike) -> int | None:
    """The size ``value`` stands for; a negative size is a ``ValueError``."""
    if value is None:
        return None
    if isinstance(value, Dimension):
        return value.value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"A dimension must be an int or None, not {value!r}")
    size = operator.index(value)
    if size < 0:
        raise ValueError(f"Dimension {size} must be >= 0 (None stands for unknown)")
    return size


def _as_dimension(value: DimLike) -> Dimension:
    return value if isinstance(value, Dimension) else Dimension(value)


def _combine(a: DimLike, b: DimLike, fn: Callable[[int, int], int]) -> Dimension:
    """``fn`` applied to two sizes; unknown if either is unknown."""
    x, y = _dim_value(a), _dim_value(b)
    return Dimension(None if x is None or y is None else fn(x, y))


class Dimension:
    """One dimension of a shape: a size ``>= 0``, or unknown (``value is None``).

    ``==`` is true only when both sizes are known and equal, so an unknown
    dimension equals nothing, not even itself; use :meth:`is_compatible_with`
    to ask whether two dimensions could be the same.  Arithmetic with an
    unknown dimension gives an unknown dimension (except ``x * 0``, which is 0).
    """

    __slots__ = ("_value",)

    def __init__(self, value: DimLike) -> None:
        self._value = _dim_value(value)

    @property
    def value(self) -> int | None:
        """The size, or ``None`` when unknown."""
        return self._value

    def is_compatible_with(self, other: DimLike) -> bool:
        """Whether the two could be the same size (either unknown, or equal)."""
        other_value = _dim_value(other)
        return self._value is None or other_value is None or self._value == other_value

    def merge_with(self, other: DimLike) -> Dimension:
        """The more specific of two compatible dimensions; ``ValueError`` if they conflict."""
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {self} and {_as_dimension(other)} are not compatible")
        return self if self._value is not None else _as_dimension(other)

    def __add__(self, other: DimLike) -> Dimension:
        return _combine(self, other, operator.add)

    __radd__ = __add__

    def __sub__(self, other: DimLike) -> Dimension:
        return _combine(self, other, operator.sub)

    def __rsub__(self, other: DimLike) -> Dimension:
        return _combine(other, self, operator.sub)

    def __mul__(self, other: DimLike) -> Dimension:
        if self._value == 0 or _dim_value(other) == 0:
            return Dimension(0)
        return _combine(self, other, operator.mul)

    __rmul__ = __mul__

    def __floordiv__(self, other: DimLike) -> Dimension:
        if _dim_value(other) == 0:
            raise ValueError(f"Cannot divide dimension {self} by 0")
        return _combine(self, other, operator.floordiv)

    def __rfloordiv__(self, other: DimLike) -> Dimension:
        return _as_dimension(other) // self

    def __int__(self) -> int:
        if self._value is None:
            raise ValueError("Cannot convert an unknown dimension to int")
        return self._value

    __index__ = __int__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dimension):
            other_value = other.value
        elif isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            other_value = int(other)
        elif other is None:
            return False
        else:
            return NotImplemented
        return self._value is not None and self._value == other_value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"Dimension({self._value})"

    def __str__(self) -> str:
        return "?" if self._value is None else str(self._value)


DimLike: TypeAlias = Dimension | int | np.integer[Any] | None


class TensorShape:
    """The shape of a tensor: a tuple of :class:`Dimension`, or unknown rank (``dims=None``).

    Immutable and hashable.  ``==`` is structural: the same rank-knownness and
    the same sizes, unknowns included (``TensorShape([None]) == TensorShape([None])``).
    A shape of known rank also equals the list or tuple of its sizes
    (``TensorShape([2, 3]) == (2, 3)``).  As in TensorFlow, ``bool(shape)`` says
    whether the rank is known, and ``shape + other`` concatenates.
    """

    __slots__ = ("_dims",)

    def __init__(self, dims: Iterable[DimLike] | None) -> None:
        if isinstance(dims, TensorShape):
            self._dims: tuple[Dimension, ...] | None = dims._dims
        else:
            self._dims = None if dims is None else tuple(_as_dimension(d) for d in dims)

    @property
    def rank(self) -> int | None:
        """The number of dimensions, or ``None`` when unknown."""
        return None if self._dims is None else len(self._dims)

    @property
    def dims(self) -> list[Dimension] | None:
        """The dimensions, or ``None`` when the rank is unknown."""
        return None if self._dims is None else list(self._dims)

    def _values(self) -> tuple[int | None, ...] | None:
        return None if self._dims is None else tuple(d.value for d in self._dims)

    def _known_dims(self, what: str) -> tuple[Dimension, ...]:
        if self._dims is None:
            raise ValueError(f"{what} is not defined on a shape of unknown rank")
        return self._dims

    def as_list(self) -> list[int | None]:
        """The sizes, ``None`` for unknown ones; ``ValueError`` when the rank is unknown."""
        return [d.value for d in self._known_dims("as_list()")]

    def __len__(self) -> int:
        return len(self._known_dims("len()"))

    def __iter__(self) -> Iterator[Dimension]:
        return iter(self._known_dims("Iteration"))

    def __bool__(self) -> bool:
        return self._dims is not None

    @overload
    def __getitem__(self, key: int) -> Dimension: ...

    @overload
    def __getitem__(self, key: slice) -> TensorShape: ...

    def __getitem__(self, key: int | slice) -> Dimension | TensorShape:
        """``shape[i]`` is a Dimension and ``shape[a:b]`` a TensorShape; unknown
        rank gives an unknown dimension or an unknown shape."""
        if self._dims is None:
            return TensorShape(None) if isinstance(key, slice) else Dimension(None)
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def is_fully_defined(self) -> bool:
        """Whether the rank and every dimension are known."""
        return self._dims is not None and all(d.value is not None for d in self._dims)

    def num_elements(self) -> int | None:
        """The number of elements, or ``None`` unless the shape is fully defined."""
        values = self._values()
        if values is None or None in values:
            return None
        return math.prod(v for v in values if v is not None)

    def is_compatible_with(self, other: ShapeLike) -> bool:
        """Whether the two could describe the same tensor."""
        a, b = self._dims, as_shape(other)._dims
        if a is None or b is None:
            return True
        return len(a) == len(b) and all(x.is_compatible_with(y) for x, y in zip(a, b))

    def merge_with(self, other: ShapeLike) -> TensorShape:
        """The most specific shape compatible with both; ``ValueError`` if they conflict.

        Returns ``self`` itself when it is already at least as specific."""
        other_shape = as_shape(other)
        if not self.is_compatible_with(other_shape):
            raise ValueError(f"Shapes {self} and {other_shape} are not compatible")
        if self._dims is None or other_shape._dims is None:
            return other_shape if self._dims is None else self
        merged = [x.merge_with(y) for x, y in zip(self._dims, other_shape._dims)]
        if all(m is d for m, d in zip(merged, self._dims)):
            return self
        return TensorShape(merged)

    def with_rank(self, rank: int) -> TensorShape:
        """This shape, checked (``ValueError``) or refined to rank ``rank``."""
        try:
            return self.merge_with(unknown_shape(rank))
        except ValueError:
            raise ValueError(f"Shape {self} must have rank {rank}") from None

    def with_rank_at_least(self, rank: int) -> TensorShape:
        """This shape; ``ValueError`` if its rank is known to be below ``rank``."""
        if self._dims is not None and len(self._dims) < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank: int) -> TensorShape:
        """This shape; ``ValueError`` if its rank is known to be above ``rank``."""
        if self._dims is not None and len(self._dims) > rank:
            raise ValueError(f"Shape {self} must have rank at most {rank}")
        return self

    def concatenate(self, other: ShapeLike) -> TensorShape:
        """The dimensions of ``self`` followed by those of ``other``."""
        other_dims = as_shape(other)._dims
        if self._dims is None or other_dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + other_dims)

    def __add__(self, other: ShapeLike) -> TensorShape:
        return self.concatenate(other)

    def __radd__(self, other: ShapeLike) -> TensorShape:
        return as_shape(other).concatenate(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple)):
            try:
                other = TensorShape(other)
            except (TypeError, ValueError):
                return False
        if not isinstance(other, TensorShape):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        values = self._values()
        return "TensorShape(None)" if values is None else f"TensorShape({list(values)})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        if len(self._dims) == 1:
            return f"({self._dims[0]},)"
        return "(" + ", ".join(str(d) for d in self._dims) + ")"


ShapeLike: TypeAlias = TensorShape | Sequence[DimLike] | npt.NDArray[Any] | None


def broadcast_layout(shape: Sequence[int], out: Sequence[int]) -> tuple[int, int] | None:
    """``(inner, mod)`` of an array of ``shape`` broadcast (as numpy broadcasts) to ``out``:
    element i of the flattened result reads element ``(i // inner) % mod`` of the
    flattened array: ``(1, size)`` for an array of ``out``'s shape, ``(1, 1)`` for a
    single element, ``(1, n)`` for a row of the last axes, ``(k, n)`` for a column of the
    first ones or a run in the middle.  None when the array keeps axes on both sides of
    a broadcast one, or does not broadcast to ``out`` (or has a higher rank).  Fused
    elementwise groups read their inputs this way (``ElementwiseProgram``)."""
    if len(shape) > len(out):
        return None
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    kept: list[int] = []
    for a, (d, o) in enumerate(zip(padded, out)):
        if d == o:
            if o != 1:
                kept.append(a)
        elif d != 1:
            return None
    if not kept:
        return (1, 1)
    lo, hi = kept[0], kept[-1] + 1
    if any(padded[a] != out[a] for a in range(lo, hi) if out[a] != 1):
        return None  # a broadcast axis between kept ones
    return (math.prod(out[hi:]), math.prod(out[lo:hi]))


def unknown_shape(rank: int | None = None) -> TensorShape:
    """A shape of unknown rank, or of rank ``rank`` with every dimension unknown."""
    if rank is None:
        return TensorShape(None)
    if rank < 0:
        raise ValueError(f"Rank must be >= 0, but is {rank}")
    return TensorShape([None] * rank)


def scalar() -> TensorShape:
    """The shape ``()``."""
    return TensorShape([])


def vector(d: DimLike) -> TensorShape:
    """The shape ``(d,)``."""
    return TensorShape([d])


def matrix(d0: DimLike, d1: DimLike) -> TensorShape:
    """The shape ``(d0, d1)``."""
    return TensorShape([d0, d1])


def _shape_from_array(array: npt.NDArray[Any]) -> TensorShape:
    if array.ndim != 1:
        raise ValueError(f"A shape array must be 1-D, but has shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"A shape array must hold integers, but has dtype {array.dtype}")
    return TensorShape(int(v) for v in array)


def as_shape(x: ShapeLike) -> TensorShape:
    """``x`` as a TensorShape: a TensorShape (returned as is), a list or tuple of
    sizes (``None`` for unknown), ``None`` (unknown rank) or a 1-D integer array."""
    if isinstance(x, TensorShape):
        return x
    if x is None:
        return TensorShape(None)
    if isinstance(x, np.ndarray):
        return _shape_from_array(x)
    if isinstance(x, (list, tuple)):
        return TensorShape(x)
    raise TypeError(
        f"Cannot convert {x!r} to a TensorShape; expected a TensorShape, a list or "
        "tuple of sizes, None or a 1-D integer numpy array"
    )


class ArgDefLike(Protocol):
    """What the context reads from an input or output argument of an op."""

    @property
    def name(self) -> str: ...

    @property
    def number_attr(self) -> str | None: ...

    @property
    def type_list_attr(self) -> str | None: ...

    @property
    def is_list(self) -> bool: ...


class OpDefLike(Protocol):
    """What the context reads from an op definition (``shape_fn`` is read, when
    present, by :func:`run_shape_fn` only)."""

    @property
    def name(self) -> str: ...

    @property
    def inputs(self) -> Sequence[ArgDefLike]: ...

    @property
    def outputs(self) -> Sequence[ArgDefLike]: ...


_MISSING: Any = object()


class InferenceContext:
    """What a shape function sees: the op's flat input shapes, its attrs and the
    constant value of inputs when known; where it puts the output shapes.

    Inputs and outputs are flat as in TensorFlow: an ``N * T`` argument
    contributes ``N`` entries.  Outputs not set are of unknown shape.  Methods
    that check shapes raise :class:`ShapeError` naming the op and, for shapes
    taken straight from an input, the input.  ``op_def`` and ``attrs`` are kept
    as attributes of the same names.
    """

    def __init__(
        self,
        op_def: OpDefLike,
        input_shapes: Sequence[ShapeLike],
        attrs: Mapping[str, Any],
        input_tensors: Sequence[npt.ArrayLike | None] | None = None,
    ) -> None:
        self.op_def = op_def
        self.attrs = attrs
        in_counts = self._arg_counts(op_def.inputs, len(input_shapes))
        self._input_labels, self._input_slices = self._layout(op_def.inputs, in_counts, "input")
        out_counts = self._arg_counts(op_def.outputs, None)
        self._output_labels, _ = self._layout(op_def.outputs, out_counts, "output")
        self._shape_origin: dict[int, tuple[object, int]] = {}
        self._dim_origin: dict[int, tuple[object, int, int]] = {}
        self._inputs = self._take_inputs(input_shapes)
        self._tensors = self._take_tensors(input_tensors)
        self._outputs = [unknown_shape() for _ in self._output_labels]

    # -- construction -------------------------------------------------------

    def _arg_count(self, arg: ArgDefLike) -> int | None:
        """How many flat entries ``arg`` stands for; ``None`` if its attr is not given."""
        attr = arg.number_attr or arg.type_list_attr
        if attr is None:
            return 1
        if attr not in self.attrs:
            return None
        try:
            value = self.attrs[attr]
            count = operator.index(value) if arg.number_attr else len(value)
        except TypeError as e:
            raise self.error(f"attr '{attr}' of argument '{arg.name}' is invalid: {e}") from e
        if count < 0:
            raise self.error(f"attr '{attr}' must be >= 0, but is {count}")
        return count

    def _arg_counts(self, args: Sequence[ArgDefLike], total: int | None) -> list[int]:
        """The flat length of each argument.  One list argument whose length attr
        is not given takes what the others leave of ``total``."""
        counts = [self._arg_count(arg) for arg in args]
        missing = [k for k, count in enumerate(counts) if count is None]
        if total is not None and len(missing) == 1:
            rest = total - sum(count or 0 for count in counts)
            counts[missing[0]] = rest if rest >= 0 else None
        for arg, count in zip(args, counts):
            if count is None:
                attr = arg.number_attr or arg.type_list_attr
                raise self.error(
                    f"attr '{attr}' (the length of argument '{arg.name}') is not given"
                )
        return [count or 0 for count in counts]

    def _layout(
        self, args: Sequence[ArgDefLike], counts: list[int], kind: str
    ) -> tuple[list[str], dict[str, slice]]:
        labels: list[str] = []
        slices: dict[str, slice] = {}
        for arg, count in zip(args, counts):
            slices[arg.name] = slice(len(labels), len(labels) + count)
            if arg.is_list:
                labels += [f"{kind} '{arg.name}'[{k}]" for k in range(count)]
            else:
                labels.append(f"{kind} '{arg.name}'")
        return labels, slices

    def _take_inputs(self, input_shapes: Sequence[ShapeLike]) -> list[TensorShape]:
        if len(input_shapes) != len(self._input_labels):
            raise self.error(
                f"expected {len(self._input_labels)} input shapes "
                f"({', '.join(self._input_labels) or 'none'}) but got {len(input_shapes)}"
            )
        shapes = [self._fresh(s, i) for i, s in enumerate(input_shapes)]
        for i, shape in enumerate(shapes):
            self._record(shape, i)
        return shapes

    def _fresh(self, shape: ShapeLike, i: int) -> TensorShape:
        """A private copy of input shape ``i``, so its origin can be told by identity."""
        try:
            values = as_shape(shape)._values()
        except (TypeError, ValueError) as e:
            raise self.error(f"the shape of {self._input_labels[i]} is invalid: {e}") from e
        return TensorShape(values)

    def _take_tensors(
        self, tensors: Sequence[npt.ArrayLike | None] | None
    ) -> list[npt.NDArray[Any] | None]:
        if tensors is None:
            return [None] * len(self._inputs)
        if len(tensors) != len(self._inputs):
            raise self.error(
                f"expected {len(self._inputs)} input tensors (or None for unknown) "
                f"but got {len(tensors)}"
            )
        return [None if t is None else np.asarray(t) for t in tensors]

    def _record(self, shape: TensorShape, i: int) -> TensorShape:
        """Remember that ``shape`` (and each of its dimensions) is input ``i``'s."""
        self._shape_origin[id(shape)] = (shape, i)
        for axis, d in enumerate(shape.dims or ()):
            self._dim_origin.setdefault(id(d), (d, i, axis))
        return shape

    # -- messages -----------------------------------------------------------

    @property
    def op_name(self) -> str:
        """The name of the op whose shapes are being inferred."""
        return self.op_def.name

    def error(self, message: str) -> ShapeError:
        """A ShapeError for this op: ``raise ctx.error("...")`` in a shape function."""
        return ShapeError(f"op '{self.op_name}': {message}", op=self.op_name)

    def input_label(self, i: int) -> str:
        """How messages name flat input ``i``: ``input 'a'`` or ``input 'values'[1]``."""
        self._check_index(i, len(self._inputs), "input")
        return self._input_labels[i]

    def describe(self, shape: TensorShape) -> str:
        """``shape`` for a message: ``input 'a' (shape (2, 3))`` when it is an
        input's shape, else ``shape (2, 3)``."""
        origin = self._shape_origin.get(id(shape))
        if origin is not None and origin[0] is shape:
            return f"{self._input_labels[origin[1]]} (shape {shape})"
        return f"shape {shape}"

    def _dim_where(self, d: DimLike) -> str | None:
        origin = self._dim_origin.get(id(d))
        if origin is None or origin[0] is not d:
            return None
        _, i, axis = origin
        return f"dimension {axis} of {self.describe(self._inputs[i])}"

    def _check_index(self, i: int, count: int, kind: str) -> None:
        if not 0 <= i < count:
            raise self.error(f"{kind} index {i} is out of range; the op has {count} {kind}s")

    def _dim(self, d: DimLike) -> Dimension:
        try:
            return _as_dimension(d)
        except (TypeError, ValueError) as e:
            raise self.error(f"invalid dimension {d!r}: {e}") from e

    # -- inputs, outputs, attrs ---------------------------------------------

    def num_inputs(self) -> int:
        """The number of flat inputs."""
        return len(self._inputs)

    def num_outputs(self) -> int:
        """The number of flat outputs."""
        return len(self._outputs)

    def input(self, i: int) -> TensorShape:
        """The shape of flat input ``i``."""
        self._check_index(i, len(self._inputs), "input")
        return self._inputs[i]

    def inputs(self, name: str) -> list[TensorShape]:
        """The shapes of the flat inputs that belong to input argument ``name``."""
        if name not in self._input_slices:
            choices = ", ".join(repr(n) for n in self._input_slices) or "none"
            raise self.error(f"no input named '{name}'; inputs are: {choices}")
        return self._inputs[self._input_slices[name]]

    def input_tensor(self, i: int) -> npt.NDArray[Any] | None:
        """The value of flat input ``i`` when it is known (a constant), else ``None``."""
        self._check_index(i, len(self._inputs), "input")
        return self._tensors[i]

    def set_output(self, i: int, shape: ShapeLike) -> None:
        """Set the shape of flat output ``i``."""
        self._check_index(i, len(self._outputs), "output")
        try:
            self._outputs[i] = as_shape(shape)
        except (TypeError, ValueError) as e:
            raise self.error(f"invalid shape for {self._output_labels[i]}: {e}") from e

    def output(self, i: int) -> TensorShape:
        """The shape of flat output ``i`` (unknown until set)."""
        self._check_index(i, len(self._outputs), "output")
        return self._outputs[i]

    def outputs(self) -> list[TensorShape]:
        """The shapes of all flat outputs."""
        return list(self._outputs)

    def get_attr(self, name: str, default: Any = _MISSING) -> Any:
        """The value of attr ``name``; ``default`` if given and the attr is absent."""
        if name in self.attrs:
            return self.attrs[name]
        if default is not _MISSING:
            return default
        choices = ", ".join(repr(a) for a in self.attrs) or "none"
        raise self.error(f"no attr named '{name}'; attrs given: {choices}")

    # -- rank checks and merging ----------------------------------------------

    def _adopt(self, new: TensorShape, old: TensorShape) -> TensorShape:
        """``new`` refines ``old``: if ``old`` was an input's shape, so is ``new``."""
        origin = self._shape_origin.get(id(old))
        if origin is not None and origin[0] is old:
            self._record(new, origin[1])
        return new

    def with_rank(self, shape: TensorShape, rank: int) -> TensorShape:
        """``shape``, checked to have rank ``rank`` (refined to it when unknown)."""
        if shape.rank is None:
            return self._adopt(unknown_shape(rank), shape)
        if shape.rank != rank:
            raise self.error(
                f"Shape must be rank {rank} but is rank {shape.rank} for {self.describe(shape)}"
            )
        return shape

    def with_rank_at_least(self, shape: TensorShape, rank: int) -> TensorShape:
        """``shape``, checked to have rank ``>= rank`` when its rank is known."""
        if shape.rank is not None and shape.rank < rank:
            raise self.error(
                f"Shape must be at least rank {rank} but is rank {shape.rank} "
                f"for {self.describe(shape)}"
            )
        return shape

    def with_rank_at_most(self, shape: TensorShape, rank: int) -> TensorShape:
        """``shape``, checked to have rank ``<= rank`` when its rank is known."""
        if shape.rank is not None and shape.rank > rank:
            raise self.error(
                f"Shape must be at most rank {rank} but is rank {shape.rank} "
                f"for {self.describe(shape)}"
            )
        return shape

    @overload
    def merge(self, a: TensorShape, b: TensorShape) -> TensorShape: ...

    @overload
    def merge(self, a: DimLike, b: DimLike) -> Dimension: ...

    def merge(self, a: TensorShape | DimLike, b: TensorShape | DimLike) -> TensorShape | Dimension:
        """The most specific shape (or dimension) compatible with both ``a`` and ``b``."""
        if isinstance(a, TensorShape) and isinstance(b, TensorShape):
            return self._merge_shapes(a, b)
        if isinstance(a, TensorShape) or isinstance(b, TensorShape):
            raise self.error(f"cannot merge a shape with a dimension ({a!r} and {b!r})")
        return self._merge_dims(a, b)

    def _merge_shapes(self, a: TensorShape, b: TensorShape) -> TensorShape:
        if a.rank is not None and b.rank is not None and a.rank != b.rank:
            raise self.error(
                f"Shapes must be equal rank, but are {a.rank} and {b.rank} "
                f"for {self.describe(a)} and {self.describe(b)}"
            )
        if not a.is_compatible_with(b):
            axis = next(k for k, (x, y) in enumerate(zip(a, b)) if not x.is_compatible_with(y))
            raise self.error(
                f"Dimension {axis} in both shapes must be equal, but are {a[axis]} and "
                f"{b[axis]}, for {self.describe(a)} and {self.describe(b)}"
            )
        return a.merge_with(b)

    def _merge_dims(self, a: DimLike, b: DimLike) -> Dimension:
        da, db = self._dim(a), self._dim(b)
        if not da.is_compatible_with(db):
            places = [w for w in (self._dim_where(a), self._dim_where(b)) if w]
            where = f", for {' and '.join(places)}" if places else ""
            raise self.error(f"Dimensions must be equal, but are {da} and {db}{where}")
        return da.merge_with(db)

    # -- dimensions -----------------------------------------------------------

    def _axis(self, shape: TensorShape, i: int, rank: int) -> int:
        """``i`` as a non-negative axis of ``shape`` (rank ``rank``), or a ShapeError."""
        axis = i + rank if i < 0 else i
        if not 0 <= axis < rank:
            raise self.error(
                f"Dimension index {i} is out of range for {self.describe(shape)}; "
                f"expected an index in [{-rank}, {rank})"
            )
        return axis

    def dim(self, shape: TensorShape, i: int) -> Dimension:
        """Dimension ``i`` of ``shape`` (negative counts from the end); unknown
        when the rank is unknown."""
        if shape.rank is None:
            return Dimension(None)
        return shape[self._axis(shape, i, shape.rank)]

    def value(self, dim: DimLike) -> int | None:
        """The size of ``dim``, or ``None`` when unknown."""
        return self._dim(dim).value

    def rank(self, shape: TensorShape) -> int | None:
        """The rank of ``shape``, or ``None`` when unknown."""
        return shape.rank

    def rank_known(self, shape: TensorShape) -> bool:
        """Whether the rank of ``shape`` is known."""
        return shape.rank is not None

    def value_known(self, dim: DimLike) -> bool:
        """Whether the size of ``dim`` is known."""
        return self._dim(dim).value is not None

    # -- making shapes and dimensions -------------------------------------------

    def scalar(self) -> TensorShape:
        """The shape ``()``."""
        return scalar()

    def vector(self, d: DimLike) -> TensorShape:
        """The shape ``(d,)``."""
        return self.make_shape([d])

    def matrix(self, d0: DimLike, d1: DimLike) -> TensorShape:
        """The shape ``(d0, d1)``."""
        return self.make_shape([d0, d1])

    def make_shape(self, dims: Iterable[DimLike]) -> TensorShape:
        """A shape of the given dimensions (sizes, ``None`` or Dimensions)."""
        return TensorShape([self._dim(d) for d in dims])

    def make_dim(self, v: DimLike) -> Dimension:
        """A dimension of size ``v`` (``None`` for unknown)."""
        return self._dim(v)

    def unknown_shape(self) -> TensorShape:
        """A shape of unknown rank."""
        return unknown_shape()

    def unknown_shape_of_rank(self, rank: int) -> TensorShape:
        """A shape of rank ``rank`` whose dimensions are all unknown."""
        if rank < 0:
            raise self.error(f"rank must be >= 0, but is {rank}")
        return unknown_shape(rank)

    def unknown_dim(self) -> Dimension:
        """An unknown dimension."""
        return Dimension(None)

    # -- dimension arithmetic ---------------------------------------------------

    def add(self, d: DimLike, n: DimLike) -> Dimension:
        """``d + n``; unknown if either is."""
        first, second = self._dim(d), self._dim(n)
        if second.value == 0:
            return first
        return second if first.value == 0 else first + second

    def subtract(self, d: DimLike, n: DimLike) -> Dimension:
        """``d - n``; unknown if either is; a negative result is a ShapeError."""
        first, second = self._dim(d), self._dim(n)
        if second.value == 0:
            return first
        if first.value is not None and second.value is not None and first.value < second.value:
            raise self.error(f"Negative dimension size caused by subtracting {second} from {first}")
        return first - second

    def multiply(self, d: DimLike, n: DimLike) -> Dimension:
        """``d * n``; 0 if either is 0, else unknown if either is unknown."""
        first, second = self._dim(d), self._dim(n)
        if first.value == 0 or second.value == 1:
            return first
        if second.value == 0 or first.value == 1:
            return second
        return first * second

    def divide(self, d: DimLike, n: DimLike, evenly: bool = False) -> Dimension:
        """``d // n``; with ``evenly`` a remainder is a ShapeError, as is ``n <= 0``."""
        dividend, divisor = self._dim(d), self._dim(n)
        if divisor.value == 1:
            return dividend
        if divisor.value == 0:
            raise self.error(f"Divisor must be positive but is 0 (dividing {dividend})")
        if dividend.value is None or divisor.value is None:
            return Dimension(None)
        if evenly and dividend.value % divisor.value:
            raise self.error(
                f"Dimension size must be evenly divisible by {divisor} but is {dividend}"
            )
        return Dimension(dividend.value // divisor.value)

    # -- combining shapes -------------------------------------------------------

    def concatenate(self, a: TensorShape, b: TensorShape) -> TensorShape:
        """The dimensions of ``a`` followed by those of ``b``."""
        return a.concatenate(b)

    def subshape(self, shape: TensorShape, start: int, end: int | None = None) -> TensorShape:
        """``shape[start:end]``; indices may be negative but must lie within the rank."""
        rank = shape.rank
        if rank is None:
            return unknown_shape()
        stop = rank if end is None else end
        lo, hi = (start + rank if start < 0 else start), (stop + rank if stop < 0 else stop)
        if not (0 <= lo <= rank and 0 <= hi <= rank) or lo > hi:
            raise self.error(
                f"Subshape [{start}:{'' if end is None else end}] is out of range for "
                f"{self.describe(shape)} of rank {rank}"
            )
        return shape if (lo, hi) == (0, rank) else shape[lo:hi]

    def replace_dim(self, shape: TensorShape, i: int, d: DimLike) -> TensorShape:
        """``shape`` with dimension ``i`` (negative counts from the end) replaced by ``d``."""
        if shape.dims is None:
            return unknown_shape()
        dims: list[DimLike] = list(shape.dims)
        dims[self._axis(shape, i, len(dims))] = self._dim(d)
        return TensorShape(dims)

    def num_elements(self, shape: TensorShape) -> int | None:
        """The number of elements, or ``None`` unless ``shape`` is fully defined."""
        return shape.num_elements()

    def broadcast(self, a: TensorShape, b: TensorShape) -> TensorShape:
        """numpy broadcasting with unknowns: an unknown dimension against 1 stays
        unknown, against a size > 1 becomes that size; unknown rank gives unknown rank."""
        if a.dims is None or b.dims is None:
            return unknown_shape()
        n = max(len(a.dims), len(b.dims))
        # A missing leading dimension acts exactly like a 1, as in numpy.
        pad_a = [Dimension(1)] * (n - len(a.dims)) + a.dims
        pad_b = [Dimension(1)] * (n - len(b.dims)) + b.dims
        return TensorShape([self._broadcast_dim(x, y, a, b) for x, y in zip(pad_a, pad_b)])

    def _broadcast_dim(
        self, x: Dimension, y: Dimension, a: TensorShape, b: TensorShape
    ) -> Dimension:
        """One output dimension of :meth:`broadcast`."""
        if x.value == 1 or (x.value is None and y.value != 1):
            return y
        if y.value in (1, None) or x.value == y.value:
            return x
        raise self.error(
            f"Shapes cannot be broadcast together: dimensions {x} and {y} differ and "
            f"neither is 1, for {self.describe(a)} and {self.describe(b)}"
        )

    # -- shape tensors ----------------------------------------------------------

    def make_shape_from_shape_tensor(self, i: int) -> TensorShape:
        """The shape held by int vector input ``i`` (Reshape's ``shape``), -1 meaning
        an unknown dimension (a scalar -1 means unknown rank).  When the value is
        not known: unknown dimensions, as many as the vector's length when known."""
        value = self.input_tensor(i)
        if value is None:
            shape = self.with_rank_at_most(self.input(i), 1)
            length = shape[0].value if shape.rank == 1 else None
            return unknown_shape(length)
        label = self._input_labels[i]
        if not np.issubdtype(value.dtype, np.integer):
            raise self.error(
                f"Shape tensor {label} must hold integers, but has dtype {value.dtype}"
            )
        if value.ndim == 0 and int(value) == -1:
            return unknown_shape()
        if value.ndim != 1:
            raise self.error(
                f"Shape tensor {label} must be a vector (or the scalar -1 for unknown rank), "
                f"but has shape {value.shape}"
            )
        return TensorShape([self._shape_tensor_dim(int(v), k, label) for k, v in enumerate(value)])

    def _shape_tensor_dim(self, v: int, k: int, label: str) -> int | None:
        if v < -1:
            raise self.error(
                f"Invalid value {v} at index {k} of shape tensor {label}; "
                "expected a size >= 0, or -1 for unknown"
            )
        return None if v == -1 else v


ShapeFn: TypeAlias = Callable[[InferenceContext], None | TensorShape | Sequence[ShapeLike]]


def _returned_shapes(ctx: InferenceContext, result: object) -> list[TensorShape]:
    """The output shapes a ``RegisterShape``-style function returned."""
    shapes = [result] if isinstance(result, TensorShape) else result
    if not isinstance(shapes, (list, tuple)):
        raise ctx.error(
            "shape function must return None, a TensorShape or a list of shapes "
            f"(one per output), not {type(result).__name__}"
        )
    if len(shapes) != ctx.num_outputs():
        raise ctx.error(
            f"shape function returned {len(shapes)} shapes but the op has "
            f"{ctx.num_outputs()} outputs"
        )
    for i, shape in enumerate(shapes):
        ctx.set_output(i, shape)
    return ctx.outputs()


def run_shape_fn(
    op_def: OpDefLike,
    input_shapes: Sequence[ShapeLike],
    attrs: Mapping[str, Any],
    input_tensors: Sequence[npt.ArrayLike | None] | None = None,
) -> list[TensorShape]:
    """Infer the flat output shapes of one call of ``op_def``.

    Calls ``op_def.shape_fn(ctx)`` (no shape function: every output unknown).
    The function either sets outputs on ``ctx`` and returns ``None``, or returns
    the output shapes: a TensorShape for a one-output op, or a list with one
    shape per flat output.  A ``ValueError`` raised inside it (say by
    :meth:`TensorShape.merge_with`) becomes a :class:`ShapeError` naming the op.
    """
    ctx = InferenceContext(op_def, input_shapes, attrs, input_tensors)
    fn: ShapeFn | None = getattr(op_def, "shape_fn", None)
    if fn is None:
        return ctx.outputs()
    try:
        result = fn(ctx)
    except OpkernelError:
        raise
    except ValueError as e:
        shapes = ", ".join(str(ctx.input(i)) for i in range(ctx.num_inputs()))
        raise ctx.error(f"{e} (input shapes: {shapes or 'none'})") from e
    return ctx.outputs() if result is None else _returned_shapes(ctx, result)


_ShapeFnT = TypeVar("_ShapeFnT", bound=Callable[..., Any])


def output_size_from(*inputs: str) -> Callable[[_ShapeFnT], _ShapeFnT]:
    """Mark a shape function whose outputs' sizes are read from the values of ``inputs``
    (Fill's ``dims``, Pad's ``paddings``, OneHot's ``depth``), so can be far larger than
    the inputs.  Returns the function unchanged.

    The engine checks each call of such an op before its kernel runs: a cheap bound
    (the largest input's size times ``|v| + 1`` for every integer value ``v`` of
    those inputs, which covers sizes made of sums and products of them) lets small
    calls through; otherwise this shape function gives the exact output shapes, and
    one past int64 elements is an ``InvalidArgumentError``, one past the host's
    available memory (on host-memory backends) a ``ResourceExhaustedError``, both
    naming the op and these inputs.
    """
    if not inputs or not all(isinstance(name, str) and name for name in inputs):
        raise TypeError(f"output_size_from() takes the names of the inputs that size the outputs, got {inputs!r}")

    def mark(fn: _ShapeFnT) -> _ShapeFnT:
        fn.opkernel_output_size_from = tuple(inputs)  # type: ignore[attr-defined]
        return fn

    return mark


def output_size_inputs(fn: Callable[..., Any] | None) -> tuple[str, ...]:
    """The inputs :func:`output_size_from` named for ``fn`` (empty when it is not marked)."""
    names: tuple[str, ...] = getattr(fn, "opkernel_output_size_from", ())
    return names
