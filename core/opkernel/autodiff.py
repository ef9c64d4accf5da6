"""Reverse-mode autodiff on a tape, backend independent.

While a ``GradientTape`` is active, every op call with a watched input is
recorded (its inputs, outputs, attrs and the backend it ran on).  ``tape.gradient``
walks the records backwards, calling the gradient functions from the gradient
registry; those are written with opkernel ops, and each runs on the backend its
forward op ran on (as TensorFlow colocates a gradient with its op), whatever
backend is active at ``gradient()``; an outer tape records them too
(higher-order gradients).

Placement: the gradient of a tensor lives on that tensor's backend.  The seed of
a target is made on the target's backend, each input's gradient is copied to the
input's backend when a gradient function returns it elsewhere, and a
``Tensor.to`` / transfer is itself recorded, its gradient copied back.  The engine
(above this module) installs how to activate a backend and copy a tensor.
"""

from __future__ import annotations

import copy
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Hashable, Iterator, Literal, Mapping, ParamSpec, Sequence, TypeVar, overload

import numpy as np

from . import gradients
from .dtypes import DType, resource
from .errors import GradientNotFoundError, InvalidArgumentError, OpkernelError
from .tensor import Tensor, Variable, ops_module as _ops

_P = ParamSpec("_P")
_R = TypeVar("_R")
_K = TypeVar("_K", bound=Hashable)

__all__ = ["GradientTape", "OpRecord", "grad", "value_and_grad", "custom_gradient", "stop_recording"]


def _no_engine(*args: Any) -> Any:
    raise RuntimeError("opkernel's runtime is not imported")  # never: importing opkernel imports it


#: Installed by the runtime (``install_placement``): make a backend the active one in
#: this context (returns a token), undo that, copy a tensor to a backend (recorded),
#: and convert host data to a tensor on the active backend.
_activate: Callable[[Any], Any] = _no_engine
_restore: Callable[[Any], None] = _no_engine
_move: Callable[[Tensor, Any], Tensor] = _no_engine
_to_tensor: Callable[[Any], Tensor] = _no_engine


def install_placement(
    activate: Callable[[Any], Any], restore: Callable[[Any], None], move: Callable[[Tensor, Any], Tensor],
    to_tensor: Callable[[Any], Tensor],
) -> None:
    """Called once by the runtime's conversion room, which owns transfers and conversion."""
    global _activate, _restore, _move, _to_tensor
    _activate, _restore, _move, _to_tensor = activate, restore, move, to_tensor


@contextmanager
def _on(backend: Any) -> Iterator[None]:
    token = _activate(backend)
    try:
        yield
    finally:
        _restore(token)

_local = threading.local()


def active_tapes() -> list[GradientTape]:
    tapes: list[GradientTape] | None = getattr(_local, "tapes", None)
    if tapes is None:
        tapes = _local.tapes = []
    return tapes


#: Number of tapes recording in any thread; the engine checks it before anything else.
RECORDING = [0]
_GRADIENTS = gradients._gradients
_counter_lock = threading.Lock()


Backward = Callable[[list[Tensor | None]], Sequence[Tensor | None]]
#: What ``record_op`` stores for a registered op: (op_def, attrs, inputs, outputs, versions).
_Raw = tuple[Any, Mapping[str, Any], Sequence[Tensor], Sequence[Tensor], tuple[tuple[int, int], ...]]


