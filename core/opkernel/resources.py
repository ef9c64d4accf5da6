"""Resources: state that ops on one backend share, kept in that backend's resource
manager (TensorFlow's ResourceBase and ResourceMgr).

TensorFlow's guide says kernels must be thread-safe and should keep shared state in the
ResourceMgr, not in members of the kernel: a kernel object is built once per signature
and may run on several threads at once, and two kernels (a queue's enqueue and dequeue)
must find the same state.  A kernel reaches its backend's manager as
``ctx.resource_manager``::

    class Counter(ok.ResourceBase):
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.count = 0

    counter = ctx.resource_manager.lookup_or_create("", ctx.get_attr("shared_name"), Counter, Counter)

Resources live in *containers* (a name; ``""`` is the default container, TensorFlow's
"localhost") under a *name* (TensorFlow's ``shared_name``) and a type: a lookup names the
type it expects and fails if another kind of resource holds the name.  Every backend
instance has its own manager, so a resource is shared by the ops of one backend.
``cleanup(container)`` drops a container (its resources' ``close()`` runs, so a queue can
wake the ops still waiting on it).

A kernel may name its resource by attrs, as TensorFlow 1's ``container``/``shared_name``
ops do, or take a *handle*: a tensor of the ``resource`` dtype (the REGISTER_OP
grammar's ``resource`` type), whose elements are :class:`ResourceHandle` values naming
the backend, container, name and kind of a resource, as TensorFlow's ResourceHandle.  An
op making a handle (VarHandleOp, HashTableV2, FIFOQueueV2) outputs one; the ops using
the resource take it as an input.  A handle made with no ``shared_name`` is *anonymous*:
its resource is deleted when the last copy of the handle is gone, as TensorFlow's eager
resources are.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Callable, TypeVar

from .errors import AlreadyExistsError, InvalidArgumentError, OpTypeError, ResourceNotFoundError

__all__ = ["ResourceBase", "ResourceHandle", "ResourceMgr", "DEFAULT_CONTAINER"]

#: The container a resource goes to when none is named (TensorFlow's "localhost").
DEFAULT_CONTAINER = "localhost"

R = TypeVar("R", bound="ResourceBase")


class ResourceBase:
    """Base class of resources (TensorFlow's ResourceBase).  A resource must be
    thread-safe: every kernel that finds it may use it at once.  ``handle_kinds``: the
    kinds of handle (``ResourceHandle.kind``) that may name it; its class name by default."""

    handle_kinds: tuple[str, ...] = ()

    @classmethod
    def names_kind(cls, kind: str) -> bool:
        """Whether a handle of ``kind`` may name a resource of this class."""
        return kind in (cls.handle_kinds or (cls.__name__,))

    def debug_string(self) -> str:
        """A line saying what the resource holds (``opkernel`` messages and listings)."""
        return type(self).__name__

    def memory_used(self) -> int:
        """Bytes the resource holds, where it can tell; 0 otherwise."""
        return 0

    def close(self) -> None:
        """Called once when the resource leaves its manager (``delete``, ``cleanup``): let
        go of what it holds and wake whatever waits on it."""


class ResourceMgr:
    """The resources of one backend, by container and name (TensorFlow's ResourceMgr).
    Thread-safe; ``lookup_or_create`` creates at most once however many kernels race."""

    def __init__(self, owner: str = "") -> None:
        self.owner = owner
        self._lock = threading.RLock()
        self._containers: dict[str, dict[str, ResourceBase]] = {}

    @staticmethod
    def _container(container: str) -> str:
        if not isinstance(container, str):
            raise InvalidArgumentError(f"a resource container is named by a string, got {container!r}")
        return container or DEFAULT_CONTAINER

    def _where(self, container: str, name: str) -> str:
        backend = f" on backend {self.owner!r}" if self.owner else ""
        return f"resource {name!r} in container {container!r}{backend}"

    def create(self, container: str, name: str, resource: ResourceBase) -> None:
        """Add ``resource``; AlreadyExistsError when the name is taken."""
        if not isinstance(resource, ResourceBase):
            raise InvalidArgumentError(f"ResourceMgr.create: {resource!r} is not a ResourceBase")
        container = self._container(container)
        with self._lock:
            held = self._containers.setdefault(container, {})
            if name in held:
                raise AlreadyExistsError(f"{self._where(container, name)} already exists ({held[name].debug_string()})")
            held[name] = resource

    def lookup(self, container: str, name: str, kind: type[R]) -> R:
        """The resource of type ``kind`` under the name; ResourceNotFoundError when there
        is none, InvalidArgumentError when another kind holds the name."""
        container = self._container(container)
        with self._lock:
            found = self._containers.get(container, {}).get(name)
        if found is None:
            raise ResourceNotFoundError(f"{self._where(container, name)} does not exist")
        return self._checked(container, name, found, kind)

    def lookup_or_create(self, container: str, name: str, kind: type[R], creator: Callable[[], R]) -> R:
        """The resource under the name, created by ``creator()`` if there is none (once,
        however many callers race; the creator runs under the manager's lock)."""
        container = self._container(container)
        with self._lock:
            found = self._containers.get(container, {}).get(name)
            if found is None:
                made = creator()
                if not isinstance(made, ResourceBase):
                    raise InvalidArgumentError(f"{self._where(container, name)}: the creator made {made!r}, not a ResourceBase")
                # The creator may have run a garbage collection whose finalizers discarded
                # resources (anonymous handles), and with them an emptied container: look
                # the container up again after it.
                found = self._containers.setdefault(container, {}).setdefault(name, made)
        return self._checked(container, name, found, kind)

    def _checked(self, container: str, name: str, found: ResourceBase, kind: type[R]) -> R:
        if not isinstance(found, kind):
            raise InvalidArgumentError(
                f"{self._where(container, name)} is a {type(found).__name__} ({found.debug_string()}), "
                f"not a {kind.__name__}"
            )
        return found

    def delete(self, container: str, name: str, kind: type[ResourceBase] = ResourceBase) -> None:
        """Remove the resource (checking its type) and close it."""
        container = self._container(container)
        with self._lock:
            found = self._checked(container, name, self.lookup(container, name, ResourceBase), kind)
            del self._containers[container][name]
            if not self._containers[container]:
                del self._containers[container]
        found.close()

    def discard(self, container: str, name: str) -> None:
        """Remove and close the resource under the name if there is one (an anonymous
        handle's finalizer; never raises)."""
        with self._lock:
            held = self._containers.get(self._container(container), {})
            found = held.pop(name, None)
            if not held:
                self._containers.pop(self._container(container), None)
        if found is not None:
            found.close()

    def cleanup(self, container: str) -> None:
        """Drop a container and close its resources (nothing happens for an unknown one)."""
        with self._lock:
            dropped = self._containers.pop(self._container(container), {})
        for resource in dropped.values():
            resource.close()

    def containers(self) -> list[str]:
        with self._lock:
            return sorted(self._containers)

    def names(self, container: str = "") -> list[str]:
        """The names in a container, sorted."""
        with self._lock:
            return sorted(self._containers.get(self._container(container), {}))

    def debug_string(self) -> str:
        with self._lock:
            rows = [
                f"{c}/{n}: {r.debug_string()}" for c, held in sorted(self._containers.items()) for n, r in sorted(held.items())
            ]
        return "\n".join(rows)


class ResourceHandle:
    """What a ``resource`` tensor holds: the resource's backend, container, name and
    kind (the type name of the resource, e.g. ``"Var"``), and what the op that made it
    knows of the values behind it (``dtypes_and_shapes``: a variable's dtype and shape).
    Immutable; two handles are equal when they name the same resource.

    ``anonymous`` handles name a resource made for them alone: the resource is deleted
    from ``manager`` when the handle is garbage collected (every copy of a handle tensor
    holds the same handle object)."""

    __slots__ = ("backend", "container", "name", "kind", "dtypes_and_shapes", "anonymous", "__weakref__")
    #: What ``opkernel.dtypes.of_array`` looks for: an object array of these is a ``resource`` tensor.
    is_resource_handle = True

    backend: str
    container: str
    name: str
    kind: str
    dtypes_and_shapes: tuple[tuple[Any, Any], ...]
    anonymous: bool

    def __init__(
        self, backend: str, container: str, name: str, kind: str,
        dtypes_and_shapes: tuple[tuple[Any, Any], ...] = (), *, manager: ResourceMgr | None = None,
    ) -> None:
        for field_, value in (("backend", backend), ("container", container), ("name", name), ("kind", kind)):
            if not isinstance(value, str):
                raise InvalidArgumentError(f"ResourceHandle: {field_} is a string, got {value!r}")
        set_ = object.__setattr__
        set_(self, "backend", backend)
        set_(self, "container", container or DEFAULT_CONTAINER)
        set_(self, "name", name)
        set_(self, "kind", kind)
        set_(self, "dtypes_and_shapes", tuple(dtypes_and_shapes))
        set_(self, "anonymous", manager is not None)
        if manager is not None:
            weakref.finalize(self, manager.discard, self.container, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a ResourceHandle is immutable")

    def _key(self) -> tuple[str, str, str, str]:
        return (self.backend, self.container, self.name, self.kind)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResourceHandle) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        extra = " (anonymous)" if self.anonymous else ""
        return f"<ResourceHandle {self.kind} {self.name!r} in container {self.container!r} on {self.backend!r}{extra}>"

    def __reduce__(self) -> Any:
        raise OpTypeError(
            f"{self!r} cannot be pickled or saved: a handle names a resource of one process's backend "
            "(save the values behind it instead)"
        )


_ANONYMOUS = itertools.count()


def anonymous_name(kind: str) -> str:
    """A name no other resource of this process has (TensorFlow's anonymous resources)."""
    return f"_Anonymous{kind}_{next(_ANONYMOUS)}"
