"""Placeholders of ``ok.function``: the symbolic tensors a traced function runs on, the
variable slots fed by Variable arguments, and shape inference over partial shapes (one
op's, while tracing; a whole graph's, ``graph_shapes``).  The lowest room of tracing."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from . import op_registry
from .dtypes import DType
from .errors import InvalidArgumentError, ShapeError, SymbolicTensorError
from .graph import Edge, Graph, TensorSpec
from .shapes import TensorShape, run_shape_fn
from .tensor import Tensor, Variable

if TYPE_CHECKING:
    from ._tracing import _Tracer

# ---------------------------------------------------------------- placeholders


class _SymbolicValue:
    """What a SymbolicTensor holds instead of a native array: its partial shape.  A kernel
    handed one (a placeholder kept past its trace and used eagerly) gets a clear error
    where numpy converts it."""

    __slots__ = ("shape", "dtype", "nbytes", "function")

    def __init__(self, shape: tuple[int | None, ...] | None, dtype: DType, function: str) -> None:
        self.shape = shape
        self.dtype = dtype.np
        self.nbytes = 0
        self.function = function

    def _message(self) -> str:
        return (
            f"a placeholder of traced function {self.function!r} was used outside its trace: tensors made while "
            "tracing exist only in the graph; return them from the function instead"
        )

    def _leaked(self) -> SymbolicTensorError:
        return _LeakedPlaceholderError(self._message())

    @property
    def __cuda_array_interface__(self) -> Any:
        # CuPy asks for this with hasattr: an error that is no AttributeError reaches the caller
        # (else CuPy reports an unsupported argument type).
        raise SymbolicTensorError(self._message())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        raise self._leaked()

    def __getattr__(self, name: str) -> Any:  # a kernel reading .size, .reshape, ...
        raise self._leaked()


class _LeakedPlaceholderError(SymbolicTensorError, AttributeError):
    """Also an AttributeError: ``hasattr`` on a placeholder's value stays False."""


class SymbolicTensor(Tensor):
    """A placeholder: the output of a traced op (or a traced argument), with a static
    shape (``None`` for unknown dimensions) and a dtype, but no value."""

    __slots__ = ("_tracer", "_edge", "_spec")

    def __init__(self, tracer: _Tracer, edge: Edge, spec: TensorSpec) -> None:
        super().__init__(_SymbolicValue(spec.shape, spec.dtype, tracer.name), spec.dtype, tracer.backend)
        self._tracer = tracer
        self._edge = edge
        self._spec = spec

    @property
    def spec(self) -> TensorSpec:
        """The static shape and dtype (shape inference's result)."""
        return self._spec

    @property
    def shape(self) -> tuple[int | None, ...]:  # type: ignore[override]
        """The static shape: None for a dimension unknown at trace time."""
        if self._spec.shape is None:
            raise SymbolicTensorError(
                f"{self._what()} has an unknown rank at trace time; give the function an input_signature "
                "with a known rank"
            )
        return self._spec.shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        shape = self.shape
        if None in shape:
            raise SymbolicTensorError(f"{self._what()} has shape {shape} at trace time: its size is unknown")
        return math.prod(d for d in shape if d is not None)

    def _what(self) -> str:
        return f"the placeholder {self._edge} of traced function {self._tracer.name!r}"

    def _no_value(self, use: str) -> SymbolicTensorError:
        return SymbolicTensorError(
            f"{use} of a tensor while tracing {self._tracer.name!r}: {self._what()} ({self._spec.dtype.name}, "
            f"shape {self._spec.shape}) has no value until the function runs. Use ops on it (ok.ops.*), pass "
            "Python values (not tensors) for what must be known while tracing, or read results outside the function"
        )

    def numpy(self) -> np.ndarray:
        raise self._no_value(".numpy()")

    def item(self) -> Any:
        raise self._no_value(".item()")

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        raise self._no_value("numpy conversion")

    def __bool__(self) -> bool:
        raise self._no_value("bool() (Python control flow on a tensor)")

    def __float__(self) -> float:
        raise self._no_value("float()")

    def __int__(self) -> int:
        raise self._no_value("int()")

    def __index__(self) -> int:
        raise self._no_value("use as an index")

    def __len__(self) -> int:
        shape = self.shape
        if not shape or shape[0] is None:
            raise SymbolicTensorError(f"len() of {self._what()} with shape {shape}: the first dimension is unknown")
        return shape[0]

    def to(self, backend: str) -> Tensor:
        raise self._no_value(".to()")

    def __reduce__(self) -> tuple[Any, ...]:
        raise self._no_value("pickling")

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        raise self._no_value("copy.deepcopy()")

    def __repr__(self) -> str:
        return f"<ok.SymbolicTensor {self._edge} shape={self._spec.shape} dtype={self._spec.dtype.name}>"