class OpRecord:
    """One recorded step, and what a gradient function receives as ``op``.

    ``backward`` is None for a registered op (its gradient is looked up when the
    tape is differentiated) and the function of a ``custom_gradient``.
    ``backend`` is the name of the backend the op ran on, where its gradient runs
    (None for a custom gradient with no tensor output: it runs where ``gradient()`` is called).
    """

    __slots__ = ("type", "op_def", "inputs", "outputs", "attrs", "backward", "needs_input_grad", "versions", "_backend")

    def __init__(
        self, name: str, op_def: Any, attrs: Mapping[str, Any], inputs: Sequence[Tensor], outputs: Sequence[Tensor],
        backward: Backward | None = None, versions: tuple[tuple[int, int], ...] | None = None, backend: Any = None,
    ) -> None:
        #: The Backend instance the op ran on.
        self._backend = backend
        self.type = name
        self.op_def = op_def
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.backward = backward
        #: One bool per input: whether the tape being differentiated wants that
        #: input's gradient (torch's ctx.needs_input_grad).  A gradient function
        #: may return None for the others and skip computing them.
        self.needs_input_grad: tuple[bool, ...] = (True,) * len(inputs)
        #: (position, version) of each Variable input when the op ran: a Variable
        #: updated in place before gradient() would make the gradient wrong.
        self.versions = _versions(inputs) if versions is None else versions

    @property
    def backend(self) -> str | None:
        """Name of the backend the recorded op ran on (where its gradient runs)."""
        return None if self._backend is None else self._backend.name

    def get_attr(self, name: str) -> Any:
        return self.attrs[name]

    def __repr__(self) -> str:
        return f"<OpRecord {self.type}>"


def _versions(inputs: Sequence[Tensor]) -> tuple[tuple[int, int], ...]:
    out: tuple[tuple[int, int], ...] = ()
    i = 0
    for x in inputs:
        if x.__class__ is Variable:
            out += ((i, x._version),)
        i += 1
    return out


def _differentiable(dtype: DType) -> bool:
    # A resource handle's gradient is its variable's (ReadVariableOp passes its gradient to
    # the handle, as in TensorFlow).
    return dtype.is_floating or dtype.is_complex or dtype.is_resource


_RESOURCE = resource

#: The handles of trainable resource variables (``ok.ResourceVariable``), by id: a tape
#: watches one when an op reads it, as it does a trainable ``Variable``.
TRAINABLE_HANDLES: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()

#: Each resource variable's handle tensor, by the id of the ``ResourceHandle`` it holds: a
#: traced function that captured the handle (a graph constant) replays with this tensor,
#: so a tape that watches the variable sees its reads there too.
HANDLE_TENSORS: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


def register_handle(handle: Tensor, trainable: bool) -> None:
    """Make ``handle`` (a scalar resource tensor of an ``ok.ResourceVariable``) the tensor
    its resource is known by to tapes and to the replays of traced functions."""
    HANDLE_TENSORS[id(handle._value[()])] = handle
    if trainable:
        TRAINABLE_HANDLES[id(handle)] = handle


def canonical_handle(value: Any, backend: Any) -> Tensor | None:
    """The registered handle tensor holding the same ``ResourceHandle`` as the host array
    ``value``, on ``backend``; None for any other array."""
    if getattr(value, "dtype", None) != object or getattr(value, "shape", None) != ():
        return None
    found = HANDLE_TENSORS.get(id(value[()]))
    if found is None or found._backend is not backend or found._value[()] is not value[()]:
        return None
    return found


def _source(x: Any) -> Any:
    """What a tape tracks for ``x``: ``x`` itself, or the tensor an object names with
    ``_ok_gradient_source`` (an ``ok.ResourceVariable``: its handle)."""
    return x if isinstance(x, Tensor) else getattr(x, "_ok_gradient_source", x)


class _ByDType(dict):  # type: ignore[type-arg]
    """dtype -> differentiable, filled on first lookup (a plain dict lookup afterwards)."""

    def __missing__(self, dtype: DType) -> bool:
        value = self[dtype] = _differentiable(dtype)
        return value


_DIFFERENTIABLE = _ByDType()


def _run_backward(record: OpRecord, output_grads: list[Tensor | None]) -> Sequence[Tensor | None]:
    """Input gradients of one recorded step (a registered gradient or a custom one)."""
    if record.backward is not None:
        result: Any = record.backward(output_grads)
    else:
        entry = _GRADIENTS.get(record.type) or gradients.get_gradient(record.type)
        if entry.fn is None:
            return [None] * len(record.inputs)
        result = entry.fn(record, *output_grads)
    if result.__class__ is not list:
        result = [result] if result is None or isinstance(result, Tensor) else list(result)
    if len(result) != len(record.inputs):
        raise InvalidArgumentError(
            f"op {record.type!r}: gradient function returned {len(result)} values for "
            f"{len(record.inputs)} tensor inputs",
            op=record.type,
        )
    return result  # type: ignore[no-any-return]


