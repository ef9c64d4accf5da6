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

Handles to resources as tensors (the ``resource`` type of the REGISTER_OP grammar,
VarHandleOp and the ops taking a handle) are not built yet: a kernel names its resource
by attrs, as TensorFlow 1's ``container``/``shared_name`` ops do.
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

from .errors import AlreadyExistsError, InvalidArgumentError, ResourceNotFoundError

__all__ = ["ResourceBase", "ResourceMgr", "DEFAULT_CONTAINER"]

#: The container a resource goes to when none is named (TensorFlow's "localhost").
DEFAULT_CONTAINER = "localhost"

R = TypeVar("R", bound="ResourceBase")


class ResourceBase:
    """Base class of resources (TensorFlow's ResourceBase).  A resource must be
    thread-safe: every kernel that finds it may use it at once."""

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
            held = self._containers.setdefault(container, {})
            found = held.get(name)
            if found is None:
                made = creator()
                if not isinstance(made, ResourceBase):
                    raise InvalidArgumentError(f"{self._where(container, name)}: the creator made {made!r}, not a ResourceBase")
                held[name] = found = made
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
