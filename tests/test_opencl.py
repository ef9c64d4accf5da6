"""Behaviour specific to the OpenCL backend (opkernel-opencl): device selection,
availability reasons, no synchronisation per op, the program cache and warmup,
build errors, out-of-memory and driver errors, threads, kernel coverage.

Skipped as a whole when the plugin is not installed; when it is installed but
no OpenCL device is available, the tests that need the device are skipped with
the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any, Iterator

import numpy as np
import pytest

import opkernel as ok
from opkernel import engine, kernels, op_registry
from opkernel.device_programs import ProgramRegistry
from opkernel.errors import InternalError, ResourceExhaustedError

ocl = pytest.importorskip("opkernel_opencl", reason="opkernel-opencl is not installed")

from opkernel_opencl import device_kernels, programs  # noqa: E402
from opkernel_opencl.backend import ENV_DEVICE, OpenCLBackend  # noqa: E402

#: Ops that have no OpenCL kernel on purpose (documented in docs/opencl.md).
_NO_COMPLEX = "the OpenCL backend holds no complex tensors (docs/opencl.md)"
CPU_ONLY: dict[str, str] = {op: _NO_COMPLEX for op in ("Conj", "Real", "Imag", "ComplexAbs", "Angle", "Complex")}


@pytest.fixture
def be() -> Iterator[Any]:
    reason = dict((n, r) for n, _, r in engine.backend_status()).get("opencl")
    if reason is not None:
        pytest.skip(f"backend 'opencl' unavailable: {reason}")
    backend = engine.backend_instance("opencl")
    with engine.use_backend("opencl"):
        yield backend


@pytest.fixture
def fresh_availability(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from opkernel_opencl import devices

    monkeypatch.setattr(OpenCLBackend, "_availability", {})
    monkeypatch.setattr(devices, "_selected", {})
    yield


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )


# ---------------------------------------------------------------- discovery and devices


def test_plugin_import_does_not_import_pyopencl() -> None:
    r = _run("import sys, opkernel_opencl; import opkernel as ok; assert 'pyopencl' not in sys.modules; print('ok')")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_no_matching_device_is_an_availability_reason(fresh_availability: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DEVICE, "no-such-device-xyz")
    reason = OpenCLBackend.availability()
    assert reason is not None and "no OpenCL device matches" in reason and "no-such-device-xyz" in reason


def test_no_platform_is_an_availability_reason(fresh_availability: None, monkeypatch: pytest.MonkeyPatch) -> None:
    cl = pytest.importorskip("pyopencl")

    def no_icd() -> list[Any]:
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", no_icd)
    reason = OpenCLBackend.availability()
    assert reason is not None and "no OpenCL platform" in reason and "pocl" in reason


def test_device_selection_by_index_and_name(be: Any, fresh_availability: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DEVICE, be.device_id)
    assert OpenCLBackend.availability() is None
    monkeypatch.setenv(ENV_DEVICE, be.device_name[:6].lower())
    assert OpenCLBackend.availability() is None
    monkeypatch.setenv(ENV_DEVICE, "7:7")
    assert "no OpenCL device matches" in (OpenCLBackend.availability() or "")


def test_unavailable_opencl_leaves_cpu_usable() -> None:
    code = (
        "import opkernel as ok, numpy as np\n"
        "assert 'opencl' not in ok.available_backends(), ok.available_backends()\n"
        "assert ok.get_backend() == 'cpu'\n"  # with cuda left out below: on a GPU machine it would win
        "print(ok.ops.add(np.ones(2), np.ones(2)).numpy().tolist())\n"
    )
    r = _run(code, **{ENV_DEVICE: "no-such-device-xyz", "OPKERNEL_PLUGINS": "cpu,opencl"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[2.0, 2.0]"


def test_describe_and_dtypes(be: Any) -> None:
    facts = be.describe()
    assert facts["device"] == be.device_name
    assert facts["opencl"].startswith("OpenCL")
    assert facts["float64"] == ("yes" if be.fp64 else "no")
    assert be.supports_dtype(ok.float32) and be.supports_dtype(ok.int32)
    assert be.supports_dtype(ok.float64) == be.fp64
    assert be.supports_dtype(ok.float16)  # stored as half, computed in float32 without cl_khr_fp16
    assert be.supports_dtype(ok.string)  # string tensors stay in host memory


def test_tensors_hold_pyopencl_arrays(be: Any) -> None:
    import pyopencl.array as cl_array

    t = ok.ops.add(np.ones(3, np.float32), np.ones(3, np.float32))
    assert t.backend == "opencl" and isinstance(t.value, cl_array.Array)


# ---------------------------------------------------------------- no waiting


def test_ops_do_not_wait_for_the_device(be: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyopencl as cl

    waits = []
    real_copy, real_wait = cl.enqueue_copy, cl.wait_for_events

    def copy(*args: Any, **kw: Any) -> Any:
        if kw.get("is_blocking", True):
            waits.append("enqueue_copy")
        return real_copy(*args, **kw)

    real_finish, real_event_wait = cl.CommandQueue.finish, cl.Event.wait
    monkeypatch.setattr(cl, "enqueue_copy", copy)
    monkeypatch.setattr(cl, "wait_for_events", lambda *a, **k: waits.append("wait_for_events") or real_wait(*a, **k))
    monkeypatch.setattr(cl.CommandQueue, "finish", lambda self: waits.append("finish") or real_finish(self))
    monkeypatch.setattr(cl.Event, "wait", lambda self: waits.append("Event.wait") or real_event_wait(self))
    x = ok.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    w = ok.Variable(np.ones((4, 4), np.float32))
    before = be.syncs
    y = x
    for _ in range(20):
        y = ok.ops.relu(ok.ops.mat_mul(y, w) * 0.01 + 1.0)
        y = ok.ops.reshape(ok.ops.transpose(ok.ops.reshape(y, [4, 3]), [1, 0]), [3, 4])
        s = ok.ops.sum(y, [1], keep_dims=True)
        y = ok.ops.real_div(y, s)
        w.assign_add(ok.ops.zeros_like(w))
    assert be.syncs == before and waits == []
    out = y.numpy()
    assert be.syncs == before + 1 and waits == ["enqueue_copy"]
    np.testing.assert_allclose(out.sum(axis=1), np.ones(3), rtol=1e-5)


def test_small_uploads_keep_a_host_copy(be: Any) -> None:
    before = be.syncs
    shape = ok.tensor(np.array([2, 3], np.int32))
    x = ok.ops.reshape(ok.tensor(np.arange(6.0)), shape)  # a host-memory input read without a round trip
    assert x.shape == (2, 3) and be.syncs == before
    a = shape.numpy()
    a[0] = 99  # a copy, not the cache
    assert shape.numpy().tolist() == [2, 3]


# ---------------------------------------------------------------- programs


def test_programs_and_kernels_are_built_once(be: Any) -> None:
    k1 = be.programs.kernel("ew:Add", "float32", "k_vv", "Add")
    builds = be.programs.builds
    k2 = be.programs.kernel("ew:Add", "float32", "k_vv", "Add")
    assert k1 is k2 and be.programs.builds == builds


def test_warmup_builds_every_program_ahead_of_time(be: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    small = {name: fam for name, fam in programs.families().items() if name in ("ew:Sub", "fill", "reduce:Sum")}
    monkeypatch.setattr(programs, "_families", small)
    monkeypatch.setattr(device_kernels, "_registry", ProgramRegistry("OpenCL program"))  # op packages': test_device_kernel_api.py
    monkeypatch.setattr(be.programs, "_programs", {})  # as in a new process: nothing built yet (earlier tests built Sub)
    expected = sum(1 for fam in small.values() for dt in fam.dtypes if be.supports_dtype(ok.as_dtype(dt)))
    n = be.warmup()
    assert 0 < n <= expected
    assert be.warmup() == 0  # everything is cached now
    builds = be.programs.builds
    ok.ops.sub(np.ones(2, np.float32), np.ones(2, np.float32)).numpy()
    assert be.programs.builds == builds


def test_cache_dir_is_configurable(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv(programs.ENV_CACHE, str(tmp_path))
    assert programs.cache_dir() == str(tmp_path)
    monkeypatch.setenv(programs.ENV_CACHE, "off")
    assert programs.cache_dir() is None
    monkeypatch.delenv(programs.ENV_CACHE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert programs.cache_dir() == os.path.join(str(tmp_path), "opkernel", "opencl")


def test_a_build_error_names_the_op_the_line_and_the_log(be: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    source = "__kernel void broken(__global float* x) {\n  x[0] = undefined_name;\n}\n"
    monkeypatch.setitem(programs._families, "test:broken", programs.Family("test:broken", lambda dt: source, ("float32",)))
    with pytest.raises(programs.ProgramBuildError) as e:
        be.programs.kernel("test:broken", "float32", "broken", "MyOp")
    msg = str(e.value)
    assert "op 'MyOp'" in msg and "test:broken[float32]" in msg
    assert "x[0] = undefined_name;" in msg  # the offending source line
    assert "undefined_name" in msg.split("compiler log:", 1)[1]
    assert e.value.op == "MyOp"


# ---------------------------------------------------------------- errors


def test_out_of_memory_is_resource_exhausted(be: Any) -> None:
    # float64 elements, so the count stays within the kernels' 32-bit indexing even
    # where the device's largest allocation is past 8 GiB
    n = be.max_alloc // 8 + 1024
    with pytest.raises(ResourceExhaustedError) as e:
        ok.ops.fill(np.array([n], np.int64), np.float64(1))
    assert "op 'Fill'" in str(e.value) and str(n * 8) in str(e.value)
    assert e.value.requested_bytes == n * 8 and e.value.op == "Fill"
    assert ok.ops.add(np.ones(2, np.float32), np.ones(2, np.float32)).numpy().tolist() == [2, 2]


def test_driver_errors_are_translated(be: Any) -> None:
    import pyopencl as cl

    record = cl._cl._ErrorRecord(msg="clCreateBuffer failed", code=-4, routine="clCreateBuffer")
    oom = be.translate_error(cl.MemoryError(record), "MatMul")
    assert isinstance(oom, ResourceExhaustedError) and "op 'MatMul'" in str(oom)
    record = cl._cl._ErrorRecord(msg="bad size", code=-54, routine="clEnqueueNDRangeKernel")
    other = be.translate_error(cl.LogicError(record), "Conv2D")
    assert isinstance(other, InternalError)
    assert "op 'Conv2D'" in str(other) and "INVALID_WORK_GROUP_SIZE" in str(other)
    assert be.translate_error(ValueError("not ours"), "Add") is None


def test_a_lost_device_leaves_cpu_usable(be: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyopencl as cl

    def lost(*args: Any, **kw: Any) -> None:
        raise cl.LogicError(cl._cl._ErrorRecord(msg="device lost", code=-2, routine="clEnqueueNDRangeKernel"))

    monkeypatch.setattr(be, "launch1d", lost)
    with pytest.raises(InternalError, match="op 'Neg'.*DEVICE_NOT_AVAILABLE"):
        ok.ops.neg(np.ones(3, np.float32))
    with ok.use_backend("cpu"):
        assert ok.ops.neg(np.ones(3, np.float32)).numpy().tolist() == [-1, -1, -1]


# ---------------------------------------------------------------- threads


def test_threads_dispatch_at_once(be: Any) -> None:
    rng = np.random.default_rng(0)
    inputs = [(rng.standard_normal((33, 17)).astype(np.float32), rng.standard_normal((17, 9)).astype(np.float32)) for _ in range(6)]
    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            with engine.use_backend("opencl"):
                a, b = inputs[i]
                out = None
                for _ in range(25):
                    out = ok.ops.sum(ok.ops.mat_mul(a, b) + ok.ops.neg(ok.ops.neg(ok.ops.mat_mul(a, b))), [1])
                results[i] = out.numpy()  # type: ignore[union-attr]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, (a, b) in enumerate(inputs):
        np.testing.assert_allclose(results[i], 2 * (a @ b).sum(axis=1), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- coverage


def test_every_op_has_an_opencl_kernel() -> None:
    ok.ops.add  # load the plugins
    missing = []
    for name in op_registry.op_names():
        if ok.op_def(name).provider is not None and ok.op_def(name).provider.plugin != "builtin":
            continue
        if name in CPU_ONLY:
            continue
        if not kernels.kernels_for(name, "opencl") and not kernels.kernels_for(name, "*"):
            missing.append(name)  # (a generic kernel runs on OpenCL as the OpenCL kernels it calls)
    assert not missing, f"ops without an OpenCL kernel: {missing}"


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_elementwise_launch_covers_odd_sizes(be: Any, dtype: str) -> None:
    for n in (1, 63, 64, 65, 1000, 4097):
        x = np.arange(n).astype(dtype)
        np.testing.assert_array_equal(ok.ops.add(x, x).numpy(), x + x)
        y = x.reshape(n, 1)
        np.testing.assert_array_equal(ok.ops.mul(y, x[:3]).numpy(), y * x[:3])


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (64, 64, 64), (65, 129, 33), (3, 1000, 2)])
def test_matmul_tiles_and_edges(be: Any, shape: tuple[int, int, int]) -> None:
    m, k, n = shape
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(ok.ops.mat_mul(a, b).numpy(), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ok.ops.mat_mul(a.T.copy(), b.T.copy(), transpose_a=True, transpose_b=True).numpy(), a @ b, rtol=1e-4, atol=1e-4)
    ai, bi = (a * 4).astype(np.int32), (b * 4).astype(np.int32)
    np.testing.assert_array_equal(ok.ops.mat_mul(ai, bi).numpy(), ai @ bi)


@pytest.mark.parametrize("variant", ["packed", "local", "small", "direct"])
def test_both_matmul_variants(be: Any, variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from opkernel_opencl import linalg_kernels

    monkeypatch.setenv(linalg_kernels.ENV_MATMUL, variant)
    assert linalg_kernels.matmul_variant(be) == variant
    rng = np.random.default_rng(3)
    for dtype in ("float32", "float64", "int32", "int64"):
        if not be.supports_dtype(ok.as_dtype(dtype)):
            continue
        # batch dimensions broadcast on both sides (each operand's panels found per batch entry)
        x4 = (rng.standard_normal((2, 1, 19, 33)) * 4).astype(dtype)
        y4 = (rng.standard_normal((1, 3, 33, 21)) * 4).astype(dtype)
        np.testing.assert_allclose(ok.ops.batch_mat_mul(x4, y4).numpy(), np.matmul(x4, y4), rtol=1e-4, atol=1e-3)
        x = (rng.standard_normal((2, 70, 33)) * 4).astype(dtype)
        y = (rng.standard_normal((33, 65)) * 4).astype(dtype)
        got = ok.ops.batch_mat_mul(x, y).numpy()
        np.testing.assert_allclose(got, np.matmul(x, y), rtol=1e-4, atol=1e-3)
        y64 = y[:, :64].copy()  # whole column blocks: the packed kernel's vector stores
        np.testing.assert_allclose(ok.ops.batch_mat_mul(x, y64).numpy(), np.matmul(x, y64), rtol=1e-4, atol=1e-3)
        got = ok.ops.mat_mul(x[0].T.copy(), y, transpose_a=True).numpy()
        np.testing.assert_allclose(got, x[0] @ y, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_direct_matmul_reads_b_in_place_or_packs_it(be: Any, dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # mm_direct reads A in place always, and B in place when its rows are contiguous and
    # vector-aligned (else one pack launch over B's panels): both ways, with rows of C
    # past the last whole block of RM (clamped reads), short K (several column panels per
    # work-item), broadcast batches and transposes, against numpy.
    from opkernel_opencl import linalg_kernels

    if not be.supports_dtype(ok.as_dtype(dtype)):
        pytest.skip(f"{dtype} unsupported on this device")
    monkeypatch.setenv(linalg_kernels.ENV_MATMUL, "direct")
    launched: list[str] = []
    real = type(be).launch
    monkeypatch.setattr(type(be), "launch", lambda self, kernel, *a, **k: launched.append(kernel.function_name) or real(self, kernel, *a, **k))
    RN, RM = linalg_kernels.TILES[dtype]
    rng = np.random.default_rng(5)

    def data(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 4).astype(dtype)

    tol = {"rtol": 1e-4, "atol": 1e-3}
    for m, k, n in ((RM * 3 + 1, 5, RN * 4), (RM * 2, 70, RN * 2), (1, 3, RN), (RM + 2, 200, RN * 3 - 1)):
        x, y = data(m, k), data(k, n)
        in_place = n % RN == 0 and k * n <= linalg_kernels.DIRECT_B
        for ta, tb in ((False, False), (True, False), (False, True), (True, True)):
            launched.clear()
            got = ok.ops.mat_mul(x.T.copy() if ta else x, y.T.copy() if tb else y, transpose_a=ta, transpose_b=tb).numpy()
            np.testing.assert_allclose(got, x @ y, **tol)
            assert launched == (["mm_direct"] if in_place and not tb else ["pack", "mm_direct"]), (m, k, n, ta, tb, launched)
        # batches: both operands batched, one broadcast, and B broadcast along a middle axis
        xb, yb = data(2, 3, m, k), data(2, 1, k, n)
        np.testing.assert_allclose(ok.ops.batch_mat_mul(xb, yb).numpy(), np.matmul(xb, yb), **tol)
        x1, y3 = xb[:, :1].copy(), data(3, k, n)
        np.testing.assert_allclose(ok.ops.batch_mat_mul(x1, y3).numpy(), np.matmul(x1, y3), **tol)
        yt = data(2, 3, n, k)
        np.testing.assert_allclose(ok.ops.batch_mat_mul(xb, yt, adj_y=True).numpy(), np.matmul(xb, np.swapaxes(yt, -1, -2)), **tol)


def test_small_products_take_one_launch_and_large_ones_the_packed_kernel(be: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from opkernel_opencl import linalg_kernels

    monkeypatch.delenv(linalg_kernels.ENV_MATMUL, raising=False)
    assert linalg_kernels.matmul_variant(be, 4 * 4 * 4) == "small"
    assert linalg_kernels.matmul_variant(be, linalg_kernels.SMALL_WORK + 1) in ("direct", "local")
    assert linalg_kernels.matmul_variant(be, linalg_kernels.DIRECT_WORK + 1) in ("packed", "local")
    launched: list[Any] = []
    real = type(be).launch
    monkeypatch.setattr(type(be), "launch", lambda self, kernel, *a, **k: launched.append(kernel.function_name) or real(self, kernel, *a, **k))
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(ok.ops.batch_mat_mul(a, b).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ok.ops.mat_mul(a[1], b[:, :3].T.copy(), transpose_b=True).numpy(), a[1] @ b[:, :3], rtol=1e-5, atol=1e-5)
    assert launched == ["mm_small", "mm_small"]


def test_by_value_arguments_are_set_once_per_kernel_object(be: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(type(be), "BOUND_KERNELS", 4)
    be._bound_kernels.clear()
    be._bound_values.clear()
    rng = np.random.default_rng(5)
    for _ in range(3):  # alternating shapes reuse, then evict, the kernel objects: results stay right
        # small products (one launch) and packed ones (two: their argument tuples cached per shape)
        for m, k, n in ((3, 5, 4), (2, 7, 6), (40, 41, 42), (4, 4, 4), (1, 9, 2), (37, 50, 33), (5, 3, 3)):
            a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
            np.testing.assert_allclose(ok.ops.mat_mul(a, b).numpy(), a @ b, rtol=1e-5, atol=1e-4)
            assert len(be._bound_kernels) <= 4 and len(be._bound_values) <= 4
    x = ok.tensor(np.arange(6, dtype=np.float32))
    assert ok.ops.add(x, x).numpy().tolist() == [0, 2, 4, 6, 8, 10]


def test_bound_kernels_tell_float_arguments_apart_by_their_bits(be: Any) -> None:
    # Integer arguments are keyed by value, floats by their bytes: -0.0 == 0.0 and nan != nan.
    k = be.programs.kernel("fill", "float32", "fill", "Fill")
    out = be.new_array((64,), np.dtype(np.float32))
    for v in (0.0, -0.0, 0.0, np.nan, np.nan, -0.0):
        be.launch1d(k, 64, out.base_data, np.float32(v))
        got = out.get()
        assert (np.isnan(got).all() if np.isnan(v) else (got == v).all() and (np.signbit(got) == np.signbit(v)).all()), v
    ints = be.programs.kernel("fill", "int32", "fill", "Fill")
    iout = be.new_array((64,), np.dtype(np.int32))
    for v in (3, 3, -1, np.int32(3)):
        be.launch1d(ints, 64, iout.base_data, np.int32(v))
        assert (iout.get() == v).all()


@pytest.mark.parametrize("n", [1, 100, 4096, 100_003, 1_000_000])
def test_long_reductions(be: Any, n: int) -> None:
    x = np.random.default_rng(2).uniform(-1, 1, n).astype(np.float32)
    np.testing.assert_allclose(ok.ops.sum(x, [0]).numpy(), x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
    assert ok.ops.max(x, [0]).numpy() == x.max()
    assert ok.ops.arg_min(x, np.int32(0)).numpy() == x.argmin()
    if n < 4:
        return
    m = x[: n - n % 4].reshape(4, -1)
    np.testing.assert_allclose(ok.ops.mean(m, [1]).numpy(), m.astype(np.float64).mean(axis=1), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- larger shapes than the op tables use


def _agree(fn: Any, *args: Any, **kw: Any) -> None:
    """``fn`` gives the same result on opencl as on cpu (shapes large enough for every launch path)."""
    with engine.use_backend("cpu"):
        want = fn(*args, **kw)
    with engine.use_backend("opencl"):
        got = fn(*args, **kw)
    want = want if isinstance(want, (list, tuple)) else [want]
    got = got if isinstance(got, (list, tuple)) else [got]
    for w, g in zip(want, got):
        a, b = w.numpy(), g.numpy()
        assert a.shape == b.shape and a.dtype == b.dtype
        scale = max(1.0, float(np.abs(a).max())) if a.size and a.dtype.kind == "f" else 1.0
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-5 * scale)


_X = (np.random.default_rng(5).standard_normal((5, 7, 9, 11)) * 5).astype(np.float32)
_IMG = np.random.default_rng(6).standard_normal((2, 13, 11, 3)).astype(np.float32)
_FLT = np.random.default_rng(7).standard_normal((3, 2, 3, 4)).astype(np.float32)
_POOL = {"ksize": [1, 3, 2, 1], "strides": [1, 2, 3, 1], "padding": "SAME"}
LARGE = {
    "add-bcast": lambda: ok.ops.add(_X, _X[0, :, :1, :]),
    "less-bcast": lambda: ok.ops.less(_X[:, :1], _X),
    "select": lambda: ok.ops.select_v2(_X > 0, _X, _X[0, 0]),
    "sum-0,2": lambda: ok.ops.sum(_X, [0, 2]),
    "mean-3-keep": lambda: ok.ops.mean(_X, [3], keep_dims=True),
    "max-all": lambda: ok.ops.max(_X, [0, 1, 2, 3]),
    "argmax-1": lambda: ok.ops.arg_max(_X, np.int32(1)),
    "transpose": lambda: ok.ops.transpose(_X, [3, 1, 0, 2]),
    "strided-slice": lambda: ok.ops.strided_slice(
        _X, np.array([4, 0, 8, 1], np.int32), np.array([0, 7, 0, 10], np.int32), np.array([-2, 3, -3, 2], np.int32), end_mask=2
    ),
    "concat": lambda: ok.ops.concat_v2([_X, _X[:, :3]], np.int32(1)),
    "tile": lambda: ok.ops.tile(_X[:2, :3], [2, 1, 3, 2]),
    "gather-batch": lambda: ok.ops.gather_v2(_X, np.array([[3, 1], [0, 6], [1, 1], [2, 2], [0, 0]], np.int64), np.int32(1), batch_dims=1),
    "segment-sum": lambda: ok.ops.unsorted_segment_sum(_X, np.array([0, 2, -1, 2, 1], np.int32), np.int32(4)),
    "batch-matmul-adj": lambda: ok.ops.batch_mat_mul(np.ascontiguousarray(_X[:, :, :5]), np.ascontiguousarray(_X[0, :, :3]), adj_y=True),
    "softmax": lambda: ok.ops.softmax(_X),
    "conv-strided": lambda: ok.ops.conv2d(_IMG, _FLT, strides=[1, 2, 3, 1], padding="SAME"),
    "conv-dilated": lambda: ok.ops.conv2d(_IMG, _FLT, strides=[1, 1, 1, 1], padding="VALID", dilations=[1, 2, 1, 1]),
    "conv-backprop-input": lambda: ok.ops.conv2d_backprop_input(
        np.array(_IMG.shape, np.int32), _FLT, np.ones((2, 7, 4, 4), np.float32), strides=[1, 2, 3, 1], padding="SAME"
    ),
    "conv-backprop-filter": lambda: ok.ops.conv2d_backprop_filter(
        _IMG, np.array(_FLT.shape, np.int32), np.ones((2, 7, 4, 4), np.float32), strides=[1, 2, 3, 1], padding="SAME"
    ),
    "max-pool-grad": lambda: ok.ops.max_pool_grad(_IMG, ok.ops.max_pool(_IMG, **_POOL), np.ones((2, 7, 4, 3), np.float32), **_POOL),
    "avg-pool-grad": lambda: ok.ops.avg_pool_grad(np.array(_IMG.shape, np.int32), np.ones((2, 7, 4, 3), np.float32), **_POOL),
}


@pytest.mark.parametrize("name", sorted(LARGE))
def test_larger_shapes_agree_with_cpu(be: Any, name: str) -> None:
    _agree(LARGE[name])


def test_only_float16_kernels_go_through_the_float32_wrapper(be: Any) -> None:
    # float32_compute kernels are registered twice: the wrapper for float16 alone, the
    # wrapped function itself for every other type (no per-call scan of the attrs).
    from opkernel.engine import select_kernel
    from opkernel.kernels import kernels_for
    from opkernel.op_registry import get_op_def

    for op in ("MatMul", "Conv2D", "Sum", "MaxPool", "OneHot"):
        defs = kernels_for(op, "opencl")
        half = [k for k in defs if any(ok.float16 in v for v in k.type_constraints.values())]
        assert len(half) == 1 and hasattr(half[0].impl, "_float32_of"), op
        for t in (ok.float32, ok.float16):
            impl = select_kernel(get_op_def(op), "opencl", {"T": t}).impl
            assert hasattr(impl, "_float32_of") == (t == ok.float16), (op, t)


def test_float16_is_stored_as_half_and_computed_in_float32(be: Any) -> None:
    x = np.random.default_rng(8).standard_normal((70, 33)).astype(np.float16)
    t = ok.tensor(x)
    assert t.value.dtype == np.float16
    np.testing.assert_array_equal(ok.ops.add(t, t).numpy(), (x.astype(np.float32) * 2).astype(np.float16))
    np.testing.assert_allclose(ok.ops.sum(t, [0]).numpy(), x.astype(np.float32).sum(0), rtol=2e-3, atol=2e-2)
    np.testing.assert_allclose(ok.ops.mat_mul(t, t, transpose_b=True).numpy(), (x.astype(np.float32) @ x.T.astype(np.float32)), rtol=2e-3, atol=5e-2)
    np.testing.assert_array_equal(ok.ops.cast(t, DstT=ok.float32).numpy(), x.astype(np.float32))
    assert ok.ops.zeros_like(t).numpy().dtype == np.float16 and ok.ops.ones_like(t).numpy().min() == 1


@pytest.mark.parametrize("k, s, padding", [((2, 2), (2, 2), "VALID"), ((2, 2), (3, 3), "SAME")])
def test_window_kernels_of_both_device_types_agree(be: Any, monkeypatch: pytest.MonkeyPatch, k: Any, s: Any, padding: str) -> None:
    # CPU devices take per-position pooling, col2im and im2col kernels, GPUs one work-item
    # per element (im2col: per window row): on this device, run both against the cpu backend.
    rng = np.random.default_rng(5)
    x = np.maximum(rng.standard_normal((2, 6, 7, 19)), 0).astype(np.float32)  # Relu's ties
    x[1, 0, 0, 3] = np.nan
    pool = {"ksize": [1, *k, 1], "strides": [1, *s, 1], "padding": padding}
    w = rng.standard_normal((3, 3, 19, 4)).astype(np.float32)
    conv = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    dy = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)

    def run(backend: str) -> list[np.ndarray]:
        with ok.use_backend(backend):
            y = ok.ops.max_pool(x, **pool)
            g = ok.ops.max_pool_grad(x, y, np.ones(y.shape, np.float32) * 2, **pool)
            dx = ok.ops.conv2d_backprop_input(np.array(x.shape, np.int32), w, dy, **conv)
            xz = np.nan_to_num(x)
            c1 = ok.ops.conv2d(xz, w, **conv)  # im2col: per output row on CPU devices
            c2 = ok.ops.conv2d(xz, w, strides=[1, 1, 1, 1], padding="VALID", dilations=[1, 2, 1, 1])
            ya, am = ok.ops.max_pool_with_argmax(x, include_batch_in_index=True, **pool)
            ga = ok.ops.max_pool_grad_with_argmax(x, np.ones(y.shape, np.float32) * 3, am, include_batch_in_index=True, **pool)
            return [y.numpy(), g.numpy(), dx.numpy(), c1.numpy(), c2.numpy(), ya.numpy(), am.numpy(), ga.numpy()]

    expect = run("cpu")
    for is_cpu in (True, False):
        monkeypatch.setattr(be, "is_cpu", is_cpu)
        for got, want in zip(run("opencl"), expect):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, w_shape, conv", [
    # output positions: 189 (the last 6-row panel has 3 padding rows), 80 (2), 60 (none)
    ((3, 7, 9, 1), (3, 3, 1, 32), {"strides": [1, 1, 1, 1], "padding": "SAME"}),
    ((2, 9, 8, 5), (3, 2, 5, 17), {"strides": [1, 2, 1, 1], "padding": "SAME", "dilations": [1, 1, 2, 1]}),
    ((4, 11, 10, 3), (2, 3, 3, 40), {"strides": [1, 2, 3, 1], "padding": "VALID"}),
])
def test_conv2d_columns_written_as_matmul_panels(be: Any, monkeypatch: pytest.MonkeyPatch, dtype: str, shape: Any,
                                                 w_shape: Any, conv: Any) -> None:
    # On CPU devices a Conv2D that takes the packed MatMul has im2col write the product's
    # A panels itself (im2col_panels, padding rows zeroed); the rows layout of GPUs as well.
    from opkernel_opencl import linalg_kernels

    if not be.supports_dtype(ok.as_dtype(dtype)):
        pytest.skip(f"{dtype} unsupported on this device")
    rng = np.random.default_rng(9)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    bias = rng.standard_normal(w_shape[3]).astype(dtype)
    with ok.use_backend("cpu"):
        want = [ok.ops.conv2d(x, w, **conv).numpy(), ok.ops.fused_conv2d(x, w, bias, activation="Relu", **conv).numpy()]
    monkeypatch.delenv(linalg_kernels.ENV_MATMUL, raising=False)
    launched: list[str] = []
    real = type(be).launch
    monkeypatch.setattr(type(be), "launch", lambda self, kernel, *a, **k: launched.append(kernel.function_name) or real(self, kernel, *a, **k))
    for is_cpu in (True, False):
        monkeypatch.setattr(be, "is_cpu", is_cpu)
        monkeypatch.setattr(be, "max_work_group", 1024)  # GPUs: the local-memory MatMul
        launched.clear()
        got = [ok.ops.conv2d(x, w, **conv).numpy(), ok.ops.fused_conv2d(x, w, bias, activation="Relu", **conv).numpy()]
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
        assert ("im2col_panels" in launched) == is_cpu, launched


@pytest.mark.parametrize("group", [64, 1024])
def test_launch1d_covers_every_element_with_any_work_group_size(be: Any, group: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # launch1d splits a launch into work-groups of group1d (1024 on Intel's CPU runtime),
    # then of 64, then single work-items: every element is written once, whatever the split.
    monkeypatch.setattr(be, "group1d", group)
    sizes = []
    real = type(be)._enqueue
    monkeypatch.setattr(type(be), "_enqueue", lambda self, k, g, l, *a, **kw: sizes.append((g, l)) or real(self, k, g, l, *a, **kw))
    for n in (5, 64, 1024 * 2, 1024 * 3 + 64 * 2 + 5, 1024 + 37):
        x = np.arange(n, dtype=np.float32) - 7
        sizes.clear()
        np.testing.assert_array_equal(ok.ops.neg(x).numpy(), -x)
        assert sum(g[0] for g, _ in sizes) == n, sizes
        assert all(g[0] % (l[0] if l else 1) == 0 for g, l in sizes), sizes
    # a kernel whose own work-group limit is below group1d: whole groups of 64 under it
    monkeypatch.setattr(be, "_group_limit", lambda kernel: 200)
    sizes.clear()
    x = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(ok.ops.neg(x).numpy(), -x)
    assert all((l or (1,))[0] <= 192 for _, l in sizes) and sum(g[0] for g, _ in sizes) == 1000, sizes


@pytest.mark.parametrize("dtype,index", [("float32", "int32"), ("float64", "int64"), ("int32", "int64")])
def test_segment_sum_kernels_of_both_device_types_add_in_row_order(
    be: Any, dtype: str, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # UnsortedSegmentSum takes a work-item per segment and block of columns on CPU
    # devices and one per output element on GPUs: run each on this device.  The CPU
    # kernel adds a segment's rows in row order, np.add.at's bits; the per-element
    # kernel's loop may be reassociated by a CPU device's compiler (Intel's is).
    from opkernel_opencl import array_kernels

    if not be.supports_dtype(ok.as_dtype(dtype)):
        pytest.skip(f"{dtype} unsupported on this device")
    rng = np.random.default_rng(11)
    launched: list[str] = []
    real = type(be).launch
    monkeypatch.setattr(type(be), "launch", lambda self, kernel, *a, **k: launched.append(kernel.function_name) or real(self, kernel, *a, **k))
    monkeypatch.setattr(type(be), "launch1d", lambda self, kernel, *a, **k: launched.append(kernel.function_name) or real(self, kernel, (a[0],), None, *a[1:], **k))
    cols = array_kernels.SEGMENT_COLUMNS
    for rows, inner, segments in ((300, (cols + 5,), 9), (64, (3, 4), 40), (7, (), 3)):
        data = (rng.standard_normal((rows,) + inner) * 8).astype(dtype)
        ids = rng.integers(0, segments - 2, rows).astype(index)  # the last two segments stay empty
        want = np.zeros((segments,) + inner, dtype)
        np.add.at(want, ids, data)
        for is_cpu in (True, False):
            monkeypatch.setattr(be, "is_cpu", is_cpu)
            launched.clear()
            got = ok.ops.unsorted_segment_sum(data, ids, np.int64(segments)).numpy()
            if is_cpu:
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            assert launched == ["segment_sum_rows" if is_cpu else "segment_sum"], launched


@pytest.mark.parametrize("activation", ["Identity", "Relu", "Relu6", "Elu", "Sigmoid", "Tanh"])
def test_dense_epilogues_of_both_device_types_agree(be: Any, monkeypatch: pytest.MonkeyPatch, activation: str) -> None:
    # FusedMatMul and FusedConv2D add the bias per row on CPU devices and per element
    # over an (N, rows) range on GPUs: run both on this device against the cpu backend.
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((67, 13)).astype(np.float32), rng.standard_normal((13, 19)).astype(np.float32) * 3
    bias = rng.standard_normal(19).astype(np.float32)
    x, w = rng.standard_normal((2, 5, 6, 3)).astype(np.float32), rng.standard_normal((3, 3, 3, 7)).astype(np.float32)
    conv_bias = rng.standard_normal(7).astype(np.float32)

    def run(backend: str) -> list[np.ndarray]:
        with ok.use_backend(backend):
            y = ok.ops.fused_mat_mul(a, b, bias, activation=activation)
            z = ok.ops.fused_conv2d(x, w, conv_bias, strides=[1, 1, 1, 1], padding="SAME", activation=activation)
            return [y.numpy(), z.numpy()]

    expect = run("cpu")
    for is_cpu in (True, False):
        monkeypatch.setattr(be, "is_cpu", is_cpu)
        for got, want in zip(run("opencl"), expect):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, axis", [((3, 50, 37), 1), ((70, 16), 0), ((2, 5, 3, 19), 1), ((9, 4), 0)])
def test_column_reductions_of_both_device_types_agree(be: Any, monkeypatch: pytest.MonkeyPatch, shape: Any, axis: int) -> None:
    # Reductions over a non-last axis take a work-item per block of 16 outputs on CPU
    # devices and one per output on GPUs: run both against the cpu backend (a partial
    # last block, nan in Max/Min, integers, booleans).
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[5] = np.nan
    xi = (np.nan_to_num(x) * 10).astype(np.int32)
    xb = rng.random(shape) > 0.3
    g = rng.standard_normal((4 * shape[0], 16 + shape[-1] % 5)).astype(np.float32)

    def run(backend: str) -> list[np.ndarray]:
        with ok.use_backend(backend):
            out = [f(v, [axis]).numpy() for f in (ok.ops.sum, ok.ops.max, ok.ops.min, ok.ops.mean) for v in (x, xi)]
            out.append(ok.ops.prod(x, [axis]).numpy())
            out += [ok.ops.all(xb, [axis]).numpy(), ok.ops.any(xb, [axis]).numpy(), ok.ops.bias_add_grad(g).numpy()]
            return out

    expect = run("cpu")
    for is_cpu in (True, False):
        monkeypatch.setattr(be, "is_cpu", is_cpu)
        for got, want in zip(run("opencl"), expect, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa, sb", [((1, 5), (5,)), ((7, 1), (1, 5)), ((300, 16), (16,)), ((9, 1), (9, 70)),
                                    ((2, 1, 3), (1, 4, 1)), ((2, 1, 3, 1), (1, 4, 1, 5))])
def test_broadcasting_kernels_agree_with_numpy(be: Any, sa: Any, sb: Any) -> None:
    # Two dimensions after collapsing take k_bc2, more take k_bc's loop (rank 1 is padded).
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    np.testing.assert_array_equal(ok.ops.sub(a, b).numpy(), a - b)
    np.testing.assert_array_equal(ok.ops.sub(b, a).numpy(), b - a)
    ai, bi = (a * 100).astype(np.int32), (b * 100).astype(np.int32)
    np.testing.assert_array_equal(ok.ops.sub(ai, bi).numpy(), ai - bi)
    shape = np.broadcast_shapes(sa, sb)
    cond = rng.random(shape[-1:]) > 0.5
    np.testing.assert_array_equal(ok.ops.select_v2(cond, a, b).numpy(), np.where(cond, a, b))


def test_row_kernels_read_float64_rows_with_the_scalar_loops(be: Any) -> None:
    """Vectors of 8 doubles (512 bits) break PoCL's compiler on AVX-512 CPUs: float64 rows
    never take the ``*_v8`` kernels, float32 rows of a multiple of 8 do where enabled."""
    from opkernel_opencl.common import vector_rows

    assert not vector_rows(be, 64, 8)
    assert vector_rows(be, 64, 4) == (bool(be.row_vectors) and be.base_align % 32 == 0)


@pytest.mark.parametrize("dtype", ["float32"])
def test_row_kernels_read_as_vectors_agree_with_the_scalar_loops(be: Any, dtype: str) -> None:
    """Softmax, LogSoftmax, SoftmaxGrad and the layer norm pair over rows of a multiple of 8
    (the ``*_v8`` kernels on CPU devices) give the scalar loops' values, NaN, inf and -inf
    rows included, on every device the suite runs on."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 32)).astype(dtype)
    x[1, 3] = np.nan
    x[2, :] = -np.inf
    x[3, 5] = np.inf
    x[4, 9] = -np.inf
    g = rng.standard_normal((6, 32)).astype(dtype)
    s = np.exp(x - 1).astype(dtype)
    scale, offset = rng.standard_normal(32).astype(dtype), rng.standard_normal(32).astype(dtype)
    t = ok.tensor

    def outputs() -> list[np.ndarray]:
        fwd = ok.ops.fused_layer_norm(t(x), t(scale), t(offset), epsilon=1e-3)
        back = ok.ops.fused_layer_norm_grad(t(g), t(x), t(scale), epsilon=1e-3)
        return [ok.ops.softmax(t(x)).numpy(), ok.ops.log_softmax(t(x)).numpy(), ok.ops.softmax_grad(t(g), t(s)).numpy(),
                fwd.numpy(), *[o.numpy() for o in back]]

    was = be.row_vectors
    try:
        be.row_vectors = False
        scalar = outputs()
        be.row_vectors = True
        vector = outputs()
    finally:
        be.row_vectors = was
    tol = 1e-5 if dtype == "float32" else 1e-12
    for name, a, b in zip(["Softmax", "LogSoftmax", "SoftmaxGrad", "FusedLayerNorm", "dx", "dscale", "doffset"],
                          scalar, vector):
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol, equal_nan=True, err_msg=name)


