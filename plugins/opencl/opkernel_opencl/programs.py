"""OpenCL programs: the registry of program families, and the per-device cache.

A *family* renders the OpenCL C source of one program for one dtype (the
elementwise kernels of ``Add`` for float32, the MatMul kernels for int32, ...).
Kernel modules declare their families at import time with ``family``; the
cache builds a program the first time one of its kernels is asked for, once per
(source, options) on the backend's device, and ``build_all`` (``ok.warmup``)
builds every family for every dtype the device supports.

Built programs are kept on disk by ``BinaryStore`` (the driver's binary, or for
PoCL the files it compiled for the program), never through pyopencl's own cache
(which unpickles its index files).  The directory is
``$OPKERNEL_OPENCL_CACHE_DIR`` (default ``$XDG_CACHE_HOME/opkernel/opencl``, i.e.
``~/.cache/opkernel/opencl``; ``off`` builds from source every time), used only
when private to this user (``opkernel.cachedirs``).  An entry is keyed by the
device, driver, pyopencl and opkernel versions, options and source, and holds
the SHA-256 of its content: one that does not match is rebuilt from source,
never loaded.  PoCL compiles the shared objects it runs into a cache of its
own and loads whatever it finds there under the expected name; it gets a fresh
private directory per process (``configure_environment``).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from opkernel.cachedirs import configured_dir, private_dir, read_entry, unsafe_reason, write_entry
from opkernel.errors import InternalError

from . import _version

if TYPE_CHECKING:
    from .backend import OpenCLBackend

ENV_CACHE = "OPKERNEL_OPENCL_CACHE_DIR"


def cache_dir() -> str | None:
    """The on-disk program cache directory, or None when caching is off."""
    return configured_dir(ENV_CACHE, "opencl")


_pocl_dir: str | None = None
_pocl_owned = False  # _pocl_dir is this process's own (made by _process_dir)
_PREFIX = "opkernel-pocl-"
_LOCK = ".opkernel-lock"


def configure_environment() -> None:
    """Give PoCL a kernel cache that holds only what it compiled itself, before the
    platform is first loaded.

    PoCL dlopens the shared object it finds in ``POCL_CACHE_DIR`` under a program's
    hash without checking it, so a truncated file there aborts the process and a
    planted one runs its constructor.  It gets a fresh directory of this process
    (mode 0700, removed at exit); programs come back across processes only through
    ``BinaryStore``, verified.  A ``POCL_CACHE_DIR`` the user set is kept when private
    to this user, and replaced with a warning when not.
    """
    global _pocl_dir, _pocl_owned
    if _pocl_dir is not None:
        return
    from .icd import expose_runtimes

    expose_runtimes()  # Intel's CPU runtime from pip ([intel]), beside the drivers the user has
    # pyopencl's own cache (used on drivers that do not cache builds themselves) unpickles
    # its index files; the backend bypasses it, and so does pyopencl's own kernels' builds
    os.environ.setdefault("PYOPENCL_NO_CACHE", "1")
    chosen = os.environ.get("POCL_CACHE_DIR")
    # a directory of a parent process (inherited with its environment) is not the user's choice
    inherited = chosen is not None and os.path.basename(chosen.rstrip(os.sep)).startswith(_PREFIX)
    if chosen is not None and not inherited and private_dir(chosen, "opencl backend (POCL_CACHE_DIR, PoCL's kernel cache)") is not None:
        _pocl_dir = chosen
        return
    _pocl_dir = os.environ["POCL_CACHE_DIR"] = _process_dir()
    _pocl_owned = True


def _process_dir() -> str:
    base = tempfile.gettempdir()
    where = tempfile.mkdtemp(prefix=_PREFIX, dir=base)
    if unsafe_reason(where) is not None:  # a TMPDIR others can rename things in: use the home directory
        shutil.rmtree(where, ignore_errors=True)
        home = os.path.join(os.path.expanduser("~"), ".cache")
        where = tempfile.mkdtemp(prefix=_PREFIX, dir=private_dir(home, "opencl backend (PoCL's kernel cache)") or base)
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:  # not in a forked child, whose parent still uses it
            shutil.rmtree(where, ignore_errors=True)

    atexit.register(remove)
    _hold_and_sweep(where)
    return where


_held: list[int] = []  # descriptors holding this process's lock on its PoCL directory


def _hold_and_sweep(where: str) -> None:
    """Lock ``where`` for the life of this process (and its forked children), and remove
    the directories of processes that ended without removing theirs (killed): a free lock
    is a dead owner, in any PID namespace that shares the file system."""
    try:
        import fcntl
    except ImportError:  # no flock: such directories are left to the temp cleaner
        return
    try:
        fd = os.open(os.path.join(where, _LOCK), os.O_CREAT | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return
    _held.append(fd)
    base, me = os.path.dirname(where), os.geteuid()
    try:
        others = [e for e in os.scandir(base) if e.name.startswith(_PREFIX) and e.path != where]
    except OSError:
        return
    for entry in others:
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != me:
                continue
            # no lock file yet: its process is between mkdtemp and the lock, leave it be
            other = os.open(os.path.join(entry.path, _LOCK), os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: its process is alive
        else:
            shutil.rmtree(entry.path, ignore_errors=True)
        finally:
            os.close(other)


@dataclass(frozen=True)
class Family:
    """One program per dtype: ``render(dtype_name)`` returns its OpenCL C source."""

    name: str
    render: Callable[[str], str]
    dtypes: tuple[str, ...]
    options: tuple[str, ...] = ()


_families: dict[str, Family] = {}


def family(name: str, dtypes: tuple[str, ...] | list[str], options: tuple[str, ...] = ()) -> Callable[[Callable[[str], str]], Callable[[str], str]]:
    """Decorator declaring a program family; returns the render function unchanged."""

    def decorate(render: Callable[[str], str]) -> Callable[[str], str]:
        _families[name] = Family(name, render, tuple(dtypes), options)
        return render

    return decorate


def families() -> dict[str, Family]:
    return dict(_families)


PRELUDE = """\
#ifdef OK_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
typedef struct { int v[8]; } dims_t;
// A comparison, not the isnan() builtin: PoCL's CPU device calls that out of line and
// stops vectorising the kernel around it (a MaxPool ran 6x slower).  Valid without
// -cl-finite-math-only, which no program here is built with.
#define OK_ISNAN(v) ((v) != (v))
// n / d for 0 <= n < 2^31 from d's (m, s) (common.fast_divisor).  A division by a runtime
// value is not vectorised on a CPU device and costs more than the copy or comparison of an
// element around it; so does mul_hi.  A 32 x 32 -> 64-bit product is vectorised.
inline int fdiv(int n, int m, int s) {
  return (int)(((uint)(((ulong)(uint)n * (uint)m) >> 32) + (uint)n) >> s);
}
// The 8 lanes of a vector (a variable) added / fmax-ed pairwise, as .lo with .hi, twice:
// how the row kernels that read rows as vectors of 8 combine their lanes.
#define OK_HSUM8(v) ((((v).s0 + (v).s4) + ((v).s2 + (v).s6)) + (((v).s1 + (v).s5) + ((v).s3 + (v).s7)))
#define OK_HMAX8(v) fmax(fmax(fmax((v).s0, (v).s4), fmax((v).s2, (v).s6)), fmax(fmax((v).s1, (v).s5), fmax((v).s3, (v).s7)))
"""


def build_quietly(cl: Any, context: Any, src: str, opts: str) -> tuple[Any, str]:
    """``(program, "")`` built from OpenCL C ``src`` with ``opts`` on ``context``'s devices, or
    ``(None, compiler log)``.  pyopencl's own cache is bypassed (it unpickles the files of
    its directory), and so is its ``CompilerWarning``: a successful build's log (Intel's
    runtime writes one for every build) is nothing a user can act on."""
    return _build_raw(cl, cl._cl._Program(context, src), opts)


def _build_raw(cl: Any, raw: Any, opts: str) -> tuple[Any, str]:
    build = getattr(raw, "_build", None)  # clBuildProgram itself, which pyopencl wraps to warn
    try:
        if build is not None:
            build(options=opts.encode(), devices=None)
        else:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", getattr(cl, "CompilerWarning", UserWarning))
                raw.build(opts.encode())
    except cl.Error as e:
        logs = []
        try:
            for dev in raw.get_info(cl.program_info.DEVICES):
                logs.append(str(raw.get_build_info(dev, cl.program_build_info.LOG)))
        except cl.Error:
            pass
        return None, "\n".join([str(e), *logs])
    return cl.Program(raw), ""


class ProgramBuildError(InternalError):
    """An OpenCL program failed to build: the message shows the op, the offending
    source lines and the compiler log."""


def _error_lines(source: str, log: str) -> str:
    lines = source.splitlines()
    shown: list[str] = []
    for m in re.finditer(r"(?:<source>|input\.cl|\.cl)?:(\d+):(\d+):\s*(error|warning)?", log):
        n = int(m.group(1))
        if 1 <= n <= len(lines) and (m.group(3) == "error" or not shown):
            text = f"  line {n}: {lines[n - 1].strip()}"
            if text not in shown:
                shown.append(text)
    return "\n".join(shown[:5])


def _is_pocl(backend: OpenCLBackend) -> bool:
    return bool(backend.device.platform.name.strip() == "Portable Computing Language")


_ARG_INFO = "-cl-kernel-arg-info"


ArgInfo = dict[str, list[tuple[str, str, int, int]]]


def arg_info(cl: Any, prg: Any) -> ArgInfo | None:
    """Per kernel of ``prg``, each argument's (name, type name, address qualifier, type
    qualifier) as clGetKernelArgInfo gives them; None when the driver does not say."""
    info: ArgInfo = {}
    try:
        for name in (n for n in str(prg.get_info(cl.program_info.KERNEL_NAMES)).split(";") if n):
            k = cl.Kernel(prg, name)
            q = cl.kernel_arg_info
            info[name] = [
                (str(k.get_arg_info(i, q.NAME)), str(k.get_arg_info(i, q.TYPE_NAME)),
                 int(k.get_arg_info(i, q.ADDRESS_QUALIFIER)), int(k.get_arg_info(i, q.TYPE_QUALIFIER)))
                for i in range(int(k.get_info(cl.kernel_info.NUM_ARGS)))
            ]
    except cl.Error:
        return None
    return info


def _decode_arg_info(raw: bytes) -> ArgInfo:
    data = json.loads(raw.decode())
    if not isinstance(data, dict):
        raise ValueError("not a mapping")
    return {str(k): [(str(a), str(b), int(c), int(d)) for a, b, c, d in v] for k, v in data.items()}


class BinaryStore:
    """Compiled programs on disk, one verified entry per (device, driver, versions,
    options, source).

    An entry is a file of ``opkernel.cachedirs.write_entry``: its payload is named
    blobs, returned only when the file's digests of key and payload match; anything
    else (a truncated or random file, another entry's file swapped in) is removed
    and the program rebuilt from source.

    What the blobs are depends on the driver.  Most drivers take back the binary of
    ``CL_PROGRAM_BINARIES``: one blob, loaded with ``clCreateProgramWithBinary``.
    PoCL's binary does not hold the shared objects it compiles per work-group size at
    the first launch (most of the cost of a program on this device), and asking for
    it compiles a generic one for every kernel; so for PoCL the blobs are the files
    PoCL wrote into its cache directory (``configure_environment``: a fresh one per
    process) for the program, written back there before the program is built again
    from source, where PoCL finds them.  They are gathered at exit (``flush``).
    """

    MAGIC = b"opkernel-opencl-cache 1"
    _PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")

    def __init__(self, where: str, backend: OpenCLBackend) -> None:
        from opkernel import __version__ as core_version

        plugin_version = _version.__version__
        self.where = where
        self._be = backend
        d, cl = backend.device, backend.cl
        self.pocl = _is_pocl(backend)
        self._identity = "\0".join([
            "pocl-files" if self.pocl else "binary", core_version, plugin_version, cl.VERSION_TEXT,
            d.platform.name, d.platform.version, d.vendor, d.name, d.version, d.driver_version,
        ])
        self._programs: dict[str, tuple[str, frozenset[tuple[str, int]]]] = {}  # key -> PoCL's program dir, its files when seeded
        self._parents: dict[str, int] = {}  # PoCL's top-level directories -> st_mtime_ns when last listed
        self._known: set[str] = set()  # PoCL's program directories seen so far
        self.loaded = 0  # programs found in verified entries
        self.rejected = 0  # entries that failed verification (removed, rebuilt)
        if self.pocl:
            # What PoCL compiled before this store (the device probe's program) is not ours
            self._new_program_dirs()
            atexit.register(self.flush)

    @classmethod
    def open(cls, backend: OpenCLBackend) -> BinaryStore | None:
        where = cache_dir()
        if where is None:
            return None
        if _is_pocl(backend) and not _pocl_owned:
            return None  # PoCL caches in the POCL_CACHE_DIR the user chose (and configure_environment checked)
        where = private_dir(where, f"opencl backend (${ENV_CACHE}, the compiled-program cache)")
        return None if where is None else cls(where, backend)

    # ------------------------------------------------------------ entries

    def key(self, src: str, opts: str) -> str:
        return hashlib.sha256("\0".join([self._identity, opts, src]).encode()).hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.where, key + ".clbin")

    def _get(self, key: str) -> dict[str, bytes] | None:
        payload, rejected = read_entry(self._path(key), key, self.MAGIC)
        blobs = None if payload is None else self._unpack(payload)
        if payload is not None and blobs is None:  # verified, but not in this format: a bug, not an attack
            self._drop(key)
            rejected = True
        self.rejected += rejected
        return blobs

    def _put(self, key: str, blobs: dict[str, bytes]) -> None:
        write_entry(self._path(key), key, self._pack(blobs), self.MAGIC)

    def _drop(self, key: str) -> None:
        try:
            os.unlink(self._path(key))
        except OSError:
            pass

    @staticmethod
    def _pack(blobs: dict[str, bytes]) -> bytes:
        out = [len(blobs).to_bytes(4, "little")]
        for name, data in sorted(blobs.items()):
            raw = name.encode()
            out += [len(raw).to_bytes(4, "little"), raw, len(data).to_bytes(8, "little"), data]
        return b"".join(out)

    @classmethod
    def _unpack(cls, payload: bytes) -> dict[str, bytes] | None:
        view = memoryview(payload)
        blobs: dict[str, bytes] = {}
        if len(view) < 4:
            return None
        count, pos = int.from_bytes(view[:4], "little"), 4
        for _ in range(count):
            if pos + 4 > len(view):
                return None
            n = int.from_bytes(view[pos:pos + 4], "little")
            pos += 4
            if pos + n + 8 > len(view):
                return None
            name = bytes(view[pos:pos + n]).decode("utf-8", "replace")
            pos += n
            size = int.from_bytes(view[pos:pos + 8], "little")
            pos += 8
            if pos + size > len(view) or not cls._safe_name(name):
                return None
            blobs[name] = bytes(view[pos:pos + size])
            pos += size
        return blobs if pos == len(view) and blobs else None

    @classmethod
    def _safe_name(cls, name: str) -> bool:
        parts = name.split("/")
        return len(parts) <= 8 and all(cls._PART.fullmatch(p) for p in parts)

    # ------------------------------------------------------------ programs

    def load(self, src: str, opts: str) -> Any:
        """The program built from a verified binary, or None: build it from source (for
        PoCL, after its verified files were put back in PoCL's cache)."""
        key = self.key(src, opts)
        blobs = self._get(key)
        if blobs is None:
            return None
        if self.pocl:
            self._seed(key, blobs)
            return None
        cl = self._be.cl
        binary = blobs.get("binary")
        prg = None
        if binary is not None:
            try:
                raw = cl._cl._Program(self._be.context, [self._be.device], [binary])
            except cl.Error:
                raw = None
            prg = None if raw is None else _build_raw(cl, raw, opts)[0]
        if prg is None:  # a binary this driver no longer accepts
            self.rejected += 1
            self._drop(key)
            return None
        if _ARG_INFO in opts.split() and "arginfo" in blobs:
            # Intel's CPU runtime drops argument info from a program built from its binary:
            # the entry keeps what the source build said (launch checks need it)
            try:
                prg.opkernel_arg_info = _decode_arg_info(blobs["arginfo"])
            except (ValueError, TypeError, KeyError):
                self.rejected += 1
                self._drop(key)
                return None
        self.loaded += 1
        return prg

    def built(self, src: str, opts: str, prg: Any) -> None:
        """Record a program just built from source."""
        key = self.key(src, opts)
        if self.pocl:
            new = self._new_program_dirs()
            if len(new) == 1:
                self._programs[key] = (new[0], frozenset())
            return
        cl = self._be.cl
        try:
            binary = bytes(prg.get_info(cl.program_info.BINARIES)[0])
        except cl.Error:
            return
        if not binary:
            return
        blobs = {"binary": binary}
        if _ARG_INFO in opts.split():
            info = arg_info(cl, prg)
            if info is None:
                return
            blobs["arginfo"] = json.dumps(info, sort_keys=True).encode()
        self._put(key, blobs)

    def _seed(self, key: str, blobs: dict[str, bytes]) -> None:
        root = _pocl_dir
        if root is None:
            return
        top = {"/".join(name.split("/")[:2]) for name in blobs}
        if len(top) != 1 or any(name.count("/") < 2 for name in blobs):
            return  # not the files of one program directory, as flush writes them
        program_dir = top.pop()
        if os.path.isdir(os.path.join(root, program_dir)):
            return
        try:
            for name, data in blobs.items():
                path = os.path.join(root, *name.split("/"))
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
        except OSError:
            shutil.rmtree(os.path.join(root, program_dir), ignore_errors=True)
            return
        self._known.add(program_dir)
        self._programs[key] = (program_dir, frozenset((n, len(d)) for n, d in blobs.items()))
        self.loaded += 1

    def _new_program_dirs(self) -> list[str]:
        """PoCL's program directories (``XX/YYYY...``) created since the last call."""
        root = _pocl_dir
        new: list[str] = []
        if root is None:
            return new
        try:
            tops = list(os.scandir(root))
        except OSError:
            return new
        for top in tops:
            if not top.is_dir(follow_symlinks=False):
                continue
            mtime = top.stat(follow_symlinks=False).st_mtime_ns
            if self._parents.get(top.name) == mtime:
                continue
            self._parents[top.name] = mtime
            try:
                names = os.listdir(top.path)
            except OSError:
                continue
            for name in names:
                rel = top.name + "/" + name
                if rel not in self._known:
                    self._known.add(rel)
                    new.append(rel)
        return new

    def flush(self) -> int:
        """Store PoCL's files of every program whose files changed since it was seeded
        (new work-group sizes compiled); returns how many entries were written."""
        root = _pocl_dir
        written = 0
        if root is None:
            return written
        for key, (program_dir, seeded) in list(self._programs.items()):
            files: dict[str, str] = {}  # name in the entry -> path
            sizes: set[tuple[str, int]] = set()
            for dirpath, _dirs, names in os.walk(os.path.join(root, program_dir)):
                for fname in names:
                    path = os.path.join(dirpath, fname)
                    name = os.path.relpath(path, root).replace(os.sep, "/")
                    try:
                        st = os.lstat(path)
                    except OSError:
                        continue
                    if fname != "last_accessed" and stat.S_ISREG(st.st_mode) and self._safe_name(name):
                        files[name] = path
                        sizes.add((name, st.st_size))
            state = frozenset(sizes)
            if state == seeded or not any(n.endswith("/program.bc") for n in files):
                continue  # nothing new compiled (or not a program PoCL finished)
            blobs: dict[str, bytes] = {}
            try:
                for name, path in files.items():
                    with open(path, "rb") as f:
                        blobs[name] = f.read()
            except OSError:
                continue
            self._put(key, blobs)
            self._programs[key] = (program_dir, frozenset((n, len(d)) for n, d in blobs.items()))
            written += 1
        return written


class ProgramCache:
    """Built programs and kernels of one backend (one context, one device)."""

    def __init__(self, backend: OpenCLBackend) -> None:
        self._be = backend
        self._lock = threading.RLock()
        self._programs: dict[tuple[str, str], Any] = {}
        self._kernels: dict[tuple[str, str, str], Any] = {}
        self.builds = 0  # programs built (or fetched from disk) by this cache
        self.store = BinaryStore.open(backend)

    def location(self) -> str:
        """Where built programs are kept between processes, for ``describe``."""
        if self.store is not None:
            return self.store.where
        if _is_pocl(self._be) and not _pocl_owned and _pocl_dir is not None:
            return f"{_pocl_dir} (PoCL's own, unverified: POCL_CACHE_DIR)"
        return "off (built in memory)"

    def source(self, fam: Family, dtype: str) -> str:
        return PRELUDE + fam.render(dtype)

    def options(self, fam: Family) -> str:
        opts = list(fam.options)
        if self._be.fp64:
            opts.append("-DOK_FP64")
        return " ".join(opts)

    def program(self, family_name: str, dtype: str, op: str) -> Any:
        fam = _families[family_name]
        return self.build_source(self.source(fam, dtype), self.options(fam), f"{family_name}[{dtype}]", op)

    def kernel(self, family_name: str, dtype: str, name: str, op: str) -> Any:
        """The kernel ``name`` of family ``family_name`` built for ``dtype``."""
        key = (family_name, dtype, name)
        k = self._kernels.get(key)
        if k is None:
            prg = self.program(family_name, dtype, op)
            with self._lock:
                k = self._kernels.get(key)
                if k is None:
                    k = self._kernels[key] = self._be.cl.Kernel(prg, name)
        return k

    def build_source(self, src: str, opts: str, what: str, op: str) -> Any:
        """The program of ``src`` built with ``opts`` (a family's, or an op package's device
        program, ``device_kernels``): once per (source, options), through the disk cache."""
        key = (src, opts)
        prg = self._programs.get(key)
        if prg is None:
            with self._lock:
                prg = self._programs.get(key)
                if prg is None:
                    prg = self._programs[key] = self._build(src, opts, what, op)
        return prg

    def _build(self, src: str, opts: str, what: str, op: str) -> Any:
        cl = self._be.cl
        prg = None if self.store is None else self.store.load(src, opts)
        if prg is None:
            prg, log = build_quietly(cl, self._be.context, src, opts)
            if prg is None:
                # pyopencl's error is not chained: it does not pickle (a Dask worker's error
                # would lose its class), and the log here says all it said
                raise ProgramBuildError(
                    f"op {op!r}: the OpenCL program {what} failed to build on device {self._be.device_name!r} "
                    f"(options {opts!r}).\n{_error_lines(src, log)}\ncompiler log:\n{log}",
                    op=op, backend="opencl", source=src, log=log,
                )
            if self.store is not None:
                self.store.built(src, opts, prg)
        self.builds += 1
        return prg

    def build_all(self, declared: Callable[[OpenCLBackend], object]) -> int:
        """Build every family for every dtype the device supports, then call ``declared`` with
        the backend: it builds the programs op packages declared (the backend passes
        ``device_kernels.warm``; this module does not import that one).  Returns how many
        were built."""
        from opkernel.dtypes import as_dtype

        def supported(key: str) -> bool:  # keys are dtype names, sizes, or both joined by ':'
            for part in key.split(":"):
                if not part.isdigit() and not self._be.supports_dtype(as_dtype(part)):
                    return False
            return True

        before = len(self._programs)
        for fam in list(_families.values()):
            for key in fam.dtypes:
                if supported(key):
                    self.program(fam.name, key, f"warmup of {fam.name}")
        declared(self._be)  # the programs op packages declared (DeviceProgram, ElementwiseKernel)
        return len(self._programs) - before
