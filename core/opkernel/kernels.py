"""The kernel registry: implementations of ops keyed by (op name, backend).

A kernel is either a plain function ``fn(*inputs, **attrs)`` receiving native
arrays, or an ``OpKernel`` subclass constructed once per signature (TensorFlow's
OpKernel: ``__init__(ctx)`` reads attrs, ``compute(ctx)`` runs).  A kernel may
narrow type attrs (``type_constraints``), carry a ``label``, a ``priority`` and
``host_memory`` arguments.  ``backend="*"`` registers a generic kernel, written
with opkernel ops, that serves every backend without a kernel of its own.
"""

from __future__ import annotations

import inspect
import threading
import warnings
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from ._discovery import discover
from ._provenance import Provider, current_provider
from .dtypes import DType, as_dtype
from .errors import AlreadyExistsError, InvalidArgumentError, KernelNotFoundError, OpSpecError

if TYPE_CHECKING:
    from .backend import Backend
    from .op_registry import OpDef
    from .resources import ResourceMgr

__all__ = [
    "GENERIC",
    "KernelDef",
    "OpKernel",
    "AsyncOpKernel",
    "OpKernelConstruction",
    "OpKernelContext",
    "register_kernel",
    "unregister_kernel",
    "get_kernel",
    "get_kernels_for_backend",
    "copy_registered_kernels",
    "kernels_for",
    "all_kernels",
    "remove_provider",
    "origin_of",
    "overrides",
]

GENERIC = "*"
K = TypeVar("K")


@dataclass(frozen=True, eq=False)
class KernelDef:
    """One registered kernel."""

    op: str
    backend: str
    impl: Any  # a function or an OpKernel subclass
    type_constraints: Mapping[str, frozenset[DType]]
    label: str | None = None
    priority: int = 0
    host_memory: frozenset[str] = frozenset()
    provider: Provider = field(default_factory=lambda: Provider("?"))
    override: bool = False  # registered with override=True: may win over another distribution's kernel
    # The origins that owned (op, backend) when this kernel was registered: an owner that
    # arrives later (its plugin loads after this one) was unknown to it (see add_kernel).
    owners_at_registration: frozenset[str] | None = None  # None: add_kernel fills it in
    serial: int = 0  # registration order, set by add_kernel: unregister_kernel removes the newest first

    @property
    def key(self) -> tuple[Any, ...]:
        constraints = tuple(sorted((k, tuple(sorted(d.name for d in v))) for k, v in self.type_constraints.items()))
        return (self.op, self.backend, constraints, self.label, self.priority)

    @property
    def is_generic(self) -> bool:
        return self.backend == GENERIC

    @property
    def is_class(self) -> bool:
        return isinstance(self.impl, type) and issubclass(self.impl, OpKernel)

    def matches(self, attrs: Mapping[str, Any]) -> bool:
        """Whether the bound type attrs satisfy this kernel's constraints."""
        for name, allowed in self.type_constraints.items():
            value = attrs.get(name)
            values = value if isinstance(value, tuple) else (value,)
            if not all(v in allowed for v in values):
                return False
        return True

    def competes_with(self, other: KernelDef) -> bool:
        """Whether a lookup could have to choose between this kernel and ``other``: the same
        op, backend and label, and some binding of the type attrs satisfies both."""
        if (self.op, self.backend, self.label) != (other.op, other.backend, other.label):
            return False
        shared = self.type_constraints.keys() & other.type_constraints.keys()
        return all(self.type_constraints[name] & other.type_constraints[name] for name in shared)

    def shadows(self, other: KernelDef) -> bool:
        """Whether this kernel is chosen over ``other`` for some call (equal priorities count:
        which one wins then depends on registration order)."""
        return self.competes_with(other) and self.priority >= other.priority

    def describe(self) -> str:
        """``op 'MatMul' on backend 'cpu' (T in [float32], priority 100)``: what an override
        or a conflict is about."""
        label = f", label={self.label!r}" if self.label is not None else ""
        return (
            f"op {self.op!r} on backend {self.backend!r} ({self.describe_constraints()}{label}, "
            f"priority {self.priority})"
        )

    def describe_constraints(self) -> str:
        if not self.type_constraints:
            return "any type"
        return ", ".join(
            f"{k} in [{', '.join(sorted(d.name for d in v))}]" for k, v in sorted(self.type_constraints.items())
        )

    def validate_against(self, op_def: OpDef) -> None:
        """Check constraints, host-memory names and parameter names against the op (done
        at registration, or when the op is known; the engine checks again at first lookup)."""
        self.check_declaration(
            [a.name for a in op_def.inputs], [a.name for a in op_def.outputs], {a.name: a.type for a in op_def.attrs}
        )

    def check_declaration(self, inputs: Sequence[str], outputs: Sequence[str], attrs: Mapping[str, str]) -> None:
        """OpSpecError unless this kernel fits an op with these input and output names and
        attrs (name -> attr type): its type constraints name type attrs, its ``host_memory``
        names inputs or outputs, and a function kernel's parameters after the inputs name attrs."""
        where = f"kernel for op {self.op!r} on backend {self.backend!r} from {self.provider}"
        type_attrs = [name for name, kind in attrs.items() if kind in ("type", "list(type)")]
        for name in self.type_constraints:
            if name not in type_attrs:
                what = f"a {attrs[name]} attr" if name in attrs else "not an attr"
                raise OpSpecError(
                    f"{where}: type constraint names {name!r}, which is {what} of the op; "
                    f"type attrs: {type_attrs or 'none'}{_did_you_mean(name, type_attrs)}",
                    op=self.op,
                )
        arg_names = sorted({*inputs, *outputs})
        for name in self.host_memory:
            if name not in arg_names:
                raise OpSpecError(
                    f"{where}: host_memory names {name!r}, which is not an input or output "
                    f"(have {arg_names}){_did_you_mean(name, arg_names)}",
                    op=self.op,
                )
        if not self.is_class:
            problem = _parameter_problem(self.impl, list(inputs), list(attrs))
            if problem is not None:
                raise OpSpecError(f"{where}: {problem}", op=self.op)


