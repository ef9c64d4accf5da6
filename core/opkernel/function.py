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
``Signature``) and the whole graph is compiled into one straight-line Python
function over native arrays; nodes that contribute neither to an output nor to
a stateful op (a ``Ref`` update) are pruned.  While a GradientTape records,
the replay runs node by node through the engine's signature calls instead, so
the tape records every op and can differentiate through the function.
"""

from __future__ import annotations

import sys
import threading
import types
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from . import engine
from ._replay import ConcreteFunction
from ._symbolic import SymbolicTensor, graph_shapes
from ._tracing import FOLD_ELEMENTS, _flatten_args, _Identity, _is_argument_variable, _static_key, _trace
from .dtypes import DType
from .errors import InvalidArgumentError, OpTypeError, SymbolicTensorError
from .graph import Graph, TensorSpec
from .tensor import Tensor, Variable

__all__ = [
    "function", "Function", "ConcreteFunction", "TensorSpec", "SymbolicTensor", "SymbolicTensorError",
    "RetracingWarning", "infer_shapes", "MAX_RETRACES", "FOLD_ELEMENTS",
]

#: Traces of one Function after which each further trace warns (tf.function's threshold).
MAX_RETRACES = 5


class RetracingWarning(UserWarning):
    """A Function was traced more than ``MAX_RETRACES`` times."""


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
        if engine.TRACER.get() is not None:
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
        labels = engine.LABELS.get()  # a trace records the kernel labels in force: they key it too
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
    return graph_shapes(graph, input_specs)


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
