"""The compiled-program caches are trusted only when private and verified.

Each attack is tried the way it would happen: one process fills the OpenCL
program cache, the test tampers with what is on disk (truncates, scrambles or
swaps entries, plants a shared object or a pickle, opens the directory to other
users), and a fresh process runs Add and Sub.  A loaded bad entry could abort
the process, so every run is a child with a timeout (``isolated.run_isolated``).
The CUDA backend's cache-directory choice and verified entries are tested without a GPU.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
from isolated import run_isolated

from opkernel import cachedirs
from opkernel.cachedirs import UnsafeCacheWarning

pytest.importorskip("opkernel_opencl", reason="opkernel-opencl is not installed")


def _opencl_reason() -> str | None:
    from opkernel import engine

    return dict((n, r) for n, _, r in engine.backend_status()).get("opencl", "not registered")


needs_opencl = pytest.mark.skipif(_opencl_reason() is not None, reason=f"backend 'opencl' unavailable: {_opencl_reason()}")


def _pocl_reason() -> str | None:
    """Why no PoCL device works here, or None.  The tests of PoCL's own cache directory
    run on PoCL's device (``OPKERNEL_OPENCL_DEVICE=pocl``) whatever the default device."""
    if _opencl_reason() is not None:
        return f"backend 'opencl' unavailable: {_opencl_reason()}"
    from opkernel_opencl.backend import OpenCLBackend
    from opkernel_opencl.devices import POCL_PLATFORM

    pocl = [d for d in OpenCLBackend.devices() if d.platform == POCL_PLATFORM]
    if not pocl:
        return "no PoCL device here"
    return None if any(d.works for d in pocl) else f"PoCL's device does not work here: {pocl[0].reason}"


needs_pocl = pytest.mark.skipif(_pocl_reason() is not None, reason=str(_pocl_reason()))
POCL = {"OPKERNEL_OPENCL_DEVICE": "pocl"}

# A process that uses the cache the way a user does: Add and Sub on the OpenCL device.
# POCL_CACHE_DIR and PYOPENCL_NO_CACHE (which this process may have set) are dropped, so
# that the caches are wherever the backend puts them.
CHILD = """
import json, os, sys, warnings
os.environ.pop("POCL_CACHE_DIR", None)
os.environ.pop("PYOPENCL_NO_CACHE", None)
{prelude}
import numpy as np
import opkernel as ok
from opkernel import engine
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    be = engine.backend_instance("opencl")
    a = np.arange(1, 7, dtype=np.float32)
    b = np.full(6, 10, np.float32)
    with ok.use_backend("opencl"):
        out = {{op: getattr(ok.ops, op)(a, b).numpy().tolist() for op in {ops!r}}}
store = getattr(be.programs, "store", None)
out["store"] = None if store is None else {{"where": store.where, "loaded": store.loaded, "rejected": store.rejected}}
out["warnings"] = [f"{{w.category.__name__}}: {{w.message}}" for w in caught]
out["described"] = be.describe()["program_cache"]
print(json.dumps(out))
"""

ADD = [11.0, 12.0, 13.0, 14.0, 15.0, 16.0]
SUB = [-9.0, -8.0, -7.0, -6.0, -5.0, -4.0]


def run_child(tmp: Path, what: str, *, ops: tuple[str, ...] = ("add", "sub"), prelude: str = "",
              cache: Path | None = None, **env: str) -> dict[str, Any]:
    """Run Add/Sub in a fresh process with the cache in ``cache`` (default tmp/cache) and
    XDG_CACHE_HOME in tmp/xdg; returns what it printed."""
    env = {"OPKERNEL_OPENCL_CACHE_DIR": str(cache or tmp / "cache"), "XDG_CACHE_HOME": str(tmp / "xdg"), "HOME": str(tmp), **env}
    done = run_isolated(CHILD.format(prelude=prelude, ops=list(ops)), what=what, env=env, timeout=240)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    for op in ops:
        assert result[op] == {"add": ADD, "sub": SUB}[op], f"{what}: {op} computed {result[op]}"
    return result


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def entries(root: Path) -> set[Path]:
    """What the cache holds per program: a file directly in it, or a directory holding a
    compiled program (PoCL's layout, ``XX/YYYY.../program.bc``)."""
    found = {p for p in root.iterdir() if p.is_file()} if root.is_dir() else set()
    found |= {p.parent for p in root.rglob("program.bc")}
    return found