class GradientTape:
    """Records op calls for differentiation (``tf.GradientTape``).

    ``persistent=False`` releases the records after the first ``gradient()``.
    Trainable ``Variable``s used by a recorded computation are watched
    automatically unless ``watch_accessed_variables=False``.
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self.persistent = persistent
        self.watch_accessed_variables = watch_accessed_variables
        self._tracked: dict[int, Tensor] = {}
        #: OpRecords (custom gradients) and, for registered ops, the tuples
        #: ``record_op`` stores: an OpRecord is built only if backprop reaches it.
        self._entries: list[OpRecord | _Raw] = []
        self._used = False
        self._recording = False

    def __enter__(self) -> GradientTape:
        self._push()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pop()

    def _push(self) -> None:
        active_tapes().append(self)
        self._recording = True
        with _counter_lock:
            RECORDING[0] += 1

    def _pop(self) -> None:
        if self._recording:
            active_tapes().remove(self)
            self._recording = False
            with _counter_lock:
                RECORDING[0] -= 1

    @contextmanager
    def stop_recording(self) -> Iterator[None]:
        """Run the block without recording on this tape."""
        was = self._recording
        self._pop()
        try:
            yield
        finally:
            if was:
                self._push()

    def watch(self, tensor: Any) -> None:
        """Track ``tensor`` (or every tensor in a list/tuple/dict) as a source."""
        for t in map(_source, _flatten(tensor)):
            if not isinstance(t, Tensor):
                raise InvalidArgumentError(f"GradientTape.watch: expected a Tensor, got {type(t).__name__}")
            self._tracked[id(t)] = t

    def watched_variables(self) -> list[Variable]:
        return [t for t in self._tracked.values() if isinstance(t, Variable)]

    def _is_tracked(self, t: Tensor) -> bool:
        if id(t) in self._tracked:
            return True
        if self.watch_accessed_variables and (
            (type(t) is Variable and t.trainable) or (t._dtype.is_resource and TRAINABLE_HANDLES.get(id(t)) is t)
        ):
            self._tracked[id(t)] = t
            return True
        return False

    def _takes(self, record: OpRecord) -> bool:
        """Record ``record`` if any of its inputs is tracked; its outputs become tracked."""
        if not [t for t in record.inputs if self._is_tracked(t)]:  # a list: every Variable gets watched
            return False
        self._entries.append(record)
        tracked = self._tracked
        for o in record.outputs:
            tracked[id(o)] = o
        return True

    # The result is shaped like ``sources``: a tensor's gradient, or None where the target does
    # not depend on it (a tensor of zeros with unconnected_gradients="zero").
    @overload
    def gradient(
        self, target: Any, sources: Tensor, output_gradients: Any = None, *, unconnected_gradients: Literal["zero"]
    ) -> Tensor: ...
    @overload
    def gradient(
        self, target: Any, sources: Tensor, output_gradients: Any = None, unconnected_gradients: str = "none"
    ) -> Tensor | None: ...
    @overload
    def gradient(
        self, target: Any, sources: list[Any], output_gradients: Any = None, *, unconnected_gradients: Literal["zero"]
    ) -> list[Tensor]: ...
    @overload
    def gradient(
        self, target: Any, sources: list[Any], output_gradients: Any = None, unconnected_gradients: str = "none"
    ) -> list[Tensor | None]: ...
    @overload
    def gradient(
        self, target: Any, sources: tuple[Any, ...], output_gradients: Any = None, unconnected_gradients: str = "none"
    ) -> tuple[Tensor | None, ...]: ...
    @overload
    def gradient(
        self, target: Any, sources: Mapping[_K, Any], output_gradients: Any = None, unconnected_gradients: str = "none"
    ) -> dict[_K, Any]: ...

    def gradient(
        self,
        target: Any,
        sources: Any,
        output_gradients: Any = None,
        unconnected_gradients: str = "none",
    ) -> Any:
        """d(sum of target) / d(sources), shaped like ``sources`` (tensor, list or dict).

        ``unconnected_gradients``: ``"none"`` gives None for a source the target
        does not depend on, ``"zero"`` gives zeros.
        """
        if unconnected_gradients not in ("none", "zero"):
            raise InvalidArgumentError(
                f"GradientTape.gradient: unconnected_gradients must be 'none' or 'zero', got {unconnected_gradients!r}"
            )
        if self._used and not self.persistent:
            raise InvalidArgumentError(
                "GradientTape.gradient can only be called once on a non-persistent tape; "
                "use GradientTape(persistent=True) to compute several gradients"
            )
        targets = _flatten(target)
        seeds = _flatten(output_gradients) if output_gradients is not None else [None] * len(targets)
        if len(seeds) != len(targets):  # zip() would drop the targets (or seeds) past the shorter list
            raise InvalidArgumentError(
                f"GradientTape.gradient: output_gradients holds {len(seeds)} gradient(s) for {len(targets)} target(s); "
                "give one per target tensor (None for the default ones), nested as the targets are"
            )
        self._used = True
        was = self._recording
        self._pop()  # not recorded on this tape (as stop_recording(), without its generator)
        try:
            grads = _backprop(self._entries, targets, seeds, self._tracked)
            result = _structure_like(sources, grads, self._tracked, unconnected_gradients)
        finally:
            if was:
                self._push()
        if not self.persistent:
            self._entries = []
            self._tracked = {}
        return result


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, Tensor):  # the usual target: before the (slower) Mapping check
        return [x]
    if isinstance(x, Mapping):
        return [v for k in x for v in _flatten(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flatten(item)]
    return [x]


def _structure_like(sources: Any, grads: dict[int, Tensor], tracked: Mapping[int, Tensor], unconnected: str) -> Any:
    """Gradients shaped like ``sources``.  Only tracked tensors (watched, or computed
    from watched ones on this tape) get one, as in TensorFlow."""
    ops = _ops()
    if sources.__class__ is list and unconnected == "none" and all([s.__class__ is Variable for s in sources]):
        # The usual call, tape.gradient(loss, model.variables), without the recursion.
        return [grads.get(id(s)) if tracked.get(id(s)) is s else None for s in sources]

    def one(s: Any) -> Any:
        if isinstance(s, Mapping):
            return {k: one(v) for k, v in s.items()}
        if isinstance(s, (list, tuple)):
            return type(s)(one(v) for v in s)
        s = _source(s)
        if not isinstance(s, Tensor):
            raise InvalidArgumentError(f"GradientTape.gradient: sources must be tensors, got {type(s).__name__}")
        g = grads.get(id(s)) if tracked.get(id(s)) is s else None
        if g is None and unconnected == "zero":
            with _on(s._backend):
                if s._dtype.is_resource:  # zeros like the variable's value (None for another resource)
                    declared = s._value[()].dtypes_and_shapes if s._value.shape == () else ()
                    if s._value[()].kind != "Var" or not declared:
                        return None
                    return ops.zeros_like(ops.read_variable_op(s, dtype=declared[0][0]))
                return ops.zeros_like(s)
        return g

    return one(sources)


#: Every zeros tensor the tape made for an output nothing depended on, for
#: ``is_zero_gradient`` (weak: an entry goes with its tensor, so an id is never
#: mistaken for a later object's).  Each is made afresh: a shared one could be
#: written through the ``.numpy()`` of a gradient that passes it through.
_ZEROS: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


#: (backend, dtype) -> the scalar one that seeds the gradient of a scalar target:
#: made once (its host array read-only), so ``is_unit_gradient`` is an identity test.
_UNITS: dict[tuple[Any, DType], Tensor] = {}


def _unit(like: Tensor) -> Tensor:
    key = (like._backend, like._dtype)
    t = _UNITS.get(key)
    if t is None:
        be = like._backend
        arr = np.ones((), like._dtype.np)
        arr.flags.writeable = False
        t = _UNITS[key] = Tensor(be.from_numpy(arr), like._dtype, be)
    return t


def _filled(like: Tensor, value: int) -> Tensor:
    """Ones (a seed) or zeros (an unused output's gradient) like ``like``, on its backend."""
    ops = _ops()
    if value:
        if not like._value.shape and _DIFFERENTIABLE[like._dtype]:
            return _unit(like)  # a scalar loss: no op, and gradient functions can tell
        with _on(like._backend):
            return ops.ones_like(like)  # type: ignore[no-any-return]
    with _on(like._backend):
        t: Tensor = ops.zeros_like(like)
    _ZEROS[id(t)] = t
    return t


def is_zero_gradient(grad: Any) -> bool:
    """Whether ``grad`` is zeros the tape made for an output nothing depended on
    (TensorFlow's ``_IsZero``): a gradient function may skip that output's term."""
    return grad is not None and _ZEROS.get(id(grad)) is grad


def is_unit_gradient(grad: Any) -> bool:
    """Whether ``grad`` is the scalar one the tape seeds a scalar target with (as
    ``tape.gradient(loss, ...)`` does without ``output_gradients``): a gradient
    function may return the derivative itself instead of multiplying it by one."""
    return grad is not None and _UNITS.get((grad._backend, grad._dtype)) is grad


def _accumulate(grads: dict[int, Tensor], t: Tensor, g: Tensor) -> None:
    """Add ``g`` to ``t``'s gradient, on ``t``'s backend."""
    if isinstance(g, Tensor) and g._backend is not t._backend:
        g = _move(g, t._backend)
    old = grads.get(id(t))
    if old is None:
        grads[id(t)] = g
    else:
        with _on(t._backend):
            grads[id(t)] = _ops().add(old, g)


#: Set on an error ``_in_gradient`` made: a gradient computed inside another gradient
#: function (a nested tape) passes it up unchanged, so its message names the gradient
#: that failed once, not once per level of nesting.
_WRAPPED = "_opkernel_in_gradient"


def _in_gradient(error: Exception, record: OpRecord) -> Exception | None:
    """``error`` (same class, same context) with a message saying whose gradient was
    running; None for an error that says so already (a nested gradient's) or whose class
    cannot be copied (re-raise it as it is)."""
    if getattr(error, _WRAPPED, False):
        return None
    where = f"while computing the gradient of {record.type!r}"
    if record._backend is not None:
        where += f" (recorded on backend {record.backend!r})"
    try:
        wrapped: Exception = copy.copy(error)
        if isinstance(error, OpkernelError):
            wrapped.message = f"{where}: {error.message}"  # type: ignore[attr-defined]
            wrapped.args = (wrapped.message,)  # type: ignore[attr-defined]
            if isinstance(error, GradientNotFoundError):
                wrapped.op = record.type  # type: ignore[attr-defined]
        else:
            wrapped.args = (f"{where}: {error}",)
        setattr(wrapped, _WRAPPED, True)
    except Exception:  # noqa: BLE001 -- an exception class that cannot be rebuilt from its args
        return None
    return wrapped


def _backprop(
    entries: list[OpRecord | _Raw], targets: list[Tensor], seeds: list[Any], tracked: Mapping[int, Tensor] | None = None
) -> dict[int, Tensor]:
    ops = _ops()
    differentiable = _DIFFERENTIABLE
    grads: dict[int, Tensor] = {}
    for t, seed in zip(targets, seeds):
        if not isinstance(t, Tensor):
            raise InvalidArgumentError(f"GradientTape.gradient: target must be a tensor, got {type(t).__name__}")
        if seed is None:
            seed = _filled(t, 1)
        elif not isinstance(seed, Tensor):
            with _on(t._backend):
                seed = ops.cast(seed, DstT=t.dtype)
        _accumulate(grads, t, seed)
    get = grads.get
    # Each record's gradient runs on the backend its op ran on: made active for it
    # (ContextVar sets, undone all at once by the first one's token).
    token: Any = None
    placed: Any = None
    try:
        for raw in reversed(entries):
            is_record = raw.__class__ is OpRecord
            outputs = raw.outputs if is_record else raw[3]  # type: ignore[union-attr,index]
            if len(outputs) == 1:  # the common case, without the lists
                g = get(id(outputs[0]))
                if g is None:
                    continue
                filled: list[Any] = [g]
            else:
                out_grads = [get(id(o)) for o in outputs]
                if out_grads.count(None) == len(out_grads):
                    continue
                gdef = None if is_record else _GRADIENTS.get(raw[0].name)  # type: ignore[index]
                if gdef is not None and not gdef.materialize_grads:
                    filled = out_grads
                else:
                    filled = [g if g is not None else _filled(o, 0) for g, o in zip(out_grads, outputs)]
            entry: OpRecord = raw if is_record else OpRecord(  # type: ignore[assignment]
                raw[0].name, raw[0], raw[1], raw[2], outputs, None, raw[4], outputs[0]._backend  # type: ignore[index]
            )
            for i, version in entry.versions:
                if entry.inputs[i]._version != version:  # type: ignore[attr-defined]
                    raise InvalidArgumentError(
                        f"op {entry.type!r}: input {i} is a Variable that was updated in place after the op ran "
                        "and before gradient(), so its gradient would be wrong. Take gradients before updating "
                        "variables, or record var.read_value() instead of var.",
                        op=entry.type,
                    )
            if tracked is not None:
                entry.needs_input_grad = tuple(
                    [tracked.get(id(x)) is x and differentiable[x._dtype] for x in entry.inputs]
                )
            where = entry._backend
            if where is None:  # a custom gradient with no tensor output: where gradient() was called
                if token is not None:
                    _restore(token)
                    token = placed = None
            elif where is not placed:
                if token is None:
                    token = _activate(where)
                else:
                    _activate(where)
                placed = where
            try:
                in_grads = _run_backward(entry, filled)
            except Exception as e:
                wrapped = _in_gradient(e, entry)
                if wrapped is None:
                    raise
                raise wrapped from e
            for x, g in zip(entry.inputs, in_grads):
                if g is not None and differentiable[x._dtype]:
                    home = x._backend
                    if isinstance(g, Tensor) and g._backend is not home:
                        g = _move(g, home)  # the gradient of a tensor lives on its backend
                    old = get(id(x))
                    if old is None:
                        grads[id(x)] = g
                    elif home is placed:
                        grads[id(x)] = ops.add(old, g)
                    else:
                        with _on(home):
                            grads[id(x)] = ops.add(old, g)
    finally:
        if token is not None:
            _restore(token)
    return grads


def record_op(op_def: Any, attrs: Mapping[str, Any], inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
    """Called by the engine after an op ran while some tape is recording (hot: kept inline)."""
    tapes = _local.__dict__.get("tapes")
    if not tapes:
        return
    record = None
    variables = False
    for tape in tapes:
        tracked = tape._tracked
        hit = False
        for t in inputs:  # every input is looked at: trainable Variables become watched when used
            if t.__class__ is Variable:
                variables = True
                if id(t) in tracked or tape._is_tracked(t):
                    hit = True
            elif id(t) in tracked or (t._dtype is _RESOURCE and tape._is_tracked(t)):  # a ResourceVariable's read
                hit = True
        if not hit:
            continue
        if record is None:
            entry = _GRADIENTS.get(op_def.name)
            if entry is not None and entry.fn is None:  # not differentiable: nothing to record
                return
            record = (op_def, attrs, inputs, outputs, _versions(inputs) if variables else ())
        tape._entries.append(record)
        for o in outputs:
            tracked[id(o)] = o


def record_single(op_def: Any, attrs: Mapping[str, Any], inputs: tuple[Tensor, ...], output: Tensor) -> None:
    """``record_op`` for the engine's fast calls (one output): with one tape recording on
    this thread and no Variable among the inputs, the record is filed here, without
    ``record_op``'s loops over tapes and outputs; anything else goes to ``record_op``."""
    tapes = _local.__dict__.get("tapes")
    if not tapes:
        return
    if len(tapes) == 1:
        tracked = tapes[0]._tracked
        hit = False
        for t in inputs:
            if t.__class__ is Variable or t._dtype is _RESOURCE:
                break
            if id(t) in tracked:
                hit = True
        else:
            if hit:
                entry = _GRADIENTS.get(op_def.name)
                if entry is None or entry.fn is not None:
                    tapes[0]._entries.append((op_def, attrs, inputs, (output,), ()))
                    tracked[id(output)] = output
            return
    record_op(op_def, attrs, inputs, (output,))


def record_transfer(source: Tensor, moved: Tensor) -> None:
    """Called by the engine after copying ``source`` to another backend (``moved``) while
    some tape is recording: the copy's gradient is copied back to ``source``'s backend."""
    tapes = _local.__dict__.get("tapes")
    if not tapes:
        return
    home = source._backend

    def backward(output_grads: list[Tensor | None]) -> Sequence[Tensor | None]:
        g = output_grads[0]
        return [None if g is None else _move(g, home)]

    record = OpRecord("Transfer", None, {}, [source], [moved], backward, backend=moved._backend)
    for tape in list(tapes):
        tape._takes(record)


@contextmanager
def stop_recording() -> Iterator[None]:
    """Run the block without recording on any tape of this thread."""
    tapes = list(active_tapes())
    for t in tapes:
        t._pop()
    try:
        yield
    finally:
        for t in tapes:
            t._push()


def custom_gradient(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: ``f(*xs) -> (y, grad_fn)`` where ``grad_fn(*dys)`` returns one
    gradient per ``x`` (``tf.custom_gradient``)."""

    def wrapped(*args: Any) -> Any:
        with stop_recording():
            y, grad_fn = f(*args)
        inputs = [a for a in args if isinstance(a, Tensor)]
        outputs = _flatten(y)

        def backward(output_grads: list[Tensor | None]) -> Sequence[Tensor | None]:
            result = grad_fn(*output_grads)
            grads = [result] if isinstance(result, Tensor) or result is None else list(result)
            if len(grads) == len(args) != len(inputs):  # one per argument: keep the tensors' ones
                grads = [g for g, a in zip(grads, args) if isinstance(a, Tensor)]
            return grads

        placed = next((o._backend for o in outputs if isinstance(o, Tensor)), None)
        record = OpRecord(getattr(f, "__name__", "custom_gradient"), None, {}, inputs, outputs, backward, backend=placed)
        for tape in list(active_tapes()):
            tape._takes(record)
        return y

    wrapped.__name__ = getattr(f, "__name__", "custom_gradient")
    wrapped.__doc__ = f.__doc__
    return wrapped


def _as_tuple(argnums: int | Sequence[int]) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


@overload
def value_and_grad(f: Callable[_P, _R], argnums: int = 0) -> Callable[_P, tuple[_R, Tensor]]: ...
@overload
def value_and_grad(f: Callable[_P, _R], argnums: Sequence[int]) -> Callable[_P, tuple[_R, tuple[Tensor, ...]]]: ...


def value_and_grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., tuple[Any, Any]]:
    """``f``'s value and its gradient with respect to the positional args ``argnums``
    (a tuple of gradients when ``argnums`` is a sequence), as in JAX."""
    def wrapped(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        nums = _as_tuple(argnums)
        args_l = list(args)
        for i in nums:
            if not isinstance(args_l[i], Tensor):
                args_l[i] = _to_tensor(args_l[i])
        with GradientTape() as tape:
            for i in nums:
                tape.watch(args_l[i])
            value = f(*args_l, **kwargs)
        g = tape.gradient(value, [args_l[i] for i in nums], unconnected_gradients="zero")
        return value, (g[0] if isinstance(argnums, int) else tuple(g))

    return wrapped


@overload
def grad(f: Callable[_P, Any], argnums: int = 0) -> Callable[_P, Tensor]: ...
@overload
def grad(f: Callable[_P, Any], argnums: Sequence[int]) -> Callable[_P, tuple[Tensor, ...]]: ...


def grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """The gradient of a scalar-valued ``f`` with respect to ``argnums`` (``jax.grad``)."""
    vg = value_and_grad(f, argnums)
    return lambda *args, **kwargs: vg(*args, **kwargs)[1]