def _did_you_mean(word: str, candidates: Sequence[str]) -> str:
    import difflib  # only for error messages

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _parameter_problem(fn: Any, inputs: list[str], attrs: list[str]) -> str | None:
    """Why a function kernel ``fn(*inputs, **named_attrs)`` cannot be called for an op with
    these inputs and attrs, or None.  The inputs fill the first positional parameters (list
    inputs one each); every parameter after them must name an attr (or be ``*args`` /
    ``**kwargs``), except one with a default whose name is not close to an attr's: it keeps
    its default (``lambda x, offset=offset: x + offset``), while ``keepdims=False`` for the
    attr ``keep_dims`` is a typo.  A numpy ufunc (whose ``out``, ``where``, ... keep their defaults) and a
    callable without an inspectable signature pass."""
    if isinstance(fn, np.ufunc):
        return None if fn.nin == len(inputs) else f"it is a numpy ufunc of {fn.nin} input(s), but the op has {len(inputs)}"
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    n = len(inputs)
    shown_inputs = ", ".join(inputs) or "none"
    if len(positional) < n and not varargs:
        return (
            f"it takes {len(positional)} positional parameter(s) "
            f"({', '.join(p.name for p in positional) or 'none'}), but the op has {n} input(s) ({shown_inputs}), "
            "passed positionally in that order"
        )
    rest = positional[n:] + [p for p in params if p.kind is p.KEYWORD_ONLY]
    for p in rest:
        if p.name in attrs and p.kind is not p.POSITIONAL_ONLY:
            continue
        if p.kind is p.POSITIONAL_ONLY:
            if p.default is not p.empty:
                continue  # never filled by opkernel: it keeps its default
            return f"its positional-only parameter {p.name!r} after the {n} input(s) can receive no attr"
        if p.default is not p.empty and not _did_you_mean(p.name, attrs):
            continue  # keeps its default (``lambda x, offset=offset: ...``); one close to an attr is a typo
        return (
            f"its parameter {p.name!r} matches no input or attr of the op (the inputs {shown_inputs} fill "
            f"the first {n} positional parameter(s); the parameters after them receive attrs by name; "
            f"attrs: {', '.join(attrs) or 'none'}){_did_you_mean(p.name, attrs)}"
        )
    return None


