"""Small example inputs for any op, built from its OpDef.

The gradient-coverage report runs every gradient once; it needs inputs for every op
without a hand-kept table.  ``example_inputs`` derives them from the OpDef: dtypes
from the type attrs' allowed values (the ones a backend's kernel accepts first),
small shapes, attrs at their defaults (required ones at their smallest legal value),
and tries a few shape and index patterns until the cpu kernel accepts one.  An op
that needs more particular inputs registers its own with ``register_example_inputs``
next to its op registration.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..dtypes import DType, as_dtype
from ..errors import InvalidArgumentError, OpSpecError
from ..op_registry import ArgDef, AttrDef, OpDef

__all__ = ["Example", "example_inputs", "register_example_inputs"]

#: (inputs, attrs): inputs as numpy arrays (a list of them for a list input), attrs
#: the non-inferred attrs to pass.
Example = tuple[list[Any], dict[str, Any]]
ExampleFn = Callable[[], Example]

_lock = threading.Lock()
_registered: dict[str, ExampleFn] = {}  # filled below with the built-in ones

_FLOAT_SHAPES: tuple[tuple[int, ...], ...] = ((2, 2), (1, 2, 2, 2), (2,), ())
#: Values tried for every integer input at once: axes, sizes, shapes, paddings, indices.
#: ``None``: zeros shaped like the floating-point inputs (indices such as MaxPool's argmax).
_INT_VALUES: tuple[Any, ...] = (0, [1, 1], [0, 0], 1, [[0, 1], [1, 0]], [1, 2], [2, 2], [0, 1], [1, 1, 1, 1],
                                [1, 2, 2, 2], None, -1, 2)
_REST: tuple[tuple[int, tuple[int, ...]], ...] = ((1 << 30, ()), (1, (2,)), (1, ()), (2, (2,)))
_PREFERRED = ("float32", "float64", "float16", "complex64", "complex128", "int32", "int64", "bool")


def _builtin_examples() -> dict[str, ExampleFn]:
    """Built-in ops whose inputs must agree with each other in ways no single guess
    satisfies (a shape and the slice bounds within it; segment ids below a count; sizes
    and the gradient they shape; an equation and its operands)."""
    f32 = np.float32

    def strided_slice_grad() -> Example:
        shape, begin, end, strides = ([2, 2], [0, 0], [2, 2], [1, 1])
        return [np.array(v, np.int32) for v in (shape, begin, end, strides)] + [np.ones((2, 2), f32)], {}

    def unsorted_segment_sum() -> Example:
        return [np.ones((2, 2), f32), np.array([0, 1], np.int32), np.array(2, np.int32)], {}

    def scatter_nd() -> Example:
        return [np.array([[1], [0]], np.int32), np.ones((2, 2), f32), np.array([3, 2], np.int32)], {}

    window = {"strides": [1, 1, 1, 1], "padding": "VALID"}

    def depthwise_backprop_input() -> Example:
        return [np.array([1, 2, 2, 2], np.int32), np.ones((1, 1, 2, 1), f32), np.ones((1, 2, 2, 2), f32)], window

    def depthwise_backprop_filter() -> Example:
        return [np.ones((1, 2, 2, 2), f32), np.array([1, 1, 2, 1], np.int32), np.ones((1, 2, 2, 2), f32)], window

    def layer_norm() -> Example:
        return [np.ones((2, 3), f32), np.ones(3, f32), np.zeros(3, f32)], {}

    def einsum() -> Example:
        return [[np.ones((2, 3), f32), np.ones((3, 2), f32)]], {"equation": "ij,jk->ik"}

    return {"StridedSliceGrad": strided_slice_grad, "UnsortedSegmentSum": unsorted_segment_sum, "ScatterNd": scatter_nd,
            "DepthwiseConv2dNativeBackpropInput": depthwise_backprop_input,
            "DepthwiseConv2dNativeBackpropFilter": depthwise_backprop_filter, "Einsum": einsum,
            "FusedLayerNorm": layer_norm}


def register_example_inputs(op_name: str) -> Callable[[ExampleFn], ExampleFn]:
    """Decorator: ``fn()`` returns ``(inputs, attrs)`` that op ``op_name`` runs on (numpy
    arrays, small; attrs the ones a caller passes).  Used by the gradient-coverage
    report where the OpDef alone does not say what legal inputs look like."""

    if not isinstance(op_name, str) or not op_name:
        raise OpSpecError(f"register_example_inputs: expected an op name, got {op_name!r}")

    def decorate(fn: ExampleFn) -> ExampleFn:
        if not callable(fn):
            raise OpSpecError(f"op {op_name!r}: example inputs must come from a function returning (inputs, attrs), "
                              f"got {fn!r}", op=op_name)
        with _lock:
            _registered[op_name] = fn
        return fn

    return decorate


_registered.update(_builtin_examples())


def registered_examples() -> dict[str, ExampleFn]:
    """A copy of the registered example builders (``isolated_registries`` restores it)."""
    with _lock:
        return dict(_registered)


def restore_examples(snap: Mapping[str, ExampleFn]) -> None:
    with _lock:
        _registered.clear()
        _registered.update(snap)


def _pick(allowed: Iterable[DType] | None, prefer: Sequence[DType] = ()) -> DType:
    choices = list(allowed) if allowed is not None else [as_dtype(n) for n in _PREFERRED]
    choices = [dt for dt in choices if dt in prefer] or choices  # what the backend has kernels for
    for name in _PREFERRED:
        if as_dtype(name) in choices:
            return as_dtype(name)
    return choices[0]


def _attr_value(attr: AttrDef) -> Any:
    """The smallest legal value of a required attr."""
    element = attr.type[5:-1] if attr.is_list else attr.type
    if attr.allowed_values:
        one: Any = attr.allowed_values[0]
    else:  # a list attr's ``minimum`` is its least length, an int attr's its least value
        least = 1 if attr.is_list else max(1, attr.minimum or 0)
        one = {"int": least, "float": 1.0, "bool": False, "string": "", "type": as_dtype("float32"),
               "shape": (2, 2)}.get(element)
    if attr.is_list:  # ksize, strides, dilations: one per NHWC dimension
        return [one] * max(attr.minimum or 0, 4 if element == "int" else 1)
    return one


def _values(dt: DType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if dt.is_complex:
        return (rng.uniform(0.5, 1.5, shape) + 1j * rng.uniform(0.5, 1.5, shape)).astype(dt.np)
    if dt.is_floating:
        return rng.uniform(0.5, 1.5, shape).astype(dt.np)  # positive: Log, Sqrt, Pow are defined there
    if dt.name == "bool":
        return np.ones(shape, bool)
    return np.ones(shape, dt.np)


def _candidates(op_def: OpDef, prefer: Mapping[str, Sequence[DType]], lead: int, rest: tuple[int, ...],
                int_values: Sequence[Any]) -> Iterable[tuple[Any, Example]]:
    """(ints, example) for the input patterns to try, most common first."""
    attrs: dict[str, Any] = {}
    types: dict[str, Any] = {}
    for attr in op_def.attrs:
        if attr.name in op_def.inferred_attrs:
            if attr.type == "type":
                types[attr.name] = _pick(attr.allowed_values, prefer.get(attr.name, ()))
            elif attr.type == "list(type)":
                types[attr.name] = [_pick(attr.allowed_values, prefer.get(attr.name, ()))] * max(attr.minimum or 0, 2)
            elif attr.type == "int":
                types[attr.name] = max(attr.minimum or 0, 2)
        elif not attr.has_default:
            attrs[attr.name] = _attr_value(attr)

    def dtypes_of(arg: ArgDef) -> list[DType]:
        if arg.dtype is not None:
            one = [arg.dtype]
        elif arg.type_attr is not None:
            one = [types.get(arg.type_attr, as_dtype("float32"))]
        else:
            return list(types.get(arg.type_list_attr or "", [as_dtype("float32")] * 2))
        return one * int(types.get(arg.number_attr, 2)) if arg.number_attr else one

    # The first ``lead`` floating-point inputs get ``shape``, the others ``rest`` (a bias, a clip bound).
    for shape, ints in itertools.product(_FLOAT_SHAPES, int_values):
        rng = np.random.default_rng(0)
        inputs: list[Any] = []
        seen = 0
        for arg in op_def.inputs:
            arrays = []
            for dt in dtypes_of(arg):
                if dt.is_floating or dt.is_complex or dt.name == "bool":
                    arrays.append(_values(dt, shape if seen < lead else rest, rng))
                    seen += 1
                else:
                    arrays.append(np.zeros(shape, dt.np) if ints is None else np.asarray(ints, dt.np))
            inputs.append(arrays if arg.is_list else arrays[0])
        yield ints, (inputs, dict(attrs))


def example_inputs(op_def: OpDef, run: Callable[[Example], Any],
                   prefer: Mapping[str, Sequence[DType]] | None = None) -> list[Example]:
    """Examples of ``op_def`` that ``run`` accepts (raises nothing for): the first of
    each shape pattern (all inputs alike, then broadcasting ones), so that a gradient
    shows what it needs both for equal shapes and for broadcast ones.

    A registered builder (``register_example_inputs``) is used as it is.  ``prefer``
    maps type attrs to the dtypes to try first (those a backend has kernels for).
    Raises ``InvalidArgumentError`` when no pattern is accepted.
    """
    with _lock:
        builder = _registered.get(op_def.name)
    if builder is not None:
        example = builder()
        run(example)
        return [example]
    found: list[Example] = []
    tried: set[Any] = set()
    last: Exception | None = None
    int_values: Sequence[Any] = _INT_VALUES
    for lead, rest in _REST:
        for ints, example in _candidates(op_def, prefer or {}, lead, rest, int_values):
            key = _key(example)
            if key in tried:  # the same inputs as an earlier pattern's (an op with one float input)
                continue
            tried.add(key)
            try:
                run(example)
            except Exception as e:  # noqa: BLE001 -- a wrong guess; try the next pattern
                last = e
                continue
            found.append(example)
            int_values = [ints]  # the broadcast patterns keep the integer inputs that worked
            break
    if not found:
        raise InvalidArgumentError(
            f"op {op_def.name!r}: could not build example inputs from its OpDef (last attempt: "
            f"{type(last).__name__}: {last}); register some with opkernel.testing.register_example_inputs",
            op=op_def.name,
        )
    return found


def _key(example: Example) -> Any:
    def one(x: Any) -> Any:
        if isinstance(x, list):
            return tuple(one(v) for v in x)
        a = np.asarray(x)
        return (a.shape, a.dtype.str, a.tobytes())

    return one(example[0]), repr(sorted(example[1].items()))
