"""The kernel registry: implementations of ops keyed by (op name, backend).

A kernel is either a plain function ``fn(*inputs, **attrs)`` receiving native
arrays, or an ``OpKernel`` subclass constructed once per signature (TensorFlow's
OpKernel: ``__init__(ctx)`` reads attrs, ``compute(ctx)`` runs).  A kernel may
narrow type attrs (``type_constraints``), carry a ``label``, a ``priority`` and
``host_memory`` arguments.  ``backend="*"`` registers a generic kernel, written
with opkernel ops, that serves every backend without a kernel of its own.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar

from ._provenance import Provider, current_provider
from .dtypes import DType, as_dtype
from .errors import AlreadyExistsError, InvalidArgumentError, OpSpecError

if TYPE_CHECKING:
    from .backend import Backend
    from .op_registry import OpDef

__all__ = [
    "GENERIC",
    "KernelDef",
    "OpKernel",
    "OpKernelConstruction",
    "OpKernelContext",
    "register_kernel",
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
        """Check constraints and host-memory names against the op (done lazily, at first lookup)."""
        for name in self.type_constraints:
            attr = op_def.attr_map.get(name)
            if attr is None or attr.type not in ("type", "list(type)"):
                raise OpSpecError(
                    f"kernel for op {op_def.name!r} on backend {self.backend!r} from {self.provider}: "
                    f"type constraint names {name!r}, which is not a type attr of the op "
                    f"(type attrs: {[a.name for a in op_def.attrs if a.type in ('type', 'list(type)')]})",
                    op=op_def.name,
                )
        arg_names = {a.name for a in op_def.inputs} | {a.name for a in op_def.outputs}
        for name in self.host_memory:
            if name not in arg_names:
                raise OpSpecError(
                    f"kernel for op {op_def.name!r} on backend {self.backend!r}: host_memory names "
                    f"{name!r}, which is not an input or output (have {sorted(arg_names)})",
                    op=op_def.name,
                )


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

    __slots__ = ("inputs", "outputs", "output_dtypes")

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


_lock = threading.RLock()
_kernels: dict[tuple[str, str], list[KernelDef]] = {}
_replaced: list[tuple[KernelDef, KernelDef]] = []  # (overrider, the other origin's kernel it replaced)
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


def add_kernel(kernel: KernelDef, *, override: bool = False) -> None:
    """Insert ``kernel``.

    A second, different kernel under the same key from the same distribution needs
    ``override`` (it then replaces the first).  A kernel chosen over another
    distribution's for some call (same op, backend and label, overlapping type
    constraints, priority at least as high) needs ``override`` too, unless its
    distribution provides the op or the backend: then both stay registered.
    """
    global _version
    with _lock:
        bucket = _kernels.setdefault((kernel.op, kernel.backend), [])
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
        if same_key and override:
            old = same_key[0]
            warnings.warn(
                f"op {kernel.op!r}: kernel on backend {kernel.backend!r} from {old.provider} "
                f"overridden by {kernel.provider}",
                stacklevel=4,
            )
            bucket[bucket.index(old)] = kernel
            if origin_of(old.provider) != mine:
                _replaced.append((kernel, old))  # listed as an override; put back if the overrider goes
        else:
            # A kernel of another origin under the same key stays only when this one's origin
            # owns the op or backend and that kernel was registered before it knew so (a plugin
            # loaded earlier): the plugin layer then refuses that plugin.
            bucket.append(kernel)
        bucket.sort(key=_lookup_order)
        _changed()


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
        add_kernel(kernel, override=override)
        return impl

    return decorate


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
    """Drop every kernel ``provider`` registered (rollback of a failed plugin)."""
    global _version
    with _lock:
        present = {id(k) for bucket in _kernels.values() for k in bucket}
        for key, bucket in list(_kernels.items()):
            bucket[:] = [k for k in bucket if k.provider != provider]
            if not bucket:
                del _kernels[key]
        for new, old in list(_replaced):
            if new.provider == provider or old.provider == provider:
                _replaced.remove((new, old))
                if new.provider == provider and old.provider != provider and id(new) in present:
                    _kernels.setdefault((old.op, old.backend), []).append(old)  # the overridden kernel returns
                    _kernels[(old.op, old.backend)].sort(key=_lookup_order)
        _changed()


def remove_kernels(doomed: Iterable[KernelDef]) -> None:
    """Drop these kernels (a script's kernel that took over another distribution's)."""
    with _lock:
        ids = {id(k) for k in doomed}
        for key, bucket in list(_kernels.items()):
            bucket[:] = [k for k in bucket if id(k) not in ids]
            if not bucket:
                del _kernels[key]
        _changed()


def snapshot() -> dict[tuple[str, str], list[KernelDef]]:
    with _lock:
        return {k: list(v) for k, v in _kernels.items()}


def restore(snap: dict[tuple[str, str], list[KernelDef]]) -> None:
    global _version
    with _lock:
        _kernels.clear()
        _kernels.update({k: list(v) for k, v in snap.items()})
        _changed()