class OpKernelConstruction:
    """What an ``OpKernel.__init__`` sees: the op, its attrs, the backend."""

    __slots__ = ("op_def", "attrs", "backend")

    def __init__(self, op_def: OpDef, attrs: Mapping[str, Any], backend: Backend) -> None:
        self.op_def = op_def
        self.attrs = attrs
        self.backend = backend

    @property
    def op_name(self) -> str:
        return self.op_def.name

    @property
    def resource_manager(self) -> ResourceMgr:
        """The backend's resource manager (TensorFlow's ``ctx->resource_manager()``): keep
        state that calls share there, not in the kernel object."""
        return self.backend.resource_manager

    def get_attr(self, name: str) -> Any:
        try:
            return self.attrs[name]
        except KeyError:
            raise InvalidArgumentError(
                f"op {self.op_def.name!r}: kernel asked for attr {name!r}, which the op does not have "
                f"(attrs: {sorted(self.attrs)})",
                op=self.op_def.name,
            ) from None

    def require(self, condition: Any, message: str) -> None:
        """TensorFlow's OP_REQUIRES: raise InvalidArgumentError naming the op unless ``condition``."""
        if not condition:
            raise InvalidArgumentError(f"op {self.op_def.name!r}: {message}", op=self.op_def.name)


class OpKernelContext(OpKernelConstruction):
    """What ``OpKernel.compute`` sees: flat native inputs, and room for the outputs."""

    __slots__ = ("inputs", "outputs", "output_dtypes", "status")

    def __init__(
        self,
        op_def: OpDef,
        attrs: Mapping[str, Any],
        backend: Backend,
        inputs: Sequence[Any],
        output_dtypes: Sequence[DType],
    ) -> None:
        super().__init__(op_def, attrs, backend)
        self.inputs = inputs
        self.output_dtypes = output_dtypes
        self.outputs: list[Any] = [None] * len(output_dtypes)
        self.status: Exception | None = None

    def num_inputs(self) -> int:
        return len(self.inputs)

    def input(self, i: int) -> Any:
        return self.inputs[i]

    def num_outputs(self) -> int:
        return len(self.outputs)

    def allocate_output(self, i: int, shape: Iterable[int]) -> Any:
        out = self.backend.empty(tuple(int(d) for d in shape), self.output_dtypes[i])
        self.outputs[i] = out
        return out

    def set_output(self, i: int, value: Any) -> None:
        self.outputs[i] = value

    def set_status(self, error: Exception) -> None:
        """Fail the call with ``error`` (an ``opkernel.errors`` error), as TensorFlow's
        ``ctx->SetStatus``: an asynchronous kernel does so before calling ``done``.  The
        first status set is the one the caller gets."""
        if self.status is None:
            self.status = error


class OpKernel:
    """Base class of class-style kernels (TensorFlow's OpKernel).

    ``__init__(ctx)`` runs once per distinct (attrs, dtypes, backend) signature
    and its result is cached; ``compute(ctx)`` runs on every call and must be
    thread-safe.
    """

    def __init__(self, ctx: OpKernelConstruction) -> None:
        pass

    def compute(self, ctx: OpKernelContext) -> None:
        raise NotImplementedError(f"{type(self).__name__}.compute")


