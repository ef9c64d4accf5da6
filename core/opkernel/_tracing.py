"""Tracing for ``ok.function``: the tracer the runtime hands every op call to while a
function is traced (``engine.tracing``), which binds the call as an eager one would,
runs its shape function and records a graph node; and the structure of a function's
arguments and results."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import engine
from ._replay import ConcreteFunction
from ._symbolic import SymbolicTensor, _run_shapes, _VariableArgument
from .autodiff import RECORDING, record_op, stop_recording
from .backend import Backend
from .errors import InvalidArgumentError, OpkernelError
from .graph import Edge, Graph, Node, TensorSpec
from .tensor import Tensor, Variable

#: Calls whose inputs are all constants are run at trace time when their outputs have at
#: most this many elements in all (and the op is stateless): the result becomes a constant.
FOLD_ELEMENTS = 1 << 12

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
            label = engine.label_for(op.name)
        tensors, bound = engine.bind(op_def, inputs, attrs, be)
        constant = [self.is_constant(t) for t in tensors]
        specs = [t._spec if isinstance(t, SymbolicTensor) else TensorSpec(tuple(t._value.shape), t._dtype) for t in tensors]
        # Shape functions may read small constant inputs (Reshape's shape, Pad's paddings).
        values = [self.host(t) if c and t.size <= FOLD_ELEMENTS else None for t, c in zip(tensors, constant)]
        index = len(self.nodes)
        where = f"tracing {self.name!r}: node {index} (op {op_def.name!r})"
        shapes = _run_shapes(op_def, specs, values, bound, where)
        out_dtypes, out_lengths = engine.output_dtypes(op_def, bound)
        out_specs = [TensorSpec(s, dt) for s, dt in zip(shapes, out_dtypes)]
        if all(constant) and self._foldable(op_def, out_specs):
            with engine.not_tracing():
                return engine.execute(op, inputs, attrs, label)
        edges = [self.edge_of(t) for t in tensors]
        node = Node(op_def.name, dict(bound), edges, out_specs, getattr(op_def, "provider", None), label)
        self.nodes.append(node)
        if any(a.is_ref for a in op_def.inputs):
            flags = [a.is_ref for a, n in zip(op_def.inputs, engine.input_lengths(op_def, bound)) for _ in range(n or 1)]
            for t, is_ref in zip(tensors, flags):
                if is_ref and isinstance(t, Variable):
                    t._version += 1
                    self.bumped[id(t)] = (t, self.bumped.get(id(t), (t, 0))[1] + 1)
        outs: list[Tensor] = [SymbolicTensor(self, Edge("node", index, k), s) for k, s in enumerate(out_specs)]
        if RECORDING[0]:
            record_op(op_def, bound, tensors, outs)  # a tape inside the function: its gradient is traced too
        return engine.packer(op_def, out_lengths)(outs)

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
    try:
        with engine.tracing(tracer):
            with stop_recording():  # tapes outside the function record its replay, not its trace
                result = fn(*t_args, **t_kwargs)
            outputs: list[Edge] = []
            structure, py_structure = _output_structure(tracer, result, outputs)
    finally:
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