# ------------------------------------------------------------ cachedirs


def test_a_missing_cache_directory_is_created_private(tmp_path: Path) -> None:
    where = tmp_path / "a" / "b" / "cache"
    assert cachedirs.private_dir(str(where), "test") == str(where)
    for d in (tmp_path / "a", tmp_path / "a" / "b", where):
        assert stat.S_IMODE(d.stat().st_mode) & 0o077 == 0, f"{d} is {stat.S_IMODE(d.stat().st_mode):o}"


@pytest.mark.parametrize("mode, refused", [(0o777, True), (0o770, True), (0o1777, False), (0o755, False)])
def test_a_parent_that_others_can_write_is_refused_unless_sticky(tmp_path: Path, mode: int, refused: bool) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "cache").mkdir(mode=0o700)
    parent.chmod(mode)
    reason = cachedirs.unsafe_reason(str(parent / "cache"))
    assert (reason is not None) == refused, reason
    if refused:
        assert "parent" in reason and "writable" in reason  # type: ignore[operator]


def test_a_symlink_is_judged_by_its_target(tmp_path: Path) -> None:
    target = tmp_path / "open"
    target.mkdir()
    target.chmod(0o777)
    (tmp_path / "link").symlink_to(target)
    with pytest.warns(UnsafeCacheWarning, match="every user"):
        assert cachedirs.private_dir(str(tmp_path / "link"), "test") is None


# ------------------------------------------------------------ the OpenCL program cache


@needs_opencl
def test_entries_are_private_verified_and_reused(tmp_path: Path) -> None:
    first = run_child(tmp_path, "cold cache")
    assert first["store"] is not None and first["store"]["loaded"] == 0
    assert first["described"] == str(tmp_path / "cache")
    cache = tmp_path / "cache"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    made = files_under(cache)
    assert made and all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in made)
    second = run_child(tmp_path, "warm cache")
    assert second["store"]["loaded"] >= 2 and second["store"]["rejected"] == 0  # Add's and Sub's programs


def _tamper_all(tmp: Path, change: Any) -> int:
    """Apply ``change`` to every file the first run left in the cache and in PoCL's default cache."""
    touched = 0
    for root in (tmp / "cache", tmp / "xdg"):
        for p in files_under(root) if root.exists() else []:
            data = p.read_bytes()
            p.write_bytes(change(data))
            touched += 1
    return touched


