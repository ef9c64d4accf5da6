"""The OpenCL backend: tensors are ``pyopencl.array.Array`` on one device.

pyopencl is imported when the backend is first initialised (``availability``
imports it lazily, inside a try), never when the plugin is imported.

Work is queued on one in-order command queue and nothing waits for the device
after an op: the only synchronisation points are ``to_numpy`` (and so
host-memory inputs computed on the device) and ``synchronize``.  Small host
arrays uploaded through ``from_numpy`` keep a host copy, so shapes, axes and
other host-memory arguments never need a round trip.  String tensors have no
device representation and stay numpy arrays in host memory.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

import opkernel as ok
from opkernel.errors import BackendUnavailableError, InternalError, InvalidArgumentError, ResourceExhaustedError
from opkernel.hostmem import host_available_bytes

from . import device_kernels
from .devices import ENV_DEVICE, availability, report
from .devices import choose as _select
from .devices import fork_reason as _fork_reason
from .devices import forked_message as _forked_message
from .devices import platform_pid as _platform_pid
from .programs import ProgramCache, configure_environment

if TYPE_CHECKING:
    from opkernel.probes import DeviceStatus

    from .device_kernels import Program

#: Host arrays up to this many bytes keep a host copy next to the device buffer.
HOST_COPY_BYTES = 1 << 16

_MAX_ELEMENTS = 2**31 - 1
#: Allocations on a CPU device above this size are checked against the host's free memory.
_HOST_CHECKED_BYTES = 64 << 20
#: Host memory such an allocation must leave for the driver's own (compiling, launching).
_DRIVER_HEADROOM = 256 << 20
_OOM_CODES = {-4, -5, -6}  # MEM_OBJECT_ALLOCATION_FAILURE, OUT_OF_RESOURCES, OUT_OF_HOST_MEMORY
#: How OpenCLBackend._bound treats a kernel argument, by class: a memory object (set at each
#: launch); a numpy integer (bound once per value, keyed by the value: a kernel argument has
#: one type, so equal values set equal bytes); another by-value argument, a float scalar or
#: a dims_t array (bound once per value, keyed by its bytes: -0.0 == 0.0 and nan != nan);
#: or anything else (local memory, Python numbers), which makes the launch set every
#: argument itself.
_BUFFER, _BY_VALUE, _UNBOUND, _INTEGER = 0, 1, 2, 3

_TYPE_NAMES = {
    "bool": "uchar", "int8": "char", "uint8": "uchar", "int16": "short", "uint16": "ushort",
    "int32": "int", "uint32": "uint", "int64": "long", "uint64": "ulong",
    "float16": "half", "float32": "float", "float64": "double",
}


def ctype(dtype: ok.DType) -> str:
    """The OpenCL C type holding ``dtype`` (bool is one byte, as in numpy)."""
    return _TYPE_NAMES[dtype.name]


class DeviceOutOfMemory(MemoryError):
    """An allocation the device refused; ``translate_error`` names the op."""

    def __init__(self, requested: int, device: str, cause: str) -> None:
        super().__init__(f"could not allocate {requested} bytes on {device}: {cause}")
        self.requested = requested
        self.cause = cause


#: The methods through which work reaches the driver, disabled in a forked child (``_disown``).
_DRIVER_METHODS = ("new_array", "from_numpy", "to_numpy", "copy", "synchronize", "launch", "launch1d", "warmup")

#: Backends initialised in this process, so that a forked child can disable them.
_instances: weakref.WeakSet[OpenCLBackend] = weakref.WeakSet()
_fork_hook: list[bool] = []
#: The process that loaded the OpenCL platform (``_platform_pid``), and ``_fork_reason``,
#: ``_forked_message`` and ``_select`` that keep it, live in ``devices`` (imported above).


def _disown_after_fork() -> None:
    for be in list(_instances):
        be._disown()


class _Forked:
    """Stands in for a forked child's ``ProgramCache``: every use raises ``error``."""

    def __init__(self, error: BackendUnavailableError) -> None:
        self._error = error

    def __getattr__(self, name: str) -> Any:
        raise self._error


