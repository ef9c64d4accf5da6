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
from dataclasses import dataclass, field
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


def add_kernel(kernel: KernelDef, *, override: bool = False) -> None:
    """Insert ``kernel``; a second, different kernel under the same key needs ``override``."""
    global _version
    with _lock:
        bucket = _kernels.setdefault((kernel.op, kernel.backend), [])
        for i, old in enumerate(bucket):
            if old.key != kernel.key:
                continue
            if old.impl is kernel.impl:
                return
            if not override:
                raise AlreadyExistsError(
                    f"op {kernel.op!r}: a kernel for backend {kernel.backend!r} with "
                    f"{kernel.describe_constraints()}, label={kernel.label!r} is already registered by "
                    f"{old.provider}; {kernel.provider} tried to register another. "
                    "Pass override=True to replace it, or use a label or priority.",
                    op=kernel.op,
                )
            warnings.warn(
                f"op {kernel.op!r}: kernel on backend {kernel.backend!r} from {old.provider} "
                f"overridden by {kernel.provider}",
                stacklevel=4,
            )
            bucket[i] = kernel
            break
        else:
            bucket.append(kernel)
        bucket.sort(key=lambda k: -k.priority)
        _changed()


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
    arrive as numpy arrays even on device backends.
    """
    if isinstance(host_memory, str):
        host_memory = (host_memory,)
    parsed = _parse_constraints(op, type_constraints)
    hm = frozenset(host_memory)

    def decorate(impl: K) -> K:
        if not callable(impl):
            raise OpSpecError(f"kernel for op {op!r}: expected a function or OpKernel subclass, got {impl!r}", op=op)
        add_kernel(KernelDef(op, backend, impl, parsed, label, priority, hm, current_provider()), override=override)
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
        for key, bucket in list(_kernels.items()):
            bucket[:] = [k for k in bucket if k.provider != provider]
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
