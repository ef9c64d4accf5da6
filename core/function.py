"""``ok.function``: trace a Python function of tensors into a :class:`~opkernel.graph.Graph`
once per input signature, then replay the graph with every kernel bound once.

Tracing is symbolic, as ``tf.function``'s: the function runs once with
placeholder tensors (:class:`SymbolicTensor`) standing for its tensor
arguments.  While it runs, the engine's ``execute`` hands every op call to the
tracer, which binds it exactly as an eager call would (type and length attrs,
defaults, checks), runs the op's shape function over partial shapes, and
records a :class:`~opkernel.graph.Node` whose outputs are new placeholders.
Eager tensors the function uses become constants; Variables become ``var``
edges, captured by reference.  Calls whose inputs are all constants are folded
(run once at trace time) when the op is stateless and the result small.

A :class:`ConcreteFunction` replays one graph.  Per backend, on first use,
every live node's kernel signature is bound once (the engine's cached
``_Signature``) and the whole graph is compiled into one straight-line Python
function over native arrays; nodes that contribute neither to an output nor to
a stateful op (a ``Ref`` update) are pruned.  While a GradientTape records,
the replay runs node by node through the engine's signature calls instead, so
the tape records every op and can differentiate through the function.
"""

from __future__ import annotations

import copy
import math
import sys
import threading
import types
import warnings
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from . import engine, plugins
from . import kernels as kernel_registry
from .autodiff import RECORDING, active_tapes, record_op, stop_recording
from .backend import Backend
from .dtypes import DType, as_dtype
from .errors import InvalidArgumentError, OpkernelError, OpTypeError, ShapeError
from .graph import Edge, Graph, GraphError, Node, TensorSpec
from .shapes import TensorShape, output_size_inputs, run_shape_fn
from .tensor import Tensor, Variable, update_lock

__all__ = [
    "function", "Function", "ConcreteFunction", "TensorSpec", "SymbolicTensor", "SymbolicTensorError",
    "RetracingWarning", "infer_shapes", "MAX_RETRACES",
]

#: Traces of one Function after which each further trace warns (tf.function's threshold).
MAX_RETRACES = 5
#: Calls whose inputs are all constants are run at trace time when their outputs have at
#: most this many elements in all; larger ones stay nodes (the graph would carry them).
FOLD_ELEMENTS = 1 << 12


class SymbolicTensorError(OpTypeError):
    """A value was asked of a placeholder while tracing (``.numpy()``, ``bool(t)``,
    ``float(t)``): at trace time a tensor argument has a shape and dtype, no value."""


class RetracingWarning(UserWarning):
    """A Function was traced more than ``MAX_RETRACES`` times."""


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


# ---------------------------------------------------------------- tracing


class _Tracer:
    """Records op calls into a graph (installed as the engine's ``_TRACER``)."""

    def __init__(self, name: str, backend: Backend) -> None:
        self.name = name
        self.backend = backend
        self.nodes: list[Node] = []
        self.constants: list[np.ndarray] = []
        self.variables: list[Variable] = []
        self.variable_names: list[str] = []
        self._const_ids: dict[int, tuple[int, Tensor]] = {}
        self._var_ids: dict[int, int] = {}
        #: Small constants by value: every literal 1.0 of a trace is one constant.
        self._small: dict[tuple[str, tuple[int, ...], bytes], int] = {}
        #: id -> (host copy, the tensor): constants' values, also read by shape functions.
        self._hosts: dict[int, tuple[np.ndarray, Tensor]] = {}
        #: id -> (variable, count): versions bumped for the Ref updates recorded, so a tape
        #: inside the trace refuses a gradient through a variable updated since, as eagerly;
        #: undone when the trace ends (tracing updates nothing).
        self.bumped: dict[int, tuple[Variable, int]] = {}

    # -- edges -----------------------------------------------------------------

    def edge_of(self, t: Tensor) -> Edge:
        if isinstance(t, SymbolicTensor):
            if t._tracer is not self:
                raise InvalidArgumentError(
                    f"tracing {self.name!r}: a placeholder of traced function {t._tracer.name!r} was used here; "
                    "tensors made while tracing one function cannot be used in another or after tracing"
                )
            return t._edge
        if isinstance(t, Variable) and not t._borrowed:
            k = self._var_ids.get(id(t))
            if k is None:
                k = self._var_ids[id(t)] = len(self.variables)
                self.variables.append(t)
                self.variable_names.append(t.name or f"variable_{k}")
            return Edge("var", k)
        hit = self._const_ids.get(id(t))
        if hit is not None and hit[1] is t:
            return Edge("const", hit[0])
        arr = self.host(t)
        small = (arr.dtype.str, arr.shape, arr.tobytes()) if arr.size <= 16 and arr.dtype.kind != "O" else None
        k = self._small.get(small) if small is not None else None
        if k is None:
            k = len(self.constants)
            self.constants.append(arr)
            if small is not None:
                self._small[small] = k
        self._const_ids[id(t)] = (k, t)  # holds t: its id is not reused while tracing
        return Edge("const", k)

    def host(self, t: Tensor) -> np.ndarray:
        """A read-only host copy of the eager tensor ``t``, made once per trace."""
        hit = self._hosts.get(id(t))
        if hit is not None and hit[1] is t:
            return hit[0]
        arr = np.array(t._backend.to_numpy(t._value), copy=True)
        arr.flags.writeable = False
        self._hosts[id(t)] = (arr, t)
        return arr

    def is_constant(self, t: Tensor) -> bool:
        return not isinstance(t, SymbolicTensor) and not (isinstance(t, Variable) and not t._borrowed)

    # -- recording -------------------------------------------------------------

    def __call__(self, op: Any, inputs: Sequence[Any], attrs: dict[str, Any], label: str | None) -> Any:
        be = self.backend
        op_def = op.op_def
        if label is None:
            labels = engine._LABELS.get()
            if labels is not None:
                label = labels.get(op.name)
        tensors, bound = engine._bind(op_def, inputs, attrs, be)
        constant = [self.is_constant(t) for t in tensors]
        specs = [t._spec if isinstance(t, SymbolicTensor) else TensorSpec(tuple(t._value.shape), t._dtype) for t in tensors]
        # Shape functions may read small constant inputs (Reshape's shape, Pad's paddings).
        values = [self.host(t) if c and t.size <= FOLD_ELEMENTS else None for t, c in zip(tensors, constant)]
        index = len(self.nodes)
        where = f"tracing {self.name!r}: node {index} (op {op_def.name!r})"
        shapes = _run_shapes(op_def, specs, values, bound, where)
        out_dtypes, out_lengths = engine._output_dtypes(op_def, bound)
        out_specs = [TensorSpec(s, dt) for s, dt in zip(shapes, out_dtypes)]
        if all(constant) and self._foldable(op_def, out_specs):
            token = engine._TRACER.set(None)
            try:
                return engine.execute(op, inputs, attrs, label)
            finally:
                engine._TRACER.reset(token)
        edges = [self.edge_of(t) for t in tensors]
        node = Node(op_def.name, dict(bound), edges, out_specs, getattr(op_def, "provider", None), label)
        self.nodes.append(node)
        if any(a.is_ref for a in op_def.inputs):
            flags = [a.is_ref for a, n in zip(op_def.inputs, engine._input_lengths(op_def, bound)) for _ in range(n or 1)]
            for t, is_ref in zip(tensors, flags):
                if is_ref and isinstance(t, Variable):
                    t._version += 1
                    self.bumped[id(t)] = (t, self.bumped.get(id(t), (t, 0))[1] + 1)
        outs: list[Tensor] = [SymbolicTensor(self, Edge("node", index, k), s) for k, s in enumerate(out_specs)]
        if RECORDING[0]:
            record_op(op_def, bound, tensors, outs)  # a tape inside the function: its gradient is traced too
        return engine._packer(op_def, out_lengths)(outs)

    def _foldable(self, op_def: Any, specs: list[TensorSpec]) -> bool:
        """Whether a call whose inputs are all constants runs now: a stateless op with
        outputs of known shapes and at most FOLD_ELEMENTS elements in all."""
        if op_def.is_stateful or not specs:
            return False
        total = 0
        for s in specs:
            if not s.is_fully_defined():
                return False
            total += math.prod(d for d in s.shape or () if d is not None)
        return total <= FOLD_ELEMENTS


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