class AsyncOpKernel(OpKernel):
    """Base class of asynchronous kernels (TensorFlow's AsyncOpKernel).

    ``compute_async(ctx, done)`` starts the work and may return before it ends: whoever
    finishes it (a callback of another op, another thread) fills the outputs, sets a
    failure with ``ctx.set_status(error)`` if there is one, and calls ``done()`` once.  A
    kernel that waits for another op (a receive waiting for its send, a dequeue for an
    enqueue) so holds no thread while it waits: it leaves a callback where the other op
    will find it.  The call that runs it (eagerly, or a traced function's replay) waits
    for ``done`` and then returns the outputs or raises the status; an error raised by
    ``compute_async`` itself reaches the caller as from any kernel.
    """

    def compute_async(self, ctx: OpKernelContext, done: Callable[[], None]) -> None:
        raise NotImplementedError(f"{type(self).__name__}.compute_async")

    def cancel(self, ctx: OpKernelContext) -> None:
        """Called when the caller of ``ctx``'s call stops waiting before ``done`` (an
        exception raised in its thread while it waited, such as KeyboardInterrupt):
        withdraw whatever the call left waiting (a queue's dequeue), so no later op serves
        it (TensorFlow's cancellation callback).  By default nothing."""

    def compute(self, ctx: OpKernelContext) -> None:
        finished = threading.Event()
        self.compute_async(ctx, finished.set)
        try:
            finished.wait()
        except BaseException:
            if not finished.is_set():
                self.cancel(ctx)
            raise
        if ctx.status is not None:
            raise ctx.status


_lock = threading.RLock()
_kernels: dict[tuple[str, str], list[KernelDef]] = {}
_replaced: list[tuple[KernelDef, KernelDef]] = []  # (overrider, the other origin's kernel it replaced)
# (newer, older): every kernel that replaced another under the same key (override=True);
# unregistering the newer one puts the older one back.
_superseded: list[tuple[KernelDef, KernelDef]] = []
_serial = 0
_version = 0
_listeners: list[Callable[[], None]] = []


def on_change(fn: Callable[[], None]) -> None:
    """Call ``fn`` after every change to the registry (the engine drops cached signatures)."""
    _listeners.append(fn)


def _changed() -> None:
    global _version
    _version += 1
    for fn in _listeners:
        fn()


def version() -> int:
    """Bumped on every change; the engine's per-signature cache is keyed on it."""
    return _version


def _parse_constraints(op: str, constraints: Mapping[str, Iterable[Any]] | None) -> dict[str, frozenset[DType]]:
    if not constraints:
        return {}
    out: dict[str, frozenset[DType]] = {}
    for name, types in constraints.items():
        if isinstance(types, (str, DType)):
            types = [types]
        try:
            out[name] = frozenset(as_dtype(t) for t in types)
        except TypeError as e:
            raise OpSpecError(f"kernel for op {op!r}: type constraint {name!r}: {e}", op=op) from e
    return out


def origin_of(provider: Provider) -> str:
    """The distribution behind ``provider``: what decides whether two registrations come
    from the same party (a plugin registered by hand, or a script, is its own party)."""
    return provider.distribution or provider.plugin


def _no_owners(op: str, backend: str) -> frozenset[str]:
    return frozenset()


# Which distributions own (op, backend): the op's provider and the backend's. The plugin
# layer installs the real lookup (set_owner_lookup), so this room needs no upward import.
_owners: Callable[[str, str], frozenset[str]] = _no_owners


def set_owner_lookup(fn: Callable[[str, str], frozenset[str]]) -> None:
    """Install ``fn(op, backend)``: the origins (see :func:`origin_of`) that may register
    kernels for that pair over another distribution's without ``override=True``."""
    global _owners
    _owners = fn


def _may_take_over(winner: KernelDef, loser: KernelDef, *, loser_is_older: bool) -> bool:
    """Whether ``winner`` may be chosen over ``loser``, another origin's kernel: it says
    override=True, or its origin owns the op or backend, unless ``loser`` was registered
    knowing that owner (then replacing it is an override like any other)."""
    if winner.override:
        return True
    mine = origin_of(winner.provider)
    if mine not in _owners(winner.op, winner.backend):
        return False
    return not loser_is_older or mine not in (loser.owners_at_registration or ())


def unauthorised_takeovers(
    kernel: KernelDef, others: Iterable[KernelDef], *, others_are_older: bool
) -> list[KernelDef]:
    """The kernels of other origins among ``others`` that ``kernel`` would be chosen over
    without the right to (see :func:`add_kernel`)."""
    mine = origin_of(kernel.provider)
    return [
        k for k in others
        if origin_of(k.provider) != mine and kernel.shadows(k)
        and not _may_take_over(kernel, k, loser_is_older=others_are_older)
    ]


