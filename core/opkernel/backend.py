"""The API a backend author implements.

A backend is a class: a name, a priority, the native array type(s), an
availability check that never raises, and conversions from and to numpy.  The
class is cheap to import; heavy imports (cupy, pyopencl) happen in
``__init__``, which runs only when the backend is first used, so a missing
driver is an initialisation error for that backend, not for ``import opkernel``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from .dtypes import DType
from .probes import DeviceStatus
from .resources import ResourceMgr

_MANAGERS_LOCK = threading.Lock()

__all__ = ["Backend", "ElementwiseProgram", "resolve_array_types"]


@dataclass(frozen=True)
class ElementwiseProgram:
    """A group of elementwise nodes of a traced graph that ``ok.function`` asks a backend
    to compute in one call (``Backend.fuse_elementwise``; docs/functions.md, "Fusion").

    Values are *slots*: first the group's inputs, then one per instruction, in order.
    ``instructions[k]`` is ``(kernel, sources)``: the bound kernel of the k-th node (one
    the backend said it can fuse, ``Backend.fusable``) and the slots it reads; it writes
    slot ``len(layouts) + k``.  Every value has ``dtype``; every result has ``shape``
    (fully known).  Input ``j`` is broadcast to ``shape`` as ``layouts[j] = (inner, mod)``
    says: element ``i`` of the flattened result reads element ``(i // inner) % mod`` of
    the flattened input (``(1, size)``: the input has the result's shape; ``(1, 1)``: a
    scalar).  ``outputs`` are the slots the call returns, in order.  ``ops`` names the
    nodes' ops, for profiles and errors.

    ``donated`` (planned memory): inputs of the result's shape whose arrays the function
    may write results into instead of new arrays (the same array returned as that
    output).  Each is a new array that an earlier fused group or fusable kernel made, that
    no other value views, that nothing reads after this call and that the function's
    caller never sees (docs/functions.md, "Planned memory").  A backend that ignores it
    loses nothing but the reuse."""

    dtype: DType
    shape: tuple[int, ...]
    layouts: tuple[tuple[int, int], ...]
    instructions: tuple[tuple[Any, tuple[int, ...]], ...]
    outputs: tuple[int, ...]
    ops: tuple[str, ...]
    donated: tuple[int, ...] = ()


def resolve_array_types(cls: type[Backend]) -> tuple[type, ...]:
    """``cls.array_types`` with every import string (``"torch.Tensor"``,
    ``"pyopencl.array:Array"``) imported and resolved to its class.  ImportError or
    TypeError, naming the backend and the string, when one cannot be resolved."""
    import importlib

    resolved: list[type] = []
    for entry in cls.array_types:
        if not isinstance(entry, str):
            resolved.append(entry)
            continue
        module_name, sep, qualname = entry.partition(":")
        if not sep:
            module_name, _, qualname = entry.rpartition(".")
        try:
            value: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                value = getattr(value, part)
        except (ImportError, AttributeError, ValueError) as e:
            raise ImportError(
                f"backend {cls.name!r}: array_types entry {entry!r} cannot be imported: {type(e).__name__}: {e}"
            ) from e
        if not isinstance(value, type):
            raise TypeError(f"backend {cls.name!r}: array_types entry {entry!r} is {value!r}, not a class")
        resolved.append(value)
    return tuple(resolved)


class Backend:
    """Base class of every backend.  Subclass it and expose the subclass through
    the ``opkernel_register_backends`` hook.

    Class attributes:
      ``name``: the key kernels are registered under (``"cpu"``, ``"opencl"``).
      ``priority``: the default backend is the available one with the highest.
      ``array_types``: the native array classes a tensor of this backend holds: classes,
      or import strings (``"torch.Tensor"``) resolved when the backend is instantiated, so
      that discovering the plugin never imports its array library.  Read it on the instance
      (``be.array_types``), where it always holds classes.
      ``host_memory_is_native``: True when native arrays are numpy arrays in host
      memory, so a kernel's ``host_memory`` arguments need no conversion.
      ``override``: True when this class deliberately replaces another distribution's
      backend of the same name (the name belongs to the plugin whose entry point has
      that name); it is then warned about, listed by ``opkernel info`` and refused
      under ``OPKERNEL_STRICT_PLUGINS=1``.
    """

    name: ClassVar[str] = ""
    priority: ClassVar[int] = 0
    array_types: ClassVar[tuple[type | str, ...]] = ()
    host_memory_is_native: ClassVar[bool] = False
    override: ClassVar[bool] = False

    def __new__(cls, *args: Any, **kwargs: Any) -> Backend:
        self = super().__new__(cls)
        if any(isinstance(t, str) for t in cls.array_types):
            # An instance attribute, so the class keeps its strings and stays cheap to import.
            self.__dict__["array_types"] = resolve_array_types(cls)
        return self

    @property
    def resource_manager(self) -> ResourceMgr:
        """This backend's resources (``opkernel.resources``): what its ops share, by
        container and name.  Kernels reach it as ``ctx.resource_manager``."""
        mgr = self.__dict__.get("_resource_manager")
        if mgr is None:
            with _MANAGERS_LOCK:
                mgr = self.__dict__.setdefault("_resource_manager", ResourceMgr(self.name))
        return mgr  # type: ignore[no-any-return]

    @classmethod
    def availability(cls) -> str | None:
        """``None`` when the backend can be used here, else the reason it cannot.

        Must not raise.  It runs during discovery, so a backend that proves its
        device with a probe (compile and run a small program) keeps the verdict in
        ``opkernel.probes``, which caches it per device fingerprint.
        """
        return None

    @classmethod
    def devices(cls) -> list[DeviceStatus]:
        """Every device this backend can see, each with its probe's verdict, the one
        it uses marked ``chosen`` (``opkernel info``, and the test suite, which runs
        on every working device).  May probe devices the backend would not use; must
        not raise.  The default: no devices to report (a host backend)."""
        return []

    def from_numpy(self, array: np.ndarray) -> Any:
        """A native array holding ``array``'s data.

        Only a host backend (``host_memory_is_native``) may return an array sharing
        memory with ``array`` (``ok.tensor`` then copies it); a device backend must
        not read ``array`` after returning, since the caller may change it."""
        raise NotImplementedError

    def from_dlpack(self, source: Any, copy: bool | None = None) -> Any:
        """A native array of a DLPack exporter's data (``ok.from_dlpack``).

        The default takes it through ``numpy.from_dlpack``: a host backend keeps that
        array (sharing the exporter's memory unless ``copy``), a device backend uploads
        it.  Device backends whose arrays speak DLPack override it (cuda: CuPy)."""
        array = np.from_dlpack(source) if copy is None else np.from_dlpack(source, copy=copy)
        return array if self.host_memory_is_native else self.from_numpy(array)

    def stream_pointer(self) -> int | None:
        """The native stream new work is ordered on, as an address (a ``cudaStream_t`` on
        cuda), for kernels in C (docs/c-kernels.md); None on host backends and wherever
        work has no such stream."""
        return None

    def dlpack_exporter(self, value: Any, copy: bool | None = None) -> Any:
        """What ``Tensor.__dlpack__`` asks for its capsule: an object with ``__dlpack__``
        and ``__dlpack_device__`` viewing ``value`` (or a copy of it), or None where the
        backend's memory has no DLPack pointer.  No consumer may write to a tensor: an
        export that shares memory must be marked read-only.  The default: a read-only
        numpy view on a host backend, None elsewhere."""
        if not (self.host_memory_is_native and isinstance(value, np.ndarray)):
            return None
        view = value.view()
        view.flags.writeable = False
        return view

    def to_numpy(self, value: Any) -> np.ndarray:
        """A numpy copy (or view, on host backends) of a native array; synchronises."""
        raise NotImplementedError

    def copy(self, value: Any) -> Any:
        """A new native array with ``value``'s data, sharing no memory with it.

        A Variable calls it to copy itself before an in-place update while some
        other object still holds its memory (copy-on-write).  The default goes
        through host memory; device backends override it with a device copy."""
        return self.from_numpy(np.array(self.to_numpy(value), copy=True))

    def memory_owners(self, value: Any) -> tuple[Any, ...] | None:
        """The Python objects that every array sharing ``value``'s memory holds a
        reference to (``value`` itself, and its buffer object where views share a
        buffer rather than ``value``), or None when the backend cannot tell.

        A Variable counts the references to them before an in-place update: any
        holder besides the Variable (an op output that is a view of it, an array
        from ``.numpy()``) makes it copy first, so those keep their value.  The
        default None makes every in-place update copy: correct, but slower."""
        return None

    def empty(self, shape: tuple[int, ...], dtype: DType) -> Any:
        """A new uninitialised native array (what ``ctx.allocate_output`` returns)."""
        return self.from_numpy(np.empty(shape, dtype.np))

    def as_output(self, value: Any, dtype: DType) -> Any:
        """Normalise what a kernel returned into a native array of ``dtype``.

        Called on every kernel output, so it must be cheap when the value is
        already right.  The default accepts native arrays as they are.
        """
        return value

    def synchronize(self) -> None:
        """Wait until all work queued on this backend has finished."""

    def dirty(self, value: Any) -> None:
        """Forget any host-side copy kept of ``value``: its device memory is written in
        place.  Kernels with Ref inputs call it; ``check_op`` calls it so that reading an
        input back shows its device memory.  The default keeps no copies and does nothing."""

    def warmup(self) -> int:
        """Compile or build everything ahead of time (``ok.warmup``); returns how many
        programs were built.  Backends without compilation do nothing."""
        return 0

    def translate_error(self, error: Exception, op: str) -> Exception | None:
        """Turn a native error raised while running ``op`` (out of memory, a driver
        error) into an opkernel error naming the op, or None to let it through."""
        return None

    def memory(self) -> dict[str, int]:
        """Bytes in use / held by this backend's allocator, where it can tell."""
        return {}

    def describe(self) -> dict[str, str]:
        """Facts shown by ``opkernel info`` (device name, versions, capabilities)."""
        return {}

    def fusable(self, kernel: Any, dtype: DType) -> bool:
        """Whether ``fuse_elementwise`` can take a node whose bound kernel is ``kernel``
        (its ``impl``) computing ``dtype``.  Such a kernel, called alone, returns a new
        array and keeps no reference to its inputs (the planner of reused buffers relies on
        it).  The default: no node (no fusion)."""
        return False

    def fuse_elementwise(self, program: ElementwiseProgram) -> Callable[..., tuple[Any, ...]] | None:
        """A function computing ``program``: called with the inputs' native arrays (each
        of its input's shape), it returns new arrays for ``program.outputs``, each of
        ``program.shape``, with the values the nodes' kernels would give in turn (within
        their documented tolerance).  None declines (the nodes then run one by one)."""
        return None

    def supports_dtype(self, dtype: DType) -> bool:
        """Whether this device can hold ``dtype`` at all (e.g. float64 on some GPUs)."""
        return True

    def __repr__(self) -> str:
        return f"<backend {self.name!r}>"