def _trace(
    name: str, fn: Callable[..., Any], args: Any, kwargs: Any, specs: list[TensorSpec], leaves: list[int]
) -> ConcreteFunction:
    """Run ``fn`` on placeholders for the tensor leaves at positions ``leaves`` of the flat
    arguments, and on a stand-in for each distinct Variable among them (``_stand_in``)."""
    be = engine.active_backend()
    tracer = _Tracer(name, be)
    flat, rebuild = _flatten_args((args, kwargs))
    for k, (pos, spec) in enumerate(zip(leaves, specs)):
        flat[pos] = SymbolicTensor(tracer, Edge("input", k), spec)
    # A Variable argument is an input of the trace, not a capture: the function runs on a
    # stand-in (one per distinct Variable), and each call feeds the Variables it is given.
    originals: list[Variable] = []
    stand_ins: list[Variable] = []
    for pos, x in enumerate(flat):
        if _is_argument_variable(x):
            j = next((i for i, v in enumerate(originals) if v is x), None)
            if j is None:
                j = len(originals)
                originals.append(x)
                stand_ins.append(_stand_in(x))
            flat[pos] = stand_ins[j]
    t_args, t_kwargs = rebuild(flat)
    with engine._lock:
        engine._SLOW_SCOPES[0] += 1
    token = engine._TRACER.set(tracer)
    try:
        with stop_recording():  # tapes outside the function record its replay, not its trace
            result = fn(*t_args, **t_kwargs)
        outputs: list[Edge] = []
        structure, py_structure = _output_structure(tracer, result, outputs)
    finally:
        engine._TRACER.reset(token)
        with engine._lock:
            engine._SLOW_SCOPES[0] -= 1
        for var, count in tracer.bumped.values():
            var._version -= count
    variables: list[Any] = list(tracer.variables)
    slots: list[int | None] = []
    for v, stand_in in zip(originals, stand_ins):
        slot = tracer._var_ids.get(id(stand_in))
        slots.append(slot)
        if slot is not None:  # the trace keeps the slot, not the Variable (nor its value)
            variables[slot] = _VariableArgument(v, len(slots) - 1)
    graph = Graph(
        inputs=list(specs), nodes=tracer.nodes, outputs=outputs, output_structure=structure,
        constants=tracer.constants, variables=variables, variable_names=tracer.variable_names,
    )
    cf = ConcreteFunction(graph, name=name, structure=py_structure, validate=False)
    cf._arg_slots = slots if originals else None
    return cf


def _is_argument_variable(x: Any) -> bool:
    return isinstance(x, Variable) and not isinstance(x, SymbolicTensor) and not x._borrowed


_VARIABLE_SLOTS = tuple(n for n in (*Tensor.__slots__, *Variable.__slots__) if n != "__weakref__")


def _stand_in(v: Variable) -> Variable:
    """A Variable that is ``v`` in everything but identity, for tracing: the tracer gives it
    a slot of its own, so a Variable argument never aliases one the function captures."""
    s = Variable.__new__(Variable)
    for name in _VARIABLE_SLOTS:
        if hasattr(v, name):
            setattr(s, name, getattr(v, name))
    return s


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


def _output_structure(tracer: _Tracer, result: Any, outputs: list[Edge]) -> tuple[Any, Any]:
    """(JSON-able output structure of ints, the Python structure with tuples kept)."""

    def leaf(t: Any) -> int:
        if isinstance(t, Variable) and not isinstance(t, SymbolicTensor):
            t = engine.execute(engine.op_handle("Identity"), [t], {})  # a value, not the variable
        elif not isinstance(t, Tensor):
            try:
                t = engine.to_tensor(t, backend=tracer.backend.name)
            except OpkernelError as e:
                raise InvalidArgumentError(
                    f"traced function {tracer.name!r} returned {type(t).__name__} {t!r}; a traced function returns "
                    "tensors, Python numbers and None in tuples, lists and dicts"
                ) from e
        outputs.append(tracer.edge_of(t))
        return len(outputs) - 1

    def walk(x: Any) -> tuple[Any, Any]:
        if x is None:
            return None, None
        if isinstance(x, dict):
            if not all(isinstance(k, str) for k in x):
                raise InvalidArgumentError(f"traced function {tracer.name!r}: returned dicts need str keys")
            parts = {k: walk(v) for k, v in x.items()}
            return {k: p[0] for k, p in parts.items()}, {k: p[1] for k, p in parts.items()}
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            parts_l = [walk(v) for v in x]
            py = [p[1] for p in parts_l]
            return [p[0] for p in parts_l], (tuple(py) if isinstance(x, tuple) else py)
        if hasattr(x, "_fields") and isinstance(x, tuple):  # a namedtuple: its fields, rebuilt as one
            parts_l = [walk(v) for v in x]
            return [p[0] for p in parts_l], ("namedtuple", type(x), [p[1] for p in parts_l])
        i = leaf(x)
        return i, i

    return walk(result)


# ---------------------------------------------------------------- argument structure