def test_host_memory_literals_are_not_uploaded(be: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Reshape's shape or a Transpose's perm given as a literal, on the literal cache's
    path (the second call on): the kernel reads it in host memory, so it is not uploaded
    and downloaded again; results are right, a numpy shape changed by the caller after the
    call changes nothing, and under a tape (which keeps the inputs) literals are uploaded
    as before."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = ok.tensor(x)
    np.testing.assert_array_equal(ok.ops.reshape(t, [4, 6]).numpy(), x.reshape(4, 6))  # fills the literal cache
    np.testing.assert_array_equal(ok.ops.transpose(t, [2, 0, 1]).numpy(), x.transpose(2, 0, 1))
    shape = np.array([6, 4], np.int32)
    ok.ops.reshape(t, shape)
    uploads: list[tuple[int, ...]] = []
    real = type(be).from_numpy

    def counting(self: Any, array: np.ndarray) -> Any:
        uploads.append(array.shape)
        return real(self, array)

    monkeypatch.setattr(type(be), "from_numpy", counting)
    np.testing.assert_array_equal(ok.ops.reshape(t, [4, 6]).numpy(), x.reshape(4, 6))
    np.testing.assert_array_equal(ok.ops.transpose(t, [2, 0, 1]).numpy(), x.transpose(2, 0, 1))
    out = ok.ops.reshape(t, shape)
    shape[:] = [3, 8]
    np.testing.assert_array_equal(out.numpy(), x.reshape(6, 4))
    np.testing.assert_array_equal(ok.ops.reshape(t, shape).numpy(), x.reshape(3, 8))
    assert uploads == []
    v = ok.tensor(x)
    uploads.clear()
    with ok.GradientTape() as tape:
        tape.watch(v)
        y = ok.ops.transpose(v, [2, 0, 1])
    assert uploads == [(3,)]  # the perm, kept by the tape with the call's inputs
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), np.ones_like(x))