def overrides() -> list[tuple[KernelDef, KernelDef]]:
    """Every (overriding, overridden) pair in use: a kernel registered with override=True
    that is chosen over another origin's kernel, or replaced one under the same key."""
    with _lock:
        present = {id(k) for bucket in _kernels.values() for k in bucket}
        pairs = [
            (k, other)
            for bucket in _kernels.values()
            for k in bucket
            if k.override
            for other in bucket
            if origin_of(other.provider) != origin_of(k.provider) and k.shadows(other)
        ]
        return pairs + [(new, old) for new, old in _replaced if id(new) in present]


def _no_check(kernel: KernelDef) -> None:
    return None


# The check a new kernel passes before it is added: the plugin layer installs the real one
# (set_registration_check), which knows whether the op exists and discovery is complete.
_check_new: Callable[[KernelDef], None] = _no_check


def set_registration_check(fn: Callable[[KernelDef], None]) -> None:
    """Install ``fn(kernel)``, called by :func:`register_kernel` before a kernel is added;
    it raises to refuse the kernel (nothing is registered then)."""
    global _check_new
    _check_new = fn


def add_kernel(kernel: KernelDef, *, override: bool = False) -> None:
    """Insert ``kernel``.

    A second, different kernel under the same key from the same distribution needs
    ``override`` (it then replaces the first).  A kernel chosen over another
    distribution's for some call (same op, backend and label, overlapping type
    constraints, priority at least as high) needs ``override`` too, unless its
    distribution provides the op or the backend: then both stay registered.
    """
    global _serial
    with _lock:
        bucket = _kernels.get((kernel.op, kernel.backend), [])
        same_key = [old for old in bucket if old.key == kernel.key]
        if any(old.impl is kernel.impl for old in same_key):
            return
        if kernel.owners_at_registration is None or (override and not kernel.override):
            owners = _owners(kernel.op, kernel.backend)
            kernel = replace(kernel, override=kernel.override or override, owners_at_registration=owners)
        taken = unauthorised_takeovers(kernel, bucket, others_are_older=True)
        mine = origin_of(kernel.provider)
        same_origin = [old for old in same_key if origin_of(old.provider) == mine]
        if same_origin and not override or (taken and taken[0].key == kernel.key):
            old = (same_origin or taken)[0]
            raise AlreadyExistsError(
                f"op {kernel.op!r}: a kernel for backend {kernel.backend!r} with "
                f"{kernel.describe_constraints()}, label={kernel.label!r} is already registered by "
                f"{old.provider}; {kernel.provider} tried to register another. "
                "Pass override=True to replace it, or use a label or priority.",
                op=kernel.op,
            )
        if taken:
            raise AlreadyExistsError(
                f"op {kernel.op!r}: {kernel.provider} registers a kernel for {kernel.describe()} that would "
                f"be chosen over the one {taken[0].provider} registered ({taken[0].describe()}). A package "
                f"that provides neither op {kernel.op!r} nor backend {kernel.backend!r} must pass "
                "override=True to replace another distribution's kernel; or give it a label or a lower priority.",
                op=kernel.op,
            )
        _serial += 1
        kernel = replace(kernel, serial=_serial)
        bucket = list(bucket)  # changed as a copy and swapped in: see _swap
        if same_key and override:
            old = same_key[0]
            warnings.warn(
                f"op {kernel.op!r}: kernel on backend {kernel.backend!r} from {old.provider} "
                f"overridden by {kernel.provider}",
                stacklevel=4,
            )
            bucket[bucket.index(old)] = kernel
            _superseded.append((kernel, old))  # put back if this one is unregistered
            if origin_of(old.provider) != mine:
                _replaced.append((kernel, old))  # listed as an override; put back if the overrider goes
        else:
            # A kernel of another origin under the same key stays only when this one's origin
            # owns the op or backend and that kernel was registered before it knew so (a plugin
            # loaded earlier): the plugin layer then refuses that plugin.
            bucket.append(kernel)
        _swap((kernel.op, kernel.backend), bucket)
        _changed()