def _flatten_args(x: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """Leaves of nested tuples, lists and dicts, and a function rebuilding the nest from new leaves."""
    leaves: list[Any] = []

    def build(v: Any) -> Callable[[Iterator[Any]], Any]:
        if isinstance(v, dict):
            keys = sorted(v, key=repr)
            subs = [build(v[k]) for k in keys]
            return lambda it: {k: s(it) for k, s in zip(keys, subs)}
        if isinstance(v, (list, tuple)) and not isinstance(v, Tensor):
            subs = [build(e) for e in v]
            kind = type(v)
            if hasattr(v, "_fields"):
                return lambda it: kind(*[s(it) for s in subs])
            return lambda it: kind([s(it) for s in subs])
        leaves.append(v)
        return lambda it: next(it)

    rebuild = build(x)
    return leaves, lambda new: rebuild(iter(new))


class _Identity:
    """A key part that compares by identity and holds its object, so that the object's
    id cannot be reused by another while the trace is cached."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj


def _static_key(x: Any) -> Any:
    """A non-tensor argument's part of the signature key: its value (with its class) when
    hashable, else its identity."""
    try:
        hash(x)
    except TypeError:
        return _Identity(x)
    if isinstance(x, float):
        return (float, x.hex())
    if isinstance(x, complex):
        return (complex, x.real.hex(), x.imag.hex())
    if isinstance(x, np.generic) and x.dtype.kind in "fc":  # -0.0 == 0.0 and NaN != NaN: key by the bits
        return (type(x), x.tobytes())
    return (type(x), x)


# ---------------------------------------------------------------- Function


class Function:
    """A Python function traced once per input signature (``tf.function``).

    Calling it looks up the signature of its arguments: the dtype and shape of
    every tensor (numpy arrays count as tensors), the values of every other
    argument (Python numbers, strings, None: they are static, as in
    TensorFlow), and the nesting of tuples, lists and dicts.  A new signature
    traces the function again; more than ``MAX_RETRACES`` traces warn.  With
    ``input_signature`` (a list of TensorSpec, one per positional argument)
    there is one trace, and any tensors compatible with the specs run it.
    """

    def __init__(
        self, fn: Callable[..., Any], input_signature: Sequence[Any] | None = None, name: str | None = None,
        reduce_retracing: bool = False,
    ) -> None:
        if not callable(fn):
            raise OpTypeError(f"ok.function: expected a callable, got {type(fn).__name__}")
        self.python_function = fn
        self.__name__: str = name or getattr(fn, "__name__", None) or "function"
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        if input_signature is not None:
            if isinstance(input_signature, TensorSpec) or not isinstance(input_signature, (list, tuple)):
                raise OpTypeError(
                    f"ok.function({self.__name__!r}): input_signature must be a list of ok.TensorSpec, "
                    f"got {type(input_signature).__name__}"
                )
            for k, s in enumerate(_flatten_args(tuple(input_signature))[0]):
                if not isinstance(s, TensorSpec):
                    raise OpTypeError(
                        f"ok.function({self.__name__!r}): input_signature must hold ok.TensorSpecs (in lists, "
                        f"tuples and dicts, one per argument), got {type(s).__name__} as its tensor {k}"
                    )
            input_signature = list(input_signature)
        #: One TensorSpec (or a nest of them) per positional argument, or None.
        self.input_signature: list[Any] | None = input_signature
        self.reduce_retracing = bool(reduce_retracing)
        #: With reduce_retracing: (static part of the key, tensor specs, trace) of each trace.
        self._general: list[tuple[tuple[Any, ...], list[TensorSpec], tuple[ConcreteFunction, list[int]]]] = []
        self._cache: dict[Any, tuple[ConcreteFunction, list[int]]] = {}
        #: The same traces under the key of ``_fast_key`` (positional tensors and atoms).
        self._fast: dict[tuple[Any, ...], ConcreteFunction] = {}
        self._lock = threading.RLock()
        self.tracing_count = 0

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """As a method: the function bound to ``obj`` (each instance has its own traces)."""
        if obj is None:
            return self
        bound = obj.__dict__.get(f"__ok_function_{id(self)}") if hasattr(obj, "__dict__") else None
        if bound is None:
            import functools

            bound = Function(
                functools.partial(self.python_function, obj), self.input_signature, self.__name__, self.reduce_retracing
            )
            if hasattr(obj, "__dict__"):
                obj.__dict__[f"__ok_function_{id(self)}"] = bound
        return bound

    def __repr__(self) -> str:
        return f"<ok.function {self.__name__} ({self.tracing_count} traces)>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if engine._TRACER.get() is not None:
            return self.python_function(*args, **kwargs)  # inside another trace: traced inline
        cf, tensors, variables = self._concrete(args, kwargs)
        return cf._call_flat(tensors, variables)

    def get_concrete_function(self, *args: Any, **kwargs: Any) -> ConcreteFunction:
        """The ConcreteFunction these arguments (tensors or TensorSpecs) run, tracing if needed
        (for Variable arguments: the trace bound to those Variables, which it then captures)."""
        cf, _, variables = self._concrete(args, kwargs, specs_allowed=True)
        return cf if cf._arg_slots is None else cf.bound(variables)

    def _concrete(
        self, args: Any, kwargs: Any, specs_allowed: bool = False
    ) -> tuple[ConcreteFunction, list[Tensor], list[Variable]]:
        labels = engine._LABELS.get()  # a trace records the kernel labels in force: they key it too
        label_key = tuple(sorted(labels.items())) if labels else None
        if self.input_signature is not None:
            return (*self._with_signature(args, kwargs, specs_allowed, label_key), [])
        fast = None if kwargs or specs_allowed else _fast_key(args)
        if fast is not None:
            if label_key is not None:
                fast = ((label_key, *fast[0]), fast[1], fast[2])
            cf = self._fast.get(fast[0])
            if cf is not None:
                return cf, fast[1], fast[2]
        flat, _ = _flatten_args((args, kwargs))
        key: list[Any] = [(_structure_key((args, kwargs)), label_key)]
        tensors: list[Any] = []
        variables: list[Variable] = []
        leaves: list[int] = []
        specs: list[tuple[Any, DType]] = []
        for pos, x in enumerate(flat):
            if _is_argument_variable(x):
                key.append(_variable_key(x, variables))
            elif isinstance(x, Variable):
                key.append(_Identity(x))
            elif isinstance(x, Tensor):
                key.append((x._dtype, x.shape))
                tensors.append(x)
                leaves.append(pos)
                specs.append((x.shape, x._dtype))
            elif isinstance(x, np.ndarray):
                t = engine.to_tensor(x)
                key.append((t._dtype, t.shape))
                tensors.append(t)
                leaves.append(pos)
                specs.append((t.shape, t._dtype))
            elif specs_allowed and isinstance(x, TensorSpec):
                key.append((x.dtype, x.shape))
                tensors.append(None)
                leaves.append(pos)
                specs.append((x.shape, x.dtype))
            else:
                key.append(_static_key(x))
        k = tuple(key)
        hit = self._cache.get(k)
        if hit is None:
            with self._lock:
                hit = self._cache.get(k)
                if hit is None:
                    trace_specs = [TensorSpec(shape, dt) for shape, dt in specs]
                    static = tuple(part for part, x in zip(key[1:], flat) if not _is_tensor_leaf(x, specs_allowed))
                    static = (key[0], *static)
                    hit = self._general_trace(static, trace_specs) if self.reduce_retracing else None
                    if hit is None:
                        if self.reduce_retracing:
                            trace_specs = self._relaxed(static, trace_specs)
                        self._note_trace()
                        cf = _trace(self.__name__, self.python_function, args, kwargs, trace_specs, leaves)
                        cf._trace_key = static
                        hit = (cf, leaves)
                        if self.reduce_retracing:
                            self._general.append((static, trace_specs, hit))
                    self._cache[k] = hit
        if fast is not None:
            if len(self._fast) >= 256:  # Python values changing on every call must not grow it
                self._fast.clear()
            self._fast[fast[0]] = hit[0]
        return hit[0], tensors, variables

    def _general_trace(
        self, static: tuple[Any, ...], specs: list[TensorSpec]
    ) -> tuple[ConcreteFunction, list[int]] | None:
        """A trace (made with relaxed shapes) whose specs accept ``specs``, if any."""
        for st, general, hit in self._general:
            if st == static and len(general) == len(specs) and all(g.is_compatible_with(s) for g, s in zip(general, specs)):
                return hit
        return None

    def _relaxed(self, static: tuple[Any, ...], specs: list[TensorSpec]) -> list[TensorSpec]:
        """``specs`` with None for every dimension in which an earlier trace of the same
        static arguments, dtypes and ranks differs (TensorFlow's reduce_retracing)."""
        dims = [list(s.shape) if s.shape is not None else None for s in specs]
        for st, general, _ in self._general:
            if st != static or len(general) != len(specs):
                continue
            if all(g.dtype is s.dtype and g.rank == s.rank and g.rank is not None for g, s in zip(general, specs)):
                for d, g in zip(dims, general):
                    for j, size in enumerate(g.shape or ()):
                        if d is not None and d[j] != size:
                            d[j] = None
        return [TensorSpec(None if d is None else tuple(d), s.dtype) for d, s in zip(dims, specs)]

    def _with_signature(
        self, args: Any, kwargs: Any, specs_allowed: bool, label_key: Any = None
    ) -> tuple[ConcreteFunction, list[Tensor]]:
        sig = self.input_signature
        assert sig is not None
        if specs_allowed and not args and not kwargs:
            args = tuple(sig)  # get_concrete_function(): the signature's own trace
        if kwargs or len(args) != len(sig):
            raise InvalidArgumentError(
                f"ok.function {self.__name__!r} has an input_signature of {len(sig)} tensors and takes exactly "
                f"{len(sig)} positional arguments, got {len(args)} positional and {len(kwargs)} keyword arguments"
            )
        if _loose_key(tuple(args)) != _loose_key(tuple(sig)):
            raise InvalidArgumentError(
                f"ok.function {self.__name__!r}: the arguments are not nested as its input_signature is: "
                f"expected {_nesting(tuple(sig))}, got {_nesting(tuple(args))}"
            )
        flat = _flatten_args(tuple(args))[0]
        tensors = [] if specs_allowed and all(isinstance(a, TensorSpec) for a in flat) else flat
        key = ("signature", label_key)
        hit = self._cache.get(key)
        if hit is None:
            with self._lock:
                hit = self._cache.get(key)
                if hit is None:
                    self._note_trace()
                    specs = _flatten_args(tuple(sig))[0]
                    positions = list(range(len(specs)))
                    cf = _trace(self.__name__, self.python_function, tuple(sig), {}, specs, positions)
                    cf._trace_key = key
                    hit = self._cache[key] = (cf, positions)
        return hit[0], tensors

    def _note_trace(self) -> None:
        self.tracing_count += 1
        if self.tracing_count > MAX_RETRACES:
            warnings.warn(
                f"ok.function {self.__name__!r} has been traced {self.tracing_count} times (each new input dtype or "
                "shape, and each new Python argument value, traces again, which is slow). Pass tensors rather than "
                "Python numbers for values that change, and give an input_signature with None for dimensions that "
                "vary, or reduce_retracing=True.",
                RetracingWarning, stacklevel=4,
            )

    @property
    def concrete_functions(self) -> list[ConcreteFunction]:
        """Every trace so far, oldest first (each once: with reduce_retracing one trace
        serves many signatures)."""
        seen: dict[int, ConcreteFunction] = {}
        for cf, _ in self._cache.values():
            seen.setdefault(id(cf), cf)
        return list(seen.values())


def _is_tensor_leaf(x: Any, specs_allowed: bool) -> bool:
    """Whether a flat argument is a tensor of the signature (its key part is its spec; a
    Variable's key part, its spec and alias index, is static)."""
    if isinstance(x, Variable):
        return False
    return isinstance(x, (Tensor, np.ndarray)) or (specs_allowed and isinstance(x, TensorSpec))


_ATOMS = frozenset({int, bool, str, bytes, type(None)})


def _variable_key(v: Variable, seen: list[Variable]) -> tuple[Any, ...]:
    """A Variable argument's part of the key: its dtype, shape and backend, and which earlier
    Variable argument it is (a trace where two arguments are one Variable is another trace).
    Appends ``v`` to ``seen`` when it is new."""
    j = next((i for i, w in enumerate(seen) if w is v), None)
    if j is None:
        j = len(seen)
        seen.append(v)
    return ("variable", v._dtype, v._value.shape, v._backend.name, j)


def _fast_key(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[Tensor], list[Variable]] | None:
    """The signature key of the usual call, positional tensors, Variables and Python atoms
    only, without building the nest: (key, tensors, variables), or None for anything else."""
    key: list[Any] = []
    tensors: list[Tensor] = []
    variables: list[Variable] = []
    for a in args:
        c = a.__class__
        if c is Tensor:
            key.append((a._dtype, a._value.shape))
            tensors.append(a)
        elif c in _ATOMS:
            key.append((c, a))
        elif c is float:
            key.append((c, a.hex()))
        elif c is Variable and not a._borrowed:  # an input of the trace, fed on each call
            key.append(_variable_key(a, variables))
        elif isinstance(a, (Tensor, list, tuple, dict, np.ndarray, TensorSpec)):
            return None
        else:  # a model, an optimizer: static, as in the general key
            key.append(_static_key(a))
    return tuple(key), tensors, variables


def _loose_key(x: Any) -> Any:
    """A nest's structure, lists and tuples alike (an argument list may stand for a tuple of specs)."""
    if isinstance(x, dict):
        return ("dict", tuple((k, _loose_key(x[k])) for k in sorted(x, key=repr)))
    if isinstance(x, (list, tuple)) and not isinstance(x, Tensor):
        return ("seq", tuple(_loose_key(v) for v in x))
    return None


def _nesting(x: Any) -> str:
    """A nest's shape for an error message: its lists, tuples and dicts, '*' for a leaf."""
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_nesting(x[k])}" for k in sorted(x, key=repr)) + "}"
    if isinstance(x, (list, tuple)) and not isinstance(x, Tensor):
        inner = ", ".join(_nesting(v) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
    return "*"


def _structure_key(x: Any) -> Any:
    if isinstance(x, dict):
        return ("dict", tuple((k, _structure_key(x[k])) for k in sorted(x, key=repr)))
    if isinstance(x, (list, tuple)) and not isinstance(x, Tensor):
        return (type(x), tuple(_structure_key(v) for v in x))
    return None


def function(
    fn: Callable[..., Any] | None = None, *, input_signature: Sequence[Any] | None = None,
    name: str | None = None, reduce_retracing: bool = False,
) -> Any:
    """``ok.function``: trace ``fn`` into a graph per input signature and replay it.

    Use as ``@ok.function``, ``@ok.function(input_signature=[...])`` or
    ``ok.function(fn)``.  ``reduce_retracing=True``: a call differing from an
    earlier trace only in tensor dimensions traces once more with those
    dimensions unknown, and that trace serves every such call (tf.function's
    option of that name).  See docs/functions.md.
    """
    if fn is None:
        return lambda f: Function(f, input_signature, name, reduce_retracing)
    return Function(fn, input_signature, name, reduce_retracing)


# ---------------------------------------------------------------- replay


#: Bumped when kernels or plugins change: plans bound before are bound again (the
#: engine drops its cached signatures then too).
_GENERATION = [0]


def _kernels_changed() -> None:
    _GENERATION[0] += 1


kernel_registry.on_change(_kernels_changed)
plugins.on_change(_kernels_changed)


class _Plan:
    """One graph bound to one backend: the compiled replay and what the tape path needs."""

    __slots__ = ("backend", "replay", "steps", "consts", "lines", "generation")

    def __init__(
        self, backend: Backend, replay: Callable[..., Any], steps: list[Any], consts: list[Tensor], lines: dict[int, int],
        generation: int,
    ) -> None:
        self.backend = backend
        self.replay = replay
        self.steps = steps
        self.consts = consts
        self.lines = lines
        self.generation = generation


class ConcreteFunction:
    """One graph, callable: ``cf(*tensors)`` runs it on the active backend.

    Any valid :class:`Graph` works, traced, built by hand or loaded from disk.
    Positional arguments are the graph's inputs in order (tensors, or host data
    converted to the input's dtype); the result is nested as
    ``graph.output_structure`` says.
    """

    def __init__(self, graph: Graph, name: str | None = None, structure: Any = None, validate: bool = True) -> None:
        if not isinstance(graph, Graph):
            raise OpTypeError(f"ConcreteFunction: expected an opkernel Graph, got {type(graph).__name__}")
        if validate:
            graph.validate()
        self.graph = graph
        self.name = name or "graph"
        self._structure = graph.output_structure if structure is None else structure
        self._plans: dict[Backend, _Plan] = {}
        self._lock = threading.Lock()
        #: What besides its tensors' specs an ok.function keyed this trace by (Python
        #: arguments, nesting, kernel labels); None for a graph run directly.
        self._trace_key: Any = None
        #: For a trace of an ok.function given Variables: per distinct Variable argument, the
        #: variable slot it feeds (None: the function did not use it); each call passes them.
        self._arg_slots: list[int | None] | None = None
        self.live_nodes = _live_nodes(graph)
        self._out_dtypes = [s.dtype for s in graph.output_specs]
        #: Per input: its dtype, and its shape as a tuple when fully known (compared as is),
        #: else a _PartialShape (compared dimension by dimension).
        self._in_checks = [
            (s.dtype, s.shape if s.is_fully_defined() else _PartialShape(s.shape)) for s in graph.inputs
        ]

    def __repr__(self) -> str:
        ins = ", ".join(str(s) for s in self.graph.inputs)
        return f"<ConcreteFunction {self.name}({ins}): {len(self.graph.nodes)} nodes>"

    @property
    def inputs(self) -> list[TensorSpec]:
        return self.graph.inputs

    @property
    def outputs(self) -> list[TensorSpec]:
        return self.graph.output_specs

    def __call__(self, *args: Any) -> Any:
        return self._call_flat(list(args))

    def bound(self, variables: Sequence[Variable]) -> ConcreteFunction:
        """This trace with its Variable arguments bound to ``variables`` (which it then
        captures, as a trace captures the Variables its function closes over)."""
        if self._arg_slots is None:
            return self
        graph = self.graph
        captured = list(graph.variables)
        names = list(graph.variable_names)
        for j, k in enumerate(self._arg_slots):
            if k is not None:
                captured[k] = variables[j]
                names[k] = variables[j].name or names[k]
        g = Graph(inputs=graph.inputs, nodes=graph.nodes, outputs=graph.outputs, output_structure=graph.output_structure,
                  constants=graph.constants, variables=captured, variable_names=names)
        cf = ConcreteFunction(g, name=self.name, structure=self._structure, validate=False)
        cf._trace_key = self._trace_key
        return cf

    # -- calling -----------------------------------------------------------------

    def _call_flat(self, args: list[Any], variables: Sequence[Variable] = ()) -> Any:
        graph = self.graph
        fed: list[Variable] = []
        if self._arg_slots is not None:
            fed = self._fed(variables)
        if engine._TRACER.get() is not None:
            return _rebuild(self._structure, self._inline(args, fed))
        be = engine._ACTIVE.get() or engine._default_backend()
        if len(args) != len(graph.inputs):
            raise InvalidArgumentError(
                f"function {self.name!r} takes {len(graph.inputs)} tensors "
                f"({', '.join(str(s) for s in graph.inputs)}), got {len(args)}"
            )
        tensors = args
        for x, (dt, shape) in zip(args, self._in_checks):  # the usual call: tensors that fit, here
            if x.__class__ is not Tensor or x._dtype is not dt or x._backend is not be or (
                x._value.shape != shape if shape.__class__ is tuple else not _shape_fits(shape, x._value.shape)
            ):
                tensors = [self._checked(k, x, be) for k, x in enumerate(args)]
                break
        plan = self._plans.get(be)
        if plan is None or plan.generation != _GENERATION[0]:
            plan = self._bind(be)
        for v, slot in zip(fed, self._arg_slots or ()):
            if slot is not None and v._backend is not be:
                raise InvalidArgumentError(
                    f"function {self.name!r} is given variable {v.name!r}, which lives on backend {v.backend!r}, "
                    f"but runs on {be.name!r}; make the variable on {be.name!r}"
                )
        if (RECORDING[0] and active_tapes()) or engine._PROFILERS:
            flat = self._run_nodes(plan, tensors, fed)
        else:
            try:
                values = plan.replay(*[t._value for t in tensors], *fed)
            except Exception as e:
                raise self._failed(e, plan) from e
            flat = [v if v.__class__ is Tensor else Tensor(v, dt, be) for v, dt in zip(values, self._out_dtypes)]
        return _rebuild(self._structure, flat)

    def _fed(self, variables: Sequence[Variable]) -> list[Variable]:
        """The distinct Variable arguments of a call of this trace, checked against its slots."""
        slots = self._arg_slots
        assert slots is not None
        if len(variables) != len(slots):
            raise InvalidArgumentError(
                f"function {self.name!r} is a trace that takes {len(slots)} Variable argument(s); call the "
                "ok.function, or bind the Variables with get_concrete_function(...) or .bound(variables)"
            )
        return list(variables)

    def _variable(self, index: int, fed: Sequence[Variable]) -> Any:
        """Variable slot ``index``: the captured Variable, or the one fed by this call."""
        v = self.graph.variables[index]
        return fed[v.index] if isinstance(v, _VariableArgument) else v

    def _checked(self, k: int, arg: Any, be: Backend) -> Tensor:
        spec = self.graph.inputs[k]
        x: Tensor = arg if isinstance(arg, Tensor) else engine.to_tensor(arg, spec.dtype, be.name)
        if isinstance(x, SymbolicTensor):
            raise InvalidArgumentError(f"function {self.name!r}: input {k} is a placeholder of another trace")
        if x._dtype is not spec.dtype or not _shape_fits(spec.shape, x._value.shape):
            raise InvalidArgumentError(
                f"function {self.name!r}: input {k} must be {spec.dtype.name} of shape {_shape_text(spec.shape)}, "
                f"got {x._dtype.name} of shape {_shape_text(tuple(x._value.shape))}"
            )
        if x._backend is not be:
            if engine.config.transfer_policy == "copy":
                engine.config.transfers += 1
                return engine.transfer(x, be.name)
            raise InvalidArgumentError(
                f"function {self.name!r}: input {k} lives on backend {x.backend!r} but the function runs on "
                f"{be.name!r}. Move it with x.to({be.name!r}), or set ok.config.transfer_policy = 'copy'."
            )
        return x


    def _failed(self, e: Exception, plan: _Plan) -> Exception:
        """The error of a failed replay, naming the node that failed."""
        tb = e.__traceback__
        node = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == f"<opkernel replay {self.name}>":
                node = plan.lines.get(tb.tb_lineno)
            tb = tb.tb_next
        if node is None:
            return e
        return self._node_error(e, plan.backend, node)

    def _node_error(self, e: Exception, be: Backend, node: int) -> Exception:
        """``e`` (raised by node ``node``'s kernel) as the engine reports it, led by the
        function, the node and the op; the same class, so callers catch what they would."""
        op = self.graph.nodes[node].op
        err = engine._translated(e, be, op)
        where = f"function {self.name!r}, node {node} (op {op!r}): "
        if isinstance(err, OpkernelError):
            err = copy.copy(err)
            err.message = where + err.message
            err.args = (err.message,)
            return err
        return InvalidArgumentError(f"{where}{type(e).__name__}: {e}", op=op)

    def _inline(self, args: list[Any], fed: Sequence[Variable] = ()) -> list[Tensor]:
        """Called while another function is traced: every live node is called as an op,
        so the tracer records it into the graph being traced."""
        graph = self.graph
        if len(args) != len(graph.inputs):
            raise InvalidArgumentError(f"function {self.name!r} takes {len(graph.inputs)} tensors, got {len(args)}")
        values: dict[tuple[int, int], Any] = {}
        consts: list[Any] = list(graph.constants)

        def get(e: Edge) -> Any:
            if e.kind == "node":
                return values[(e.index, e.output)]
            if e.kind == "input":
                return args[e.index]
            if e.kind == "const":
                return consts[e.index]
            return self._variable(e.index, fed)

        for i in self.live_nodes:
            node = graph.nodes[i]
            op = engine.op_handle(node.op)
            lengths = engine._input_lengths(op.op_def, node.attrs)
            grouped = engine._group(op.op_def, [get(e) for e in node.inputs], lengths)
            result = engine.execute(op, grouped, dict(node.attrs), node.label)
            for k, t in enumerate(_flat_result(result)):
                values[(i, k)] = t
        identity = engine.op_handle("Identity")
        return [  # a variable output is its value now, as a replay returns it: not the variable
            engine.execute(identity, [get(e)], {}) if e.kind == "var" else
            engine.to_tensor(get(e)) if e.kind == "const" else get(e)
            for e in graph.outputs
        ]

    def _run_nodes(self, plan: _Plan, tensors: list[Tensor], fed: Sequence[Variable] = ()) -> list[Tensor]:
        """The replay node by node through the engine's signature calls, so tapes record
        every op (and profilers see it)."""
        graph, be = self.graph, plan.backend
        values: dict[tuple[int, int], Tensor] = {}

        def get(e: Edge) -> Tensor:
            if e.kind == "node":
                return values[(e.index, e.output)]
            if e.kind == "input":
                return tensors[e.index]
            if e.kind == "const":
                return plan.consts[e.index]
            return self._variable(e.index, fed)  # type: ignore[no-any-return]

        for i, sig in plan.steps:
            node = graph.nodes[i]
            ins = [get(e) for e in node.inputs]
            try:
                result = engine._profiled(node.op, sig, ins, be) if engine._PROFILERS else sig.call(*ins)
            except Exception as err:
                raise self._node_error(err, be, i) from err
            for k, t in enumerate(_flat_result(result)):
                values[(i, k)] = t
        out: list[Tensor] = []
        for e in graph.outputs:
            t = get(e)
            out.append(Tensor(t._value, t._dtype, t._backend) if isinstance(t, Variable) else t)
        return out

    # -- binding -----------------------------------------------------------------

    def _bind(self, be: Backend) -> _Plan:
        with self._lock:
            plan = self._plans.get(be)
            if plan is None or plan.generation != _GENERATION[0]:
                plan = self._plans[be] = _compile(self, be)
            return plan


class _PartialShape:
    """A spec's shape with unknown dimensions (never a tuple, so never equal to a shape)."""

    __slots__ = ("dims",)

    def __init__(self, dims: tuple[int | None, ...] | None) -> None:
        self.dims = dims


def _shape_fits(spec: Any, shape: tuple[int, ...]) -> bool:
    if isinstance(spec, _PartialShape):
        spec = spec.dims
    if spec is None:
        return True
    return len(spec) == len(shape) and all(a is None or a == b for a, b in zip(spec, shape))


def _rebuild(structure: Any, flat: list[Tensor]) -> Any:
    if structure is None:
        return None
    if isinstance(structure, int):
        return flat[structure]
    if isinstance(structure, dict):
        return {k: _rebuild(v, flat) for k, v in structure.items()}
    if isinstance(structure, tuple):
        if len(structure) == 3 and structure[0] == "namedtuple" and isinstance(structure[1], type):
            return structure[1](*[_rebuild(v, flat) for v in structure[2]])
        return tuple(_rebuild(v, flat) for v in structure)
    return [_rebuild(v, flat) for v in structure]


def _live_nodes(graph: Graph) -> list[int]:
    """Nodes an output or a stateful op (a Ref update, a random op) depends on, in order."""
    from . import op_registry, plugins

    plugins.ensure_loaded()
    live: set[int] = set()
    stack = [e.index for e in graph.outputs if e.kind == "node"]
    for i, node in enumerate(graph.nodes):
        try:
            stateful = op_registry.get_op_def(node.op).is_stateful
        except OpkernelError:
            stateful = True  # reported when the node is bound
        if stateful:
            stack.append(i)
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        stack.extend(e.index for e in graph.nodes[i].inputs if e.kind == "node")
    return sorted(live)


def _node_signature(graph: Graph, i: int, be: Backend, fname: str) -> engine._Signature:
    """Node ``i``'s kernel signature on ``be``: its attrs checked against the OpDef,
    its input dtypes against the specs of its edges; from the op handle's cache."""
    node = graph.nodes[i]
    where = f"function {fname!r}, node {i} (op {node.op!r})"
    op = engine.op_handle(node.op)
    op_def = op.op_def
    bound: dict[str, Any] = {}
    for name, value in node.attrs.items():
        try:
            bound[name] = op_def.coerce_attr(name, value)
        except OpkernelError as err:
            raise GraphError(f"{where}: {err}", op=node.op, node=i) from err
    for attr in op_def.attrs:
        if attr.name not in bound:
            if not attr.has_default:
                raise GraphError(f"{where}: missing attr {attr.name!r} of type {attr.type}", op=node.op, node=i)
            bound[attr.name] = attr.default
    lengths = engine._input_lengths(op_def, bound)
    in_dtypes = [dt for arg, n in zip(op_def.inputs, lengths) for dt in engine._arg_dtypes(arg, n, bound)]
    for k, (e, want) in enumerate(zip(node.inputs, in_dtypes)):
        got = graph.spec_of(e).dtype
        if got is not want:
            raise GraphError(f"{where}: input {k} ({e}) is {got.name}, the op expects {want.name}", op=node.op, node=i)
    out_dtypes, _ = engine._output_dtypes(op_def, bound)
    for k, (spec, want) in enumerate(zip(node.outputs, out_dtypes)):
        if spec.dtype is not want:
            raise GraphError(f"{where}: output {k} is declared {spec.dtype.name}, the op gives {want.name}", op=node.op, node=i)
    key = (be, node.label, *in_dtypes, *engine._hashable_items(bound))
    sig = op.cache.get(key)
    if sig is None:
        with op.build_lock:
            sig = op.cache.get(key)
            if sig is None:
                generation = op.generation
                sig = engine._build_signature(op, bound, be, node.label)
                with engine._cache_lock:
                    if op.generation == generation:
                        op.cache[key] = sig
    return sig


def _statically_small(graph: Graph) -> set[int]:
    """Nodes whose outputs graph shape inference sizes exactly (from the input specs and
    the constants) at most ``CHEAP_BYTES`` in all: the engine's output-size guard (of
    Fill, Reshape, Pad, ...) lets such calls through, so their replay skips it.  A graph
    that shape inference refuses keeps every guard (its replay reports the error)."""
    from ._bounds import CHEAP_BYTES  # only graphs are sized here

    try:
        shapes = infer_shapes(graph)
    except OpkernelError:
        return set()
    small: set[int] = set()
    for i, specs in enumerate(shapes):
        total = 0
        for spec in specs:
            if not spec.is_fully_defined():
                break
            total += math.prod(d for d in spec.shape or () if d is not None) * spec.dtype.size
        else:
            if total <= CHEAP_BYTES:
                small.add(i)
    return small


def _outputs(result: Any, n: int, op_def: Any) -> Any:
    """A several-output kernel's result, checked: a tuple or list of ``n`` values."""
    if (result.__class__ is tuple or result.__class__ is list) and len(result) == n:
        return result
    engine._flatten_outputs(op_def, result, [None] * n)  # raises the kernel-contract error
    return result


def _compile(cf: ConcreteFunction, be: Backend) -> _Plan:
    """Bind every live node on ``be`` and generate the straight-line replay."""
    graph, fname = cf.graph, cf.name
    for k, v in enumerate(graph.variables):
        if isinstance(v, _VariableArgument):
            continue  # fed by each call, checked there
        if v._backend is not be:
            raise InvalidArgumentError(
                f"function {fname!r} captures variable {graph.variable_names[k]!r}, which lives on backend "
                f"{v.backend!r}, but runs on {be.name!r}; make the variable on {be.name!r} (or trace the function "
                "there)"
            )
    generation = _GENERATION[0]  # read first: a change while binding makes the plan stale at once
    consts = [Tensor(be.from_numpy(c), as_dtype(c.dtype), be) for c in graph.constants]
    small = _statically_small(graph)
    steps = []
    for i in cf.live_nodes:
        try:
            steps.append((i, _node_signature(graph, i, be, fname)))
        except GraphError:
            raise
        except OpkernelError as err:  # no kernel here: the engine's error, led by the node
            raise cf._node_error(err, be, i) from err
    native: Any = (be.array_types or (None,))[0]
    env: dict[str, Any] = {
        "Tensor": Tensor, "be": be, "conv": be.as_output, "native": native, "_flat": _flat_result, "_outputs": _outputs, "_update_lock": update_lock,
    }
    for k, c in enumerate(consts):
        env[f"c{k}"] = c._value
    for k, v in enumerate(graph.variables):
        if not isinstance(v, _VariableArgument):
            env[f"v{k}"] = v
    last_use: dict[str, int] = {}
    names: dict[tuple[int, int], str] = {}
    body: list[tuple[str, int | None]] = []

    def ref(e: Edge, native_value: bool) -> str:
        if e.kind == "node":
            return names[(e.index, e.output)]
        if e.kind == "input":
            return f"x{e.index}"
        if e.kind == "const":
            return f"c{e.index}"
        return f"v{e.index}._value" if native_value else f"v{e.index}"

    groups: list[tuple[int, list[str], list[str]]] = []
    for step, (i, sig) in enumerate(steps):
        node = graph.nodes[i]
        outs = [f"a{i}_{k}" for k in range(len(node.outputs))]
        for k, n in enumerate(outs):
            names[(i, k)] = n
        kdef = sig.kernel
        simple = (
            type(sig) is engine._Signature and kdef.backend == be.name  # not a fallback to another backend
            and not kdef.is_class and not kdef.is_generic and bool(outs)
            and (i in small or not output_size_inputs(sig.op_def.shape_fn))
            and not (kdef.host_memory and not be.host_memory_is_native)
            and not any(a.is_list for a in sig.op_def.inputs)
            and not any(a.is_list for a in sig.op_def.outputs)
        )
        code: list[str] = []
        if simple:
            # The kernel called directly, as the engine's compiled fast calls do: a Ref
            # input's variable is made private first (copy-on-write) and its version bumped.
            fn = kdef.impl
            kw = engine.kernel_kwargs(fn, sig.attrs)
            env[f"f{i}"], env[f"k{i}"], env[f"m{i}"] = fn, kw, sig.op_def
            refs = [node.inputs[p].index for p in sig.refs]
            update = [f"v{r}._unshare()" for r in refs]
            args = [ref(e, True) for e in node.inputs] + ([f"**k{i}"] if kw else [])
            call = f"f{i}({', '.join(args)})"
            if len(outs) == 1:
                update.append(f"{outs[0]} = {call}")
            else:
                update.append(f"{', '.join(outs)}, = _outputs({call}, {len(outs)}, m{i})")
            update += [f"v{r}._version += 1" for r in refs]
            if refs:  # an update is atomic per variable, as in eager calls (tensor.update_lock)
                code.append(f"with _update_lock({', '.join(f'v{r}' for r in refs)}):")
                update = ["    " + line for line in update]
            code += update
            for k, o in enumerate(outs):
                dt = sig.out_dtypes[k]
                env[f"d{i}_{k}"], env[f"n{i}_{k}"] = dt, dt.np
                code.append(f"if type({o}) is not native or {o}.dtype is not n{i}_{k}: {o} = conv({o}, d{i}_{k})")
        else:
            # Anything else (Ref updates, class and generic kernels, list arguments, several
            # outputs, ops sized by input values) goes through the signature's own call.
            env[f"s{i}"] = sig.call
            env[f"t{i}"] = [graph.spec_of(e).dtype for e in node.inputs]
            wrapped = [ref(e, False) if e.kind == "var" else f"Tensor({ref(e, True)}, t{i}[{k}], be)" for k, e in enumerate(node.inputs)]
            call = f"_flat(s{i}({', '.join(wrapped)}))"
            if outs:
                code.append(f"{', '.join(outs)}, = [t._value for t in {call}]")
            else:
                code.append(call)
        groups.append((i, code, outs))
        for e in node.inputs:
            if e.kind == "node":
                last_use[names[(e.index, e.output)]] = step
    returns: list[str] = []
    for k, e in enumerate(graph.outputs):
        if e.kind == "var":
            returns.append(f"Tensor(v{e.index}._value, v{e.index}._dtype, be)")
        else:
            returns.append(ref(e, True))
        if e.kind == "node":
            last_use[names[(e.index, e.output)]] = len(steps)
    dead_after: dict[int, list[str]] = {}
    for name, s_last in last_use.items():
        dead_after.setdefault(s_last, []).append(name)
    params = [f"x{k}" for k in range(len(graph.inputs))]
    # then each distinct Variable argument, in order (one the function does not use is a dummy)
    params += [f"v{k}" if k is not None else f"_unused{j}" for j, k in enumerate(cf._arg_slots or ())]
    lines = [f"def replay({', '.join(params)}):"]
    line_nodes: dict[int, int] = {}
    for step, (i, code, outs) in enumerate(groups):
        for text in code:
            lines.append("    " + text)
            line_nodes[len(lines)] = i
        # Values no later step reads are dropped at once: a view of a variable held past its
        # last use would make the next in-place update copy the variable.  (This step's own
        # outputs, not a scan of every name: that made the first call quadratic in nodes.)
        gone = dead_after.get(step, []) + [n for n in outs if n not in last_use]
        if gone:
            lines.append(f"    del {', '.join(gone)}")
    lines.append(f"    return ({''.join(r + ', ' for r in returns)})")
    filename = f"<opkernel replay {fname}>"
    namespace = dict(env)
    exec(compile("\n".join(lines) + "\n", filename, "exec"), namespace)
    return _Plan(be, namespace["replay"], steps, consts, line_nodes, generation)


# ---------------------------------------------------------------- shape inference


def infer_shapes(graph: Any, input_specs: Sequence[TensorSpec] | None = None) -> list[list[TensorSpec]]:
    """Every node's output specs (partial shapes) for ``input_specs`` (default: the graph's own).

    ``graph`` is a Graph, a ConcreteFunction, or an ``ok.function`` (then
    ``input_specs`` are required and pick, or trace, its concrete function).
    A mismatch raises ShapeError naming the node, the op and the shapes.
    """
    if isinstance(graph, Function):
        if input_specs is None:
            raise InvalidArgumentError("infer_shapes(function): give input_specs (a TensorSpec per argument)")
        graph = graph.get_concrete_function(*input_specs)
    if isinstance(graph, ConcreteFunction):
        graph = graph.graph
    if not isinstance(graph, Graph):
        raise OpTypeError(f"infer_shapes: expected a Graph, ConcreteFunction or ok.function, got {type(graph).__name__}")
    graph.validate()
    if input_specs is not None and len(input_specs) != len(graph.inputs):
        raise InvalidArgumentError(f"infer_shapes: the graph has {len(graph.inputs)} inputs, got {len(input_specs)} specs")
    specs = list(graph.inputs) if input_specs is None else [
        s if isinstance(s, TensorSpec) else TensorSpec(s, graph.inputs[k].dtype) for k, s in enumerate(input_specs)
    ]
    for k, (s, g) in enumerate(zip(specs, graph.inputs)):
        if s.dtype is not g.dtype:
            raise InvalidArgumentError(f"infer_shapes: input {k} is {g.dtype.name}, got a spec of {s.dtype.name}")
    from . import op_registry

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


class _FunctionModule(types.ModuleType):
    """This module, callable: ``ok.function`` is both the decorator and the module
    holding ``ConcreteFunction`` (``opkernel.function.ConcreteFunction``), so importing
    the module can never shadow the decorator on the package."""

    def __call__(
        self, fn: Callable[..., Any] | None = None, *, input_signature: Sequence[Any] | None = None,
        name: str | None = None, reduce_retracing: bool = False,
    ) -> Any:
        return function(fn, input_signature=input_signature, name=name, reduce_retracing=reduce_retracing)


sys.modules[__name__].__class__ = _FunctionModule