def _flat_result(result: Any) -> list[Any]:
    """The flat outputs of an engine call's packed result (a tensor, None, a list, a namedtuple)."""
    if result is None:
        return []
    if isinstance(result, Tensor):
        return [result]
    return [t for part in result for t in (part if isinstance(part, list) else (part,))]


def _run_shapes(
    op_def: Any, specs: Sequence[TensorSpec], values: Sequence[np.ndarray | None], attrs: Mapping[str, Any], where: str
) -> list[tuple[int | None, ...] | None]:
    shapes = [TensorShape(s.shape) for s in specs]
    try:
        out = run_shape_fn(op_def, shapes, attrs, list(values))
    except ShapeError as e:
        given = ", ".join(_shape_text(s.shape) for s in specs)
        raise ShapeError(f"{where}: {e.message} (input shapes: {given})", op=op_def.name) from e
    return [None if s.rank is None else tuple(s.as_list()) for s in out]


def _shape_text(shape: tuple[int | None, ...] | None) -> str:
    if shape is None:
        return "<unknown>"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


class _VariableArgument:
    """A traced function's variable slot fed by its ``index``-th distinct Variable argument
    (what ``Graph.variables`` holds there: the dtype and shape, never a value)."""

    __slots__ = ("dtype", "shape", "name", "index", "backend")

    def __init__(self, v: Variable, index: int) -> None:
        self.dtype, self.shape, self.name, self.index = v._dtype, tuple(v.shape), v.name, index
        self.backend = v.backend

    @property
    def _dtype(self) -> DType:
        return self.dtype

    def __repr__(self) -> str:
        return f"<variable argument {self.index}: {self.dtype.name}{list(self.shape)}>"


def graph_shapes(graph: Graph, input_specs: Sequence[Any] | None = None) -> list[list[TensorSpec]]:
    """Every node's output specs (partial shapes) of ``graph`` for ``input_specs`` (default:
    the graph's own): ``opkernel.function.infer_shapes`` for a Graph."""
    graph.validate()
    if input_specs is not None and len(input_specs) != len(graph.inputs):
        raise InvalidArgumentError(f"infer_shapes: the graph has {len(graph.inputs)} inputs, got {len(input_specs)} specs")
    specs = list(graph.inputs) if input_specs is None else [
        s if isinstance(s, TensorSpec) else TensorSpec(s, graph.inputs[k].dtype) for k, s in enumerate(input_specs)
    ]
    for k, (s, g) in enumerate(zip(specs, graph.inputs)):
        if s.dtype is not g.dtype:
            raise InvalidArgumentError(f"infer_shapes: input {k} is {g.dtype.name}, got a spec of {s.dtype.name}")
    result: list[list[TensorSpec]] = []

    def spec(e: Edge) -> TensorSpec:
        if e.kind == "input":
            return specs[e.index]
        if e.kind == "node":
            return result[e.index][e.output]
        return graph.spec_of(e)

    for i, node in enumerate(graph.nodes):
        op_def = op_registry.get_op_def(node.op)
        in_specs = [spec(e) for e in node.inputs]
        values = [graph.constants[e.index] if e.kind == "const" else None for e in node.inputs]
        shapes = _run_shapes(op_def, in_specs, values, node.attrs, f"graph node {i} (op {node.op!r})")
        result.append([TensorSpec(s, o.dtype) for s, o in zip(shapes, node.outputs)])
    return result