def _swap(key: tuple[str, str], bucket: list[KernelDef]) -> None:
    """Put ``bucket``, sorted, in the registry under ``key`` (or drop the key when it is
    empty) as one new list.  Lookups (``kernels_for``) read buckets without the lock, so a
    bucket is never changed in place: ``list.sort`` empties a list while it sorts, and a
    thread copying it then would find no kernel at all."""
    if bucket:
        _kernels[key] = sorted(bucket, key=_lookup_order)
    else:
        _kernels.pop(key, None)


def _lookup_order(k: KernelDef) -> tuple[int, bool]:
    """A bucket's order: highest priority first; at equal priority an override wins."""
    return (-k.priority, not k.override)


def register_kernel(
    op: str,
    *,
    backend: str,
    type_constraints: Mapping[str, Iterable[Any]] | None = None,
    label: str | None = None,
    priority: int = 0,
    host_memory: Iterable[str] = (),
    override: bool = False,
) -> Callable[[K], K]:
    """Decorator registering a kernel function or ``OpKernel`` subclass; returns it unchanged.

    ``type_constraints`` maps type attrs to the dtypes this kernel handles
    (``{"T": ["float32", "int32"]}``); ``host_memory`` names inputs that must
    arrive as numpy arrays even on device backends.  ``override=True`` lets the
    kernel replace one registered under the same key, or be chosen over another
    distribution's kernel for the same op and backend (see docs/plugins.md, "Who may
    override what"): it is then warned about, listed by ``opkernel info`` and refused
    under ``OPKERNEL_STRICT_PLUGINS=1``.
    """
    if isinstance(host_memory, str):
        host_memory = (host_memory,)
    parsed = _parse_constraints(op, type_constraints)
    hm = frozenset(host_memory)

    def decorate(impl: K) -> K:
        if not callable(impl):
            raise OpSpecError(f"kernel for op {op!r}: expected a function or OpKernel subclass, got {impl!r}", op=op)
        owners = _owners(op, backend)
        kernel = KernelDef(op, backend, impl, parsed, label, priority, hm, current_provider(), override, owners)
        _check_new(kernel)
        add_kernel(kernel, override=override)
        return impl

    return decorate


class _Any:
    def __repr__(self) -> str:
        return "ANY"


#: The default of :func:`unregister_kernel`'s ``label`` and ``priority``: any value.
ANY: Any = _Any()


def unregister_kernel(
    op: str | KernelDef, backend: str | None = None, *, label: str | None = ANY, priority: int = ANY
) -> KernelDef:
    """Undo one kernel registration (TensorFlow.js's ``unregisterKernel``); returns its KernelDef.

    ``unregister_kernel("MatMul", "cpu")`` removes the kernel registered most recently for op
    ``MatMul`` on backend ``cpu`` (narrowed by ``label`` and ``priority`` when given: ``label=None``
    means the unlabelled kernels); ``unregister_kernel(kdef)`` removes exactly that KernelDef
    (from :func:`get_kernel`, :func:`get_kernels_for_backend` or :func:`kernels_for`).  A kernel
    that replaced another under the same key (``override=True``) gives that one back.
    KernelNotFoundError, naming what is registered, when nothing matches.
    """
    discover()  # the installed plugins' kernels first (opkernel._discovery)
    with _lock:
        if isinstance(op, KernelDef):
            if backend is not None or label is not ANY or priority is not ANY:
                raise TypeError("unregister_kernel(kernel_def) takes no backend, label or priority")
            kernel = op
            if not any(k is kernel for k in _kernels.get((kernel.op, kernel.backend), ())):
                raise KernelNotFoundError(
                    f"op {kernel.op!r}: the kernel for {kernel.describe()} from {kernel.provider} is not "
                    f"registered (already unregistered, or its plugin was unloaded); registered on backend "
                    f"{kernel.backend!r}: {_describe_bucket(kernel.op, kernel.backend)}",
                    op=kernel.op, backend=kernel.backend,
                )
        else:
            if backend is None:
                raise TypeError(f"unregister_kernel({op!r}): name the backend, e.g. unregister_kernel({op!r}, 'cpu')")
            candidates = [
                k for k in _kernels.get((op, backend), ())
                if (label is ANY or k.label == label) and (priority is ANY or k.priority == priority)
            ]
            if not candidates:
                narrowed = "".join(
                    f", {name}={value!r}" for name, value in (("label", label), ("priority", priority)) if value is not ANY
                )
                raise KernelNotFoundError(
                    f"op {op!r}: no kernel registered on backend {backend!r}{narrowed} to unregister; "
                    f"registered there: {_describe_bucket(op, backend)}; op {op!r} has kernels on: "
                    f"{', '.join(repr(b) for b in backends_for(op)) or 'no backend'}",
                    op=op, backend=backend,
                )
            kernel = max(candidates, key=lambda k: k.serial)
        _remove(kernel)
        return kernel