@needs_opencl
@pytest.mark.parametrize("damage", ["truncated", "random", "empty"])
def test_a_damaged_entry_is_rebuilt_never_loaded(tmp_path: Path, damage: str) -> None:
    run_child(tmp_path, "fill the cache")
    change = {
        "truncated": lambda d: d[: len(d) // 2],
        "random": lambda d: os.urandom(len(d)),
        "empty": lambda d: b"",
    }[damage]
    assert _tamper_all(tmp_path, change) > 0
    again = run_child(tmp_path, f"{damage} entries")  # a crash or a wrong sum fails here
    assert again["store"]["loaded"] == 0 and again["store"]["rejected"] >= 2
    assert run_child(tmp_path, "rewritten entries")["store"]["loaded"] >= 2


@needs_opencl
def test_swapped_entries_still_add(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run_child(tmp_path, "Add only", ops=("add",))
    add = entries(cache) | entries(tmp_path / "xdg")
    run_child(tmp_path, "Sub only", ops=("sub",))
    sub = (entries(cache) | entries(tmp_path / "xdg")) - add
    assert len(add) == 1 and len(sub) == 1, (add, sub)
    a, b = add.pop(), sub.pop()
    spare = a.with_name(a.name + ".spare")
    a.rename(spare)
    b.rename(a)
    spare.rename(b)
    swapped = run_child(tmp_path, "Add's and Sub's entries swapped")
    assert swapped["store"]["rejected"] == 2


def _planted_library(tmp: Path, marker: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the planted shared object")
    src = tmp / "planted.c"
    src.write_text(
        "#include <stdio.h>\n"
        f'__attribute__((constructor)) static void planted(void) {{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n'
    )
    lib = tmp / "planted.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    return lib


@needs_pocl
def test_a_planted_shared_object_is_never_loaded(tmp_path: Path) -> None:
    marker = tmp_path / "constructor-ran"
    lib = _planted_library(tmp_path, marker)
    # PoCL's layout of these programs, from a run where the user pointed PoCL at a directory
    learned = tmp_path / "learned"
    learned.mkdir(mode=0o700)
    run_child(tmp_path, "learn PoCL's layout", cache=tmp_path / "unused", prelude=f"os.environ['POCL_CACHE_DIR'] = {str(learned)!r}", **POCL)
    libs = [p.relative_to(learned) for p in learned.rglob("*.so")]
    if not libs:
        pytest.skip("the OpenCL driver keeps no shared objects in POCL_CACHE_DIR")
    # plant them wherever PoCL's cache could be: under the program cache, and PoCL's default
    for base in (tmp_path / "cache" / "pocl", tmp_path / "xdg" / "pocl" / "kcache"):
        shutil.copytree(learned, base, dirs_exist_ok=True)
        for rel in libs:
            shutil.copyfile(lib, base / rel)
    run_child(tmp_path, "planted shared objects", **POCL)
    assert not marker.exists(), "a planted shared object's constructor ran"


@needs_opencl
def test_a_planted_pickle_is_never_unpickled(tmp_path: Path) -> None:
    """On a driver without its own build cache pyopencl caches builds itself, with pickled
    index files; the child pretends to be such a driver."""
    marker = tmp_path / "unpickled"
    prelude = (
        "import pickle, pyopencl.characterize\n"
        "pyopencl.characterize.has_src_build_cache = lambda dev: False\n"
        "_load = pickle.load\n"
        f"def load(*a, **k):\n    open({str(marker)!r}, 'a').close()\n    return _load(*a, **k)\n"
        "pickle.load = load\n"
    )
    run_child(tmp_path, "fill the cache", prelude=prelude)

    class Planted:
        def __reduce__(self) -> tuple[Any, ...]:
            return (open, (str(marker), "w"))

    for p in files_under(tmp_path / "cache") + files_under(tmp_path / "xdg"):
        if p.name == "info" or p.parent.name == "info":
            p.write_bytes(pickle.dumps(Planted()))
    run_child(tmp_path, "planted pickles", prelude=prelude)
    assert not marker.exists(), "something was unpickled from the cache"


@needs_opencl
def test_pyopencl_kernels_on_the_backend_do_not_use_pyopencl_cache(tmp_path: Path) -> None:
    """pyopencl's own kernels (array arithmetic on the backend's queue) would go through
    its pickling cache too, on a driver that does not cache builds itself."""
    code = (
        "import os\n"
        "os.environ.pop('POCL_CACHE_DIR', None), os.environ.pop('PYOPENCL_NO_CACHE', None)\n"
        "import numpy as np, opkernel as ok\n"
        "from opkernel import engine\n"
        "be = engine.backend_instance('opencl')\n"
        "import pyopencl.array as cla, pyopencl.characterize\n"
        "pyopencl.characterize.has_src_build_cache = lambda dev: False\n"
        "x = cla.to_device(be.queue, np.arange(4, dtype=np.float32))\n"
        "print((x * 3 + 1).get().tolist())\n"
    )
    env = {"OPKERNEL_OPENCL_CACHE_DIR": str(tmp_path / "cache"), "XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    out = run_isolated(code, what="pyopencl array arithmetic", env=env, timeout=240)
    assert out.stdout.strip() == "[1.0, 4.0, 7.0, 10.0]"
    # opkernel's own caches (device probes, the ICD directory) live under xdg/opkernel
    assert [f for f in files_under(tmp_path / "xdg") if f.relative_to(tmp_path / "xdg").parts[0] != "opkernel"] == [], "pyopencl wrote its cache"


@needs_opencl
def test_a_cache_directory_others_can_write_is_refused_with_a_warning(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    out = run_child(tmp_path, "world-writable cache")
    assert out["store"] is None and out["described"].startswith("off")
    assert any("UnsafeCacheWarning" in w and str(cache) in w and "every user" in w for w in out["warnings"]), out["warnings"]
    assert files_under(cache) == []


@needs_opencl
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a directory to another user")
def test_a_cache_directory_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, 65534)  # nobody
    out = run_child(tmp_path, "cache owned by nobody")
    assert out["store"] is None
    assert any("UnsafeCacheWarning" in w and "owned by" in w for w in out["warnings"]), out["warnings"]
    assert files_under(cache) == []


@needs_opencl
def test_a_pocl_cache_directory_others_can_write_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared-pocl"
    shared.mkdir()
    shared.chmod(0o777)
    out = run_child(tmp_path, "world-writable POCL_CACHE_DIR", prelude=f"os.environ['POCL_CACHE_DIR'] = {str(shared)!r}")
    assert any("POCL_CACHE_DIR" in w and "every user" in w for w in out["warnings"]), out["warnings"]
    assert files_under(shared) == []


@needs_pocl
def test_pocl_directories_are_per_process_and_swept_after_a_kill(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o700)
    killed = (
        "import os\n"
        "os.environ.pop('POCL_CACHE_DIR', None)\n"
        "import numpy as np, opkernel as ok\n"
        "with ok.use_backend('opencl'):\n"
        "    ok.ops.add(np.ones(2, np.float32), np.ones(2, np.float32)).numpy()\n"
        "print(os.environ['POCL_CACHE_DIR'], flush=True)\n"
        "os._exit(0)  # no clean-up, as after SIGKILL\n"
    )
    env = {"TMPDIR": str(tmp), "OPKERNEL_OPENCL_CACHE_DIR": "off", "HOME": str(tmp_path), **POCL}
    left = Path(run_isolated(killed, what="a process that dies without clean-up", env=env, timeout=240).stdout.strip())
    assert left.parent == tmp and left.is_dir() and stat.S_IMODE(left.stat().st_mode) == 0o700
    assert any(left.rglob("program.bc"))  # PoCL used it
    run_isolated(killed.replace("os._exit(0)", "pass"), what="the next process", env=env, timeout=240)
    assert not left.exists(), "a dead process's PoCL directory was left behind"
    assert list(tmp.iterdir()) == [], "a process left its PoCL directory at exit"


@needs_opencl
def test_binary_entries_of_other_drivers_are_verified(tmp_path: Path) -> None:
    """Drivers other than PoCL get their program binary back (clCreateProgramWithBinary);
    the same store is tried here on PoCL's binaries, with a truncated and a swapped entry."""
    code = f"""
import os, json
import numpy as np, pyopencl as cl
from opkernel import engine
from opkernel_opencl.programs import BinaryStore
be = engine.backend_instance("opencl")
store = BinaryStore({str(tmp_path)!r}, be)
store.pocl = False  # the path of every other driver
src = {{op: "__kernel void k(__global float* x) {{ x[get_global_id(0)] %s= 2.0f; }}" % c for op, c in (("add", "+"), ("mul", "*"))}}
for op, code in src.items():
    store.built(code, "", cl.Program(be.context, code).build())
def run(op):
    prg = store.load(src[op], "")
    if prg is None:
        return None
    x = np.ones(4, np.float32)
    buf = cl.Buffer(be.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
    prg.k(be.queue, (4,), None, buf)
    cl.enqueue_copy(be.queue, x, buf)
    return x.tolist()
out = {{"fresh": [run("add"), run("mul")]}}
paths = {{op: os.path.join({str(tmp_path)!r}, store.key(code, "") + ".clbin") for op, code in src.items()}}
a, m = open(paths["add"], "rb").read(), open(paths["mul"], "rb").read()
open(paths["add"], "wb").write(m)
open(paths["mul"], "wb").write(a[: len(a) // 2])
out["tampered"] = [run("add"), run("mul")]
out["rejected"] = store.rejected
print(json.dumps(out))
"""
    out = json.loads(run_isolated(code, what="binary entries", env={"HOME": str(tmp_path)}, timeout=240).stdout.strip().splitlines()[-1])
    assert out["fresh"] == [[3.0] * 4, [2.0] * 4]
    assert out["tampered"] == [None, None] and out["rejected"] == 2


@needs_opencl
def test_the_key_covers_source_options_and_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    import opkernel
    from opkernel import engine
    from opkernel_opencl.programs import BinaryStore

    be: Any = engine.backend_instance("opencl")
    store = BinaryStore("/nonexistent", be)
    base = store.key("src", "-DX")
    assert store.key("src2", "-DX") != base and store.key("src", "-DY") != base
    monkeypatch.setattr(opkernel, "__version__", "999")
    assert BinaryStore("/nonexistent", be).key("src", "-DX") != base


# ------------------------------------------------------------ CUDA (no GPU needed)


def test_cuda_refuses_a_shared_kernel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = pytest.importorskip("opkernel_cuda.runtime")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(shared))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with pytest.warns(UnsafeCacheWarning, match="CUPY_CACHE_DIR"):
        chosen = runtime.kernel_cache_dir()
    assert chosen == str(tmp_path / "xdg" / "opkernel" / "cuda")
    assert stat.S_IMODE(os.stat(chosen).st_mode) == 0o700


def test_cuda_points_cupy_at_the_private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the backend does to cupy (importable without a GPU) before anything is compiled."""
    runtime = pytest.importorskip("opkernel_cuda.runtime")
    cupy = pytest.importorskip("cupy")
    compiler = cupy.cuda.compiler
    if not hasattr(compiler, "_set_kernel_cache_backend"):
        pytest.skip("this cupy reads CUPY_CACHE_DIR at each compile")
    monkeypatch.setattr(compiler, "_kernel_cache_backend", compiler._kernel_cache_backend)  # restored afterwards
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(shared))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    with pytest.warns(UnsafeCacheWarning, match="every user"):
        where = runtime.use_private_kernel_cache(cupy)
    assert where == str(tmp_path / "xdg" / "opkernel" / "cuda") == os.environ["CUPY_CACHE_DIR"]
    assert compiler._kernel_cache_backend.where == where


def test_cuda_keeps_a_private_kernel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = pytest.importorskip("opkernel_cuda.runtime")
    mine = tmp_path / "mine"
    monkeypatch.setenv("CUPY_CACHE_DIR", str(mine))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runtime.kernel_cache_dir() == str(mine)


def test_cuda_builds_in_memory_when_no_private_cache_is_possible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = pytest.importorskip("opkernel_cuda.runtime")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(shared / "cupy"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    with pytest.warns(UnsafeCacheWarning):
        assert runtime.kernel_cache_dir() is None


def test_cuda_cache_entries_are_bound_to_their_key(tmp_path: Path) -> None:
    """Without a GPU: what the backend installs as cupy's kernel cache, tried directly."""
    cache_module = pytest.importorskip("cupy.cuda._compiler_cache", reason="this cupy has no pluggable kernel cache")
    runtime = pytest.importorskip("opkernel_cuda.runtime")
    store = runtime.verified_kernel_cache(cache_module.KernelCacheBackend, str(tmp_path))
    store.save("a.cubin", b"kernel a", "source a")
    store.save("b.cubin", b"kernel b", "source b")
    assert store.load("a.cubin") == b"kernel a" and store.load("b.cubin") == b"kernel b"
    a, b = tmp_path / "a.cubin.okv", tmp_path / "b.cubin.okv"
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    assert store.load("a.cubin") is None and store.load("b.cubin") is None  # swapped: rebuilt, not loaded
    assert not a.exists() and not b.exists()
    store.save("a.cubin", b"kernel a", "source a")
    a.write_bytes(a.read_bytes()[:-3])
    assert store.load("a.cubin") is None