class OpenCLBackend(ok.Backend):
    name = "opencl"
    priority = 10
    array_types: ClassVar[tuple[type, ...]] = ()  # pyopencl.array.Array, filled in at initialisation

    _availability: ClassVar[dict[str, str | None]] = {}

    @classmethod
    def availability(cls) -> str | None:
        """None when a device passed its probe (``devices``), else why none can be used."""
        forked = _fork_reason()
        if forked is not None:
            return forked
        spec = os.environ.get(ENV_DEVICE, "")
        if spec in cls._availability:
            return cls._availability[spec]
        reason = cls._availability[spec] = availability(spec)
        return reason

    @classmethod
    def devices(cls) -> list[DeviceStatus]:
        """Every OpenCL device of every platform with its probe's verdict (``devices.report``:
        never raises, availability() says why there are none)."""
        return report(os.environ.get(ENV_DEVICE, ""))

    def __init__(self) -> None:
        forked = _fork_reason()
        if forked is not None:
            raise RuntimeError(forked)
        configure_environment()
        import pyopencl as cl
        import pyopencl.array as cl_array
        import pyopencl.tools as cl_tools

        chosen, reason = _select(cl, os.environ.get(ENV_DEVICE, ""))
        if chosen is None:
            raise RuntimeError(reason)
        device = chosen.device
        self.device_id = chosen.id
        type(self).array_types = (cl_array.Array,)
        self.cl = cl
        self.Array = cl_array.Array
        self.device = device
        self.device_name = device.name.strip()
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, device)
        self._pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(self.queue))
        ext = device.extensions.split()
        self.fp64 = "cl_khr_fp64" in ext or bool(getattr(device, "double_fp_config", 0))
        self.fp16 = "cl_khr_fp16" in ext
        self.is_cpu = bool(device.type & cl.device_type.CPU)
        self.max_alloc = int(device.max_mem_alloc_size)
        self.max_work_group = int(device.max_work_group_size)
        self.base_align = max(1, int(device.mem_base_addr_align) // 8)  # bytes; every buffer starts so aligned
        # launch1d's work-groups.  Intel's CPU runtime runs each work-group as one task, whose
        # start costs about as much as 64 elements' work: groups of 1024 took Neg on 393k
        # floats from 0.38 to 0.32 ms (interleaved, medians).  PoCL vectorises groups of 64.
        intel_cpu = self.is_cpu and "intel" in device.platform.vendor.lower()
        self.group1d = 1024 if intel_cpu and self.max_work_group >= 1024 else 64
        # Row kernels reading their rows as vectors of 8 on CPU devices (common.vector_rows);
        # OPKERNEL_OPENCL_ROWS=scalar keeps the scalar loops everywhere.
        self.row_vectors = self.is_cpu and os.environ.get("OPKERNEL_OPENCL_ROWS", "").strip().lower() != "scalar"
        self.programs = ProgramCache(self)
        self.launch_lock = threading.Lock()  # a Kernel's arguments are shared state
        self._pending: deque[Any] = deque()  # events of uploads still reading host memory
        self._bound_kernels: dict[tuple[Any, ...], Any] = {}
        self._bound_values: dict[tuple[Any, int], tuple[Any, tuple[Any, ...]]] = {}
        self._group_limits: dict[Any, int] = {}
        self._arg_kinds: dict[type, int] = {}
        self._tls = threading.local()
        self._geometry: dict[tuple[tuple[int, ...], np.dtype[Any]], tuple[int, tuple[int, ...]]] = {}
        self.syncs = 0  # blocking waits for the device (to_numpy, synchronize): tests watch this
        _instances.add(self)
        if not _fork_hook:
            _fork_hook.append(True)
            os.register_at_fork(after_in_child=_disown_after_fork)

    def _disown(self) -> None:
        """Make every use of this backend in a forked child raise.  The child has the
        parent's context and queues but none of the driver's threads (PoCL's, a GPU
        driver's): its first wait for the device would block forever.  Instance
        attributes shadow the driver-facing methods, so the parent pays nothing."""
        error = BackendUnavailableError(_forked_message(_platform_pid[0]), backend=self.name)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise error

        for name in _DRIVER_METHODS:
            setattr(self, name, refuse)
        self.programs = _Forked(error)  # type: ignore[assignment]

    # ------------------------------------------------------------ arrays

    def _allocate(self, nbytes: int) -> Any:
        self._tls.requested = nbytes
        if nbytes > self.max_alloc:
            raise DeviceOutOfMemory(nbytes, self.device_name, f"larger than the device's largest allocation ({self.max_alloc} bytes)")
        if self.is_cpu and nbytes > _HOST_CHECKED_BYTES:
            # A CPU device's buffers are host memory, and PoCL does not check every
            # malloc (a launch after a buffer that took the last of the memory crashed
            # the process): refuse what the host cannot give with room to spare.
            room = host_available_bytes()
            if room is not None and nbytes + _DRIVER_HEADROOM > room:
                self._pool.free_held()
                room = host_available_bytes()
                if room is not None and nbytes + _DRIVER_HEADROOM > room:
                    raise DeviceOutOfMemory(nbytes, self.device_name, f"the host, whose memory this CPU device allocates, has {room} bytes available")
        try:
            return self._pool.allocate(nbytes)
        except self.cl.Error as e:
            if getattr(e, "code", None) not in _OOM_CODES and not isinstance(e, self.cl.MemoryError):
                raise
            self._pool.free_held()
            try:
                return self._pool.allocate(nbytes)
            except self.cl.Error as e2:
                raise DeviceOutOfMemory(nbytes, self.device_name, str(e2)) from e2

    def new_array(self, shape: tuple[int, ...], dtype: np.dtype[Any], data: Any = None) -> Any:
        """A C-contiguous device array (pyopencl's fast constructor: no per-call validation)."""
        key = (shape, dtype)
        geometry = self._geometry.get(key)
        if geometry is None:
            size, acc, steps = 1, dtype.itemsize, []
            for d in reversed(shape):
                steps.append(acc)
                acc *= max(d, 1)
                size *= d
            geometry = self._geometry[key] = (size, tuple(reversed(steps)))
            if len(self._geometry) > 4096:
                self._geometry.clear()
        size, strides = geometry
        if size > _MAX_ELEMENTS:
            raise InvalidArgumentError(
                f"backend 'opencl': a tensor of shape {list(shape)} has {size} elements; kernels index with "
                f"32-bit integers, so at most {_MAX_ELEMENTS} are supported"
            )
        if data is None and size:
            data = self._allocate(size * dtype.itemsize)
        return self.Array(
            None, shape, dtype, data=data, strides=strides, _fast=True, _size=size,
            _context=self.context, _queue=self.queue,
        )

    def empty(self, shape: tuple[int, ...], dtype: ok.DType) -> Any:
        return self.new_array(tuple(int(d) for d in shape), dtype.np)

    def empty_like(self, x: Any, dtype: np.dtype[Any] | None = None, shape: tuple[int, ...] | None = None) -> Any:
        return self.new_array(x.shape if shape is None else shape, x.dtype if dtype is None else dtype)

    def view(self, x: Any, shape: tuple[int, ...]) -> Any:
        """The same buffer under another C-contiguous shape (Reshape, ExpandDims, Squeeze)."""
        # No host copy travels with a view: the buffer may be a Variable's, which
        # kernels update in place.
        return self.new_array(tuple(shape), x.dtype, data=x.base_data)

    def from_numpy(self, array: np.ndarray) -> Any:
        if array.dtype.kind in "OUS":
            # Strings have no device representation: such tensors stay in host memory.
            return np.array(array, copy=True)
        small = array.nbytes <= HOST_COPY_BYTES
        host = np.array(array, order="C", copy=True) if small else np.ascontiguousarray(array)
        try:
            out = self.new_array(host.shape, host.dtype)
        except DeviceOutOfMemory as e:
            raise ResourceExhaustedError(
                f"ok.tensor: out of memory on OpenCL device {self.device_name!r} uploading {e.requested} bytes: {e.cause}",
                requested_bytes=e.requested, backend=self.name,
            ) from e
        if out.size:
            if small or not np.may_share_memory(host, array):
                # ``host`` is this call's own copy: the write may read it after we return.
                self._track_upload(self.cl.enqueue_copy(self.queue, out.base_data, host, is_blocking=False))
            else:
                # ``host`` is the caller's buffer, which a data loader refills as soon as
                # this returns: the write must be done by then.  Blocking waits for the
                # kernels queued before it, but a host copy of a large array cost more
                # (2-3.5x the upload on PoCL; benchmarks/opencl_upload.py).
                self.cl.enqueue_copy(self.queue, out.base_data, host, is_blocking=True)
                self.syncs += 1
                self._pending.clear()  # an in-order queue: every earlier upload has finished
        if small:
            out._ok_host = host
        return out

    def _track_upload(self, evt: Any) -> None:
        pending = self._pending
        pending.append(evt)
        # Drop finished uploads (and the host memory they hold); dropping an unfinished
        # one would wait for it.  The queue is in order, so look at the oldest only.
        complete = self.cl.command_execution_status.COMPLETE
        try:
            while pending[0].command_execution_status == complete:
                pending.popleft()
        except IndexError:  # emptied here or by another thread
            pass

    def host(self, value: Any) -> np.ndarray | None:
        """The host copy of a small array uploaded from numpy, if it has one (no waiting)."""
        return getattr(value, "_ok_host", None)

    def copy(self, value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return np.array(value, copy=True)
        out = self.new_array(tuple(value.shape), value.dtype)
        if value.size:
            nbytes = value.size * value.dtype.itemsize
            self.cl.enqueue_copy(self.queue, out.base_data, value.base_data, byte_count=nbytes, src_offset=value.offset)
        return out

    def memory_owners(self, value: Any) -> tuple[Any, ...] | None:
        if isinstance(value, np.ndarray):
            return (value,) if value.base is None else None
        # Identity returns the array itself; Reshape and the other views are new arrays
        # on the same buffer object (``view``): count both.
        return (value,) if value.base_data is None else (value, value.base_data)

    def to_numpy(self, value: Any) -> np.ndarray:
        if isinstance(value, np.ndarray):
            return value
        host = getattr(value, "_ok_host", None)
        if host is not None:
            return host.copy()  # type: ignore[no-any-return]
        out = np.empty(value.shape, value.dtype)
        if value.size:
            self.cl.enqueue_copy(self.queue, out, value.base_data, src_offset=value.offset, is_blocking=True)
            self.syncs += 1
            self._pending.clear()  # an in-order queue: every earlier upload has finished
        return out

    def as_output(self, value: Any, dtype: ok.DType) -> Any:
        if type(value) is self.Array:
            # Kernels here only make C-contiguous arrays (new_array, view): checking the
            # strides on every output would cost more than many kernels do.
            if value.offset == 0 and value.dtype == dtype.np:
                return value
            raise InternalError(f"an OpenCL kernel returned a {value.dtype} array at offset {value.offset}, expected {dtype.name}")
        if dtype.name == "string" and isinstance(value, np.ndarray):
            return value
        return self.from_numpy(np.asarray(value, dtype.np))

    def dirty(self, value: Any) -> None:
        """Forget the host copy of an array a kernel writes in place (Ref inputs)."""
        if getattr(value, "_ok_host", None) is not None:
            value._ok_host = None

    def synchronize(self) -> None:
        self.queue.finish()
        self.syncs += 1
        self._pending.clear()

    # ------------------------------------------------------------ programs

    def warmup(self) -> int:
        return self.programs.build_all(device_kernels.warm)

    def build_program(self, source: str, *, name: str, options: Sequence[str] = (), op: str | None = None) -> Program:
        """Build OpenCL C ``source`` with compiler ``options`` on this device, once per
        (source, options), through the verified disk cache; ``name`` and ``op`` appear in
        its errors.  A program an op package declares with ``DeviceProgram`` is also
        built by ``ok.warmup``; one built here only when first asked for."""
        return device_kernels.build(self, source, options, name, op)

    #: Compiles fused elementwise groups of traced graphs: installed by elementwise.py (the
    #: layer above, which holds the ops' expressions) when the kernels are registered.
    fuser: ClassVar[Any] = None

    def fusable(self, kernel: Any, dtype: ok.DType) -> bool:
        fuser = type(self).fuser
        return fuser is not None and bool(fuser.fusable(self, kernel, dtype))

    def fuse_elementwise(self, program: Any) -> Any:
        fuser = type(self).fuser
        return None if fuser is None else fuser.compile(self, program)

    #: Kernel objects with their by-value arguments already set (see ``_bound``).
    BOUND_KERNELS = 1024

    def _bound(self, kernel: Any, args: tuple[Any, ...]) -> Any:
        """A kernel object holding ``args``.  By-value arguments (sizes, strides, the
        ``dims_t`` structs) are set once, on a kernel object kept for that set of
        values; only memory objects are set at each launch.  PoCL's clSetKernelArg
        costs ~8 µs per by-value argument and ~0.1 µs per buffer, so a MatMul's
        eleven size arguments used to cost more than running it.  Call with
        ``launch_lock`` held (a kernel object's arguments are shared state)."""
        kinds = self._arg_kinds
        key: list[Any] = [kernel]
        buffers: list[tuple[int, Any]] = []
        for i, a in enumerate(args):
            kind = kinds.get(type(a))
            if kind is None:
                kind = self._arg_kind(type(a))
            if kind == _BUFFER:
                key.append(None)
                buffers.append((i, a))
            elif kind == _INTEGER:
                key.append(a)  # hashing a numpy integer: a third of the cost of its bytes
            elif kind == _BY_VALUE:
                # Its bytes are what set_arg passes: the key needs nothing else (its
                # dtype's name would cost more than the rest of the key).
                key.append(a.tobytes())
            else:  # local memory, None, Python numbers: set as they come
                return None
        bound = self._bound_kernels.get(tuple(key))
        if bound is None:
            if len(self._bound_kernels) >= self.BOUND_KERNELS:
                self._bound_kernels.clear()
            bound = self.cl.Kernel(kernel.program, kernel.function_name)
            memory = {i for i, _ in buffers}
            for i, a in enumerate(args):
                if i not in memory:
                    bound.set_arg(i, a)
            self._bound_kernels[tuple(key)] = bound
        for i, b in buffers:
            bound.set_arg(i, b)
        return bound

    def _arg_kind(self, cls: type) -> int:
        """How ``_bound`` treats a kernel argument of class ``cls`` (cached per class)."""
        if issubclass(cls, self.cl.MemoryObjectHolder):
            kind = _BUFFER
        elif issubclass(cls, (np.integer, np.bool_)):
            kind = _INTEGER
        elif issubclass(cls, (np.generic, np.ndarray)):
            kind = _BY_VALUE
        else:
            kind = _UNBOUND
        self._arg_kinds[cls] = kind
        return kind

    def _bound_to(self, kernel: Any, buffers: tuple[Any, ...], values: tuple[Any, ...]) -> Any:
        """``_bound`` for arguments ``*buffers, *values`` whose by-value part is a tuple the
        caller reuses (from a cache): the kernel object is found by the tuple's identity,
        without reading the values.  The entry keeps the tuple alive, so no other tuple
        can take its identity while the entry exists."""
        key = (kernel, id(values))
        entry = self._bound_values.get(key)
        if entry is None:
            if len(self._bound_values) >= self.BOUND_KERNELS:
                self._bound_values.clear()
            bound = self.cl.Kernel(kernel.program, kernel.function_name)
            for i, v in enumerate(values, len(buffers)):
                bound.set_arg(i, v)
            entry = self._bound_values[key] = (bound, values)
        bound = entry[0]
        for i, b in enumerate(buffers):
            bound.set_arg(i, b)
        return bound

    def _enqueue(self, kernel: Any, gsize: tuple[int, ...], lsize: tuple[int, ...] | None, args: tuple[Any, ...],
                 offset: tuple[int, ...] | None, values: tuple[Any, ...] | None = None) -> None:
        bound = self._bound(kernel, args) if values is None else self._bound_to(kernel, args, values)
        if bound is None:
            kernel(self.queue, gsize, lsize, *args, global_offset=offset)
        else:
            self.cl.enqueue_nd_range_kernel(self.queue, bound, gsize, lsize, offset)  # the offset: positional, named differently in pyopencl and its stubs

    def launch(self, kernel: Any, gsize: tuple[int, ...], lsize: tuple[int, ...] | None, *args: Any,
               offset: tuple[int, ...] | None = None, values: tuple[Any, ...] | None = None) -> None:
        """Queue one kernel launch; never waits.  With ``values``, the kernel's arguments
        are ``*args`` (memory objects) then ``*values``, a tuple of by-value arguments
        that the caller caches and passes again for the same values (``_bound_to``:
        neither made nor read at each launch)."""
        with self.launch_lock:
            self._enqueue(kernel, gsize, lsize, args, offset, values)

    def launch1d(self, kernel: Any, n: int, *args: Any, values: tuple[Any, ...] | None = None,
                 group: int | None = None) -> None:
        """One work-item per element, for kernels without a bounds check: the bulk in
        work-groups of ``group`` (default ``group1d``), then of 64 (PoCL vectorises
        those), the remainder in groups of 1.  ``values``: as for ``launch``."""
        G = self.group1d if group is None else group
        if G > 64:
            G = min(G, self._group_limit(kernel)) // 64 * 64  # whole groups of 64 within the kernel's own limit
        big = n - n % G if G > 64 else 0
        main = n - n % 64
        with self.launch_lock:
            if big:
                self._enqueue(kernel, (big,), (G,), args, None, values)
            if main > big:
                self._enqueue(kernel, (main - big,), (64,), args, (big,) if big else None, values)
            if n != main:
                self._enqueue(kernel, (n - main,), (1,), args, (main,) if main else None, values)

    def _group_limit(self, kernel: Any) -> int:
        """The largest work-group ``kernel`` takes on this device (CL_KERNEL_WORK_GROUP_SIZE,
        which a runtime may set below the device's for a kernel using much private memory),
        read once per kernel."""
        limit = self._group_limits.get(kernel)
        if limit is None:
            try:
                limit = int(kernel.get_work_group_info(self.cl.kernel_work_group_info.WORK_GROUP_SIZE, self.device))
            except Exception:  # no answer: the groups of 64 every device takes
                limit = 64
            if len(self._group_limits) >= self.BOUND_KERNELS:
                self._group_limits.clear()
            self._group_limits[kernel] = limit
        return limit

    # ------------------------------------------------------------ errors and facts

    def translate_error(self, error: Exception, op: str) -> Exception | None:
        cl = self.cl
        if isinstance(error, DeviceOutOfMemory):
            return self._oom(op, error.requested, error.cause)
        if isinstance(error, UnicodeDecodeError):  # string tensors are parsed on the host (StringToNumber)
            bad = error.object[error.start:error.end]
            return InvalidArgumentError(
                f"op {op!r}: a string is not valid {error.encoding} text: {bytes(bad)!r} at byte {error.start} "
                f"of {bytes(error.object)[:64]!r} ({error.reason}); expected {error.encoding} text",
                op=op, backend=self.name,
            )
        if isinstance(error, cl.Error):
            code = getattr(error, "code", None)
            routine = getattr(error, "routine", "") or "?"
            try:
                code_name = cl.status_code.to_string(code) if code is not None else "?"
            except Exception:
                code_name = str(code)
            if isinstance(error, cl.MemoryError) or code in _OOM_CODES:
                return self._oom(op, getattr(self._tls, "requested", None), f"{code_name} in {routine}")
            return InternalError(
                f"op {op!r}: OpenCL error {code_name} ({code}) in {routine} on device {self.device_name!r}: {error}",
                op=op, backend=self.name, cl_error=code_name,
            )
        return None

    def _oom(self, op: str, requested: int | None, cause: str) -> ResourceExhaustedError:
        stats = self.memory()
        amount = f"{requested} bytes ({requested / 2**20:.1f} MiB)" if requested is not None else "memory"
        return ResourceExhaustedError(
            f"op {op!r}: out of memory on OpenCL device {self.device_name!r} allocating {amount}: {cause}. "
            f"The backend holds {stats.get('active_bytes', 0)} bytes in live tensors; the device's largest "
            f"allocation is {self.max_alloc} bytes.",
            op=op, backend=self.name, requested_bytes=requested,
        )

    def memory(self) -> dict[str, int]:
        pool = self._pool
        return {
            "active_bytes": int(pool.active_bytes), "held_bytes": int(pool.managed_bytes),
            "active_blocks": int(pool.active_blocks), "held_blocks": int(pool.held_blocks),
        }

    def describe(self) -> dict[str, str]:
        d = self.device
        return {
            "device": self.device_name,
            "id": self.device_id,
            "platform": d.platform.name.strip(),
            "opencl": d.version.strip(),
            "driver": d.driver_version.strip(),
            "compute_units": str(d.max_compute_units),
            "global_memory": f"{d.global_mem_size / 2**30:.1f} GiB",
            "float64": "yes" if self.fp64 else "no",
            "float16": "native (cl_khr_fp16)" if self.fp16 else "stored as half, computed in float32",
            "pyopencl": self.cl.VERSION_TEXT,
            "program_cache": self.programs.location(),
        }

    def supports_dtype(self, dtype: ok.DType) -> bool:
        # What the backend holds and computes with: float64 needs cl_khr_fp64; float16 is
        # stored as half and computed in float32 (vload_half/vstore_half are core OpenCL);
        # strings stay in host memory.  bfloat16, complex and quantized tensors can be
        # stored and moved (as bytes) but have no arithmetic kernels, so they are not claimed.
        if dtype.name == "float64":
            return self.fp64
        return dtype.name in _TYPE_NAMES or dtype.name == "string"


device_kernels.register_backend_class(OpenCLBackend)