def _describe_bucket(op: str, backend: str) -> str:
    bucket = _kernels.get((op, backend), ())
    return "; ".join(f"{k.describe_constraints()}, label={k.label!r}, priority {k.priority}" for k in bucket) or "none"


def _remove(kernel: KernelDef) -> None:
    """Take ``kernel`` out of its bucket, putting back the kernel it replaced under the same key."""
    key = (kernel.op, kernel.backend)
    bucket = [k for k in _kernels[key] if k is not kernel]
    older = next((old for new, old in reversed(_superseded) if new is kernel), None)
    _superseded[:] = [(new, old) for new, old in _superseded if new is not kernel]
    _replaced[:] = [(new, old) for new, old in _replaced if new is not kernel]
    if older is not None and not any(k.key == older.key for k in bucket):
        bucket.append(older)
    _swap(key, bucket)
    _changed()


def get_kernel(op: str, backend: str, *, label: str | None = None, **type_attrs: Any) -> KernelDef:
    """The kernel a call of ``op`` on ``backend`` with these type attrs (``T="float32"``) and
    ``label`` would use among the kernels registered for that backend itself (TensorFlow.js's
    ``getKernel``; a generic kernel is under ``backend="*"``).  Type attrs not given match any
    constraint.  KernelNotFoundError when there is none."""
    discover()  # the installed plugins' kernels first (opkernel._discovery)
    bound = {name: as_dtype(value) if isinstance(value, (str, DType)) else value for name, value in type_attrs.items()}
    bound = {
        name: tuple(as_dtype(v) for v in value) if isinstance(value, (list, tuple)) else value
        for name, value in bound.items()
    }
    for k in kernels_for(op, backend):
        if k.label == label and all(k.matches({n: v}) for n, v in bound.items() if n in k.type_constraints):
            return k
    wanted = ", ".join(f"{n}={v}" for n, v in sorted(type_attrs.items()))
    raise KernelNotFoundError(
        f"op {op!r}: no kernel on backend {backend!r} for label={label!r}{', ' + wanted if wanted else ''}; "
        f"registered there: {_describe_bucket(op, backend)}",
        op=op, backend=backend,
    )


def get_kernels_for_backend(backend: str) -> list[KernelDef]:
    """Every kernel registered for ``backend`` (TensorFlow.js's ``getKernelsForBackend``),
    by op name, then in lookup order.  ``"*"`` lists the generic kernels."""
    discover()  # the installed plugins' kernels first (opkernel._discovery)
    with _lock:
        return [k for (_, b), bucket in sorted(_kernels.items()) if b == backend for k in bucket]


def copy_registered_kernels(from_backend: str, to_backend: str) -> list[KernelDef]:
    """Register every kernel of ``from_backend`` for ``to_backend`` too, as the caller's
    registrations (TensorFlow.js's ``copyRegisteredKernels``): a backend whose native arrays
    are another's (a numpy-based backend reusing cpu's kernels) starts from those kernels and
    registers its own where it differs.  All or nothing: when one copy is refused (a kernel
    under the same key exists on ``to_backend``), none is registered.  Returns the copies."""
    discover()  # the installed plugins' kernels first (opkernel._discovery)
    if from_backend == to_backend or GENERIC in (from_backend, to_backend):
        raise ValueError(f"copy_registered_kernels({from_backend!r}, {to_backend!r}): name two different backends, not '*'")
    provider = current_provider()
    with _lock:
        sources = get_kernels_for_backend(from_backend)
        if not sources:
            raise KernelNotFoundError(f"copy_registered_kernels: no kernels are registered for backend {from_backend!r}", backend=from_backend)
        added: list[KernelDef] = []
        try:
            for k in sources:
                copy = replace(
                    k, backend=to_backend, provider=provider, override=False, owners_at_registration=None, serial=0
                )
                before = _serial
                add_kernel(copy)
                added += [c for c in _kernels.get((k.op, to_backend), ()) if c.serial > before]
        except BaseException:
            for k in added:
                _remove(k)
            raise
        return added


def kernels_for(op: str, backend: str) -> list[KernelDef]:
    """Kernels of ``op`` on ``backend``, highest priority first."""
    return list(_kernels.get((op, backend), ()))


def all_kernels() -> list[KernelDef]:
    with _lock:
        return [k for bucket in _kernels.values() for k in bucket]


def backends_for(op: str) -> list[str]:
    with _lock:
        return sorted(b for (o, b), ks in _kernels.items() if o == op and ks)


def remove_provider(provider: Provider) -> None:
    """Drop every kernel ``provider`` registered (rollback of a failed plugin); a kernel of
    another provider that one of them replaced under the same key comes back."""
    with _lock:
        present = {id(k) for bucket in _kernels.values() for k in bucket}
        for key, bucket in list(_kernels.items()):
            _swap(key, [k for k in bucket if k.provider != provider])
        for new, old in list(_superseded):
            if new.provider == provider or old.provider == provider:
                _superseded.remove((new, old))
                if new.provider == provider and old.provider != provider and id(new) in present:
                    bucket = _kernels.get((old.op, old.backend), [])
                    if not any(k.key == old.key for k in bucket):
                        _swap((old.op, old.backend), [*bucket, old])  # the overridden kernel returns
        _replaced[:] = [(new, old) for new, old in _replaced if provider not in (new.provider, old.provider)]
        _changed()


def remove_kernels(doomed: Iterable[KernelDef]) -> None:
    """Drop these kernels (a script's kernel that took over another distribution's)."""
    with _lock:
        ids = {id(k) for k in doomed}
        for key, bucket in list(_kernels.items()):
            _swap(key, [k for k in bucket if id(k) not in ids])
        _changed()


class Snapshot(dict[tuple[str, str], list[KernelDef]]):
    """The registry's buckets, with the record of which kernel replaced which (so that an
    override unregistered after :func:`restore` still gives back the kernel it replaced)."""

    superseded: list[tuple[KernelDef, KernelDef]]
    replaced: list[tuple[KernelDef, KernelDef]]


def snapshot() -> Snapshot:
    with _lock:
        snap = Snapshot({k: list(v) for k, v in _kernels.items()})
        snap.superseded, snap.replaced = list(_superseded), list(_replaced)
        return snap


def restore(snap: dict[tuple[str, str], list[KernelDef]]) -> None:
    """Put the registry back as ``snap`` holds it; a plain dict of buckets keeps the
    records of replacements whose kernels it holds."""
    with _lock:
        _kernels.clear()
        _kernels.update({k: list(v) for k, v in snap.items()})
        if isinstance(snap, Snapshot):
            _superseded[:], _replaced[:] = snap.superseded, snap.replaced
        else:
            present = {id(k) for bucket in _kernels.values() for k in bucket}
            _superseded[:] = [(new, old) for new, old in _superseded if id(new) in present]
            _replaced[:] = [(new, old) for new, old in _replaced if id(new) in present]
        _changed()
