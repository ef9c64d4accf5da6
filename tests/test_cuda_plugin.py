"""opkernel-cuda without a GPU: discovery never imports cupy, the reason the backend
is unavailable is reported, errors translate, out-of-memory retries once, and
the plugin's kernel table, built over numpy instead of cupy, passes the op
tables (every kernel that is written against the array API, which is all but
the raw CUDA ones: those are compiled by test_cuda_compile.py).

On a machine with a GPU the ``backend`` fixture runs the whole suite on
``cuda`` as well (``pytest --opkernel-backends=cpu,cuda``).
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import opkernel as ok
from opkernel import engine
from opkernel.errors import InternalError, InvalidArgumentError, ResourceExhaustedError
from opkernel.testing import isolated_registries

import optable
from isolated import run_isolated
from optable import OpCase

ROOT = Path(__file__).resolve().parents[1]
#: opkernel-cuda installed as a distribution, with its entry point (else its modules are imported from the checkout)
INSTALLED = any(ep.value == "opkernel_cuda" for ep in importlib.metadata.entry_points(group="opkernel"))
if not INSTALLED:
    sys.path.insert(0, str(ROOT / "plugins" / "cuda"))
try:
    from opkernel_cuda import driver, kernels, runtime
    from opkernel_cuda.backend import CudaBackend
    from opkernel_cuda.sources import ACCUMULATOR, CTYPES, POOL_TYPES, REALS, SOURCES, expression, source
finally:
    if not INSTALLED:
        sys.path.remove(str(ROOT / "plugins" / "cuda"))

REASONS = ("cupy not installed", "no CUDA driver", "no CUDA device", "the CUDA driver could not be queried",
           driver.ENV_DEVICE, "NVRTC could not compile", "the probe", "cupy cannot be imported")


needs_install = pytest.mark.skipif(not INSTALLED, reason="opkernel-cuda is not installed (pip install -e plugins/cuda)")


# ---------------------------------------------------------------- discovery


@needs_install
def test_discovery_never_imports_cupy() -> None:
    code = textwrap.dedent(
        """
        import json, sys
        import opkernel as ok
        import opkernel_cuda
        from opkernel import engine, plugins
        plugins.ensure_loaded()
        status = {n: r for n, _, r in engine.backend_status()}
        ok.available_backends()
        import opkernel_cuda.kernels, opkernel_cuda.backend
        print(json.dumps({"cupy": "cupy" in sys.modules, "status": status}))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["cupy"] is False, "discovery or availability imported cupy"
    assert "cuda" in result["status"]
    reason = result["status"]["cuda"]
    assert reason is None or reason.startswith(REASONS), reason


@needs_install
def test_opkernel_info_reports_the_reason() -> None:
    reason = engine.backend_status()
    cuda = {n: r for n, _, r in reason}["cuda"]
    if cuda is None:
        pytest.skip("a CUDA device is available here")
    out = subprocess.run([sys.executable, "-m", "opkernel", "info"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # a plain-text table, or rich's when rich is installed ("│ cuda │ 20 │ unavailable: ...")
    rows = [ln for ln in out.stdout.splitlines() if ln.strip("│┃ ").startswith("cuda ")]
    assert any("unavailable" in ln and cuda in ln for ln in rows), out.stdout


@needs_install
def test_unavailable_cuda_leaves_cpu_working() -> None:
    if {n: r for n, _, r in engine.backend_status()}["cuda"] is None:
        pytest.skip("a CUDA device is available here")
    with ok.use_backend("cpu"):
        assert ok.ops.add(ok.tensor([1.0]), ok.tensor([2.0])).numpy().tolist() == [3.0]


# ---------------------------------------------------------------- availability


class FakeDriver:
    def __init__(self, init: int = 0, count: int = 1, raises: bool = False) -> None:
        self.init, self.count, self.raises = init, count, raises

    def cuInit(self, flags: int) -> int:
        if self.raises:
            raise RuntimeError("broken driver")
        return self.init

    def cuDeviceGetCount(self, ref: Any) -> int:
        ref._obj.value = self.count
        return 0

    def cuGetErrorName(self, code: int, ref: Any) -> int:
        return 1

    def cuDeviceGet(self, ref: Any, index: int) -> int:
        ref._obj.value = index
        return 0

    def cuDeviceGetName(self, buf: Any, size: int, dev: Any) -> int:
        buf.value = b"NVIDIA H200"
        return 0

    def cuDeviceGetAttribute(self, ref: Any, attr: int, dev: Any) -> int:
        ref._obj.value = {75: 9, 76: 0}[attr]
        return 0

    def cuDriverGetVersion(self, ref: Any) -> int:
        ref._obj.value = 13000
        return 0


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Any]:
    monkeypatch.setattr(driver.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setenv("OPKERNEL_PROBE_CACHE_DIR", str(tmp_path / "probes"))
    from opkernel import probes

    monkeypatch.setattr(probes, "_memo", {})
    holder: dict[str, Any] = {"lib": FakeDriver(), "probe": None, "probed": []}

    def in_child(index: int) -> str | None:
        holder["probed"].append(index)
        return holder["probe"]  # type: ignore[no-any-return]

    monkeypatch.setattr(driver, "_probe_in_child", in_child)

    def load(name: str) -> Any:
        lib = holder["lib"]
        if lib is None:
            raise OSError(f"{name}: cannot open shared object file")
        return lib

    monkeypatch.setattr(driver.ctypes, "CDLL", load)
    yield holder


def test_probe_reasons(fake_driver: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    assert driver.probe("") is None
    assert driver.probe("0") is None
    assert "has 1 CUDA device" in (driver.probe("3") or "")
    assert "not a device ordinal" in (driver.probe("gpu") or "")
    fake_driver["lib"] = FakeDriver(init=100)
    assert (driver.probe("") or "").startswith("no CUDA device")
    fake_driver["lib"] = FakeDriver(init=3)
    assert (driver.probe("") or "").startswith("no CUDA device (cuInit failed")
    fake_driver["lib"] = FakeDriver(count=0)
    assert driver.probe("") == "no CUDA device"
    fake_driver["lib"] = FakeDriver(raises=True)
    assert (driver.probe("") or "").startswith("the CUDA driver could not be queried")
    fake_driver["lib"] = None
    assert driver.probe("") == "no CUDA driver (libcuda.so.1 not found)"
    monkeypatch.setattr(driver.importlib.util, "find_spec", lambda name: None)
    assert (driver.probe("") or "").startswith("cupy not installed")


def test_a_device_counts_only_after_its_probe_passes(fake_driver: dict[str, Any]) -> None:
    fake_driver["probe"] = "NVRTC could not compile the probe kernel for this device (CompileException: ...)"
    assert driver.probe("") == fake_driver["probe"]
    assert fake_driver["probed"] == [0]
    assert driver.probe("") == fake_driver["probe"]  # cached per fingerprint: not probed again
    assert fake_driver["probed"] == [0]
    [status] = driver.statuses("")
    assert status.id == "0" and status.name == "NVIDIA H200" and "compute capability 9.0" in status.platform
    assert status.reason == fake_driver["probe"] and not status.chosen and status.kind == "gpu"


def test_the_probe_child_process_is_read_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    def answer(stdout: str, code: int = 0, stderr: str = "") -> Any:
        return lambda *a, **k: subprocess.CompletedProcess(a[0], code, stdout, stderr)

    monkeypatch.setattr(driver.subprocess, "run", answer('{"reason": null}\n'))
    assert driver._probe_in_child(0) is None
    monkeypatch.setattr(driver.subprocess, "run", answer('warming up\n{"reason": "the probe kernel gave wrong answers"}\n'))
    assert driver._probe_in_child(0) == "the probe kernel gave wrong answers"
    monkeypatch.setattr(driver.subprocess, "run", answer("", -11, "Segmentation fault"))
    assert driver._probe_in_child(0) == "the probe's process exited with status -11 (Segmentation fault)"

    def hang(*a: Any, **k: Any) -> Any:
        raise subprocess.TimeoutExpired(a[0], driver.PROBE_TIMEOUT)

    monkeypatch.setattr(driver.subprocess, "run", hang)
    assert "did not finish within" in (driver._probe_in_child(0) or "")


def test_the_probe_without_a_gpu_says_why() -> None:
    """The real probe, in its own process, on a machine whose driver has no device (or no
    driver): a reason, never an exception or a crash."""
    out = run_isolated(
        "from opkernel_cuda import driver\nprint(repr(driver._probe_in_child(0)))", what="the CUDA probe", timeout=300
    )
    reason = out.stdout.strip().splitlines()[-1]
    assert reason != "None" and ("did not run" in reason or "cupy cannot be imported" in reason or "NVRTC" in reason), reason


def test_availability_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(spec: str) -> str | None:
        raise RuntimeError("surprise")

    monkeypatch.setattr(CudaBackend, "_availability", {})
    monkeypatch.setattr(driver, "probe", boom)
    assert "surprise" in (CudaBackend.availability() or "")


def test_backend_class() -> None:
    assert CudaBackend.name == "cuda" and CudaBackend.priority == 20
    reason = CudaBackend.availability()
    assert reason is None or reason.startswith(REASONS), reason


# ---------------------------------------------------------------- errors


def _bare_backend() -> CudaBackend:
    be = object.__new__(CudaBackend)
    be.index, be.device_name = 0, "Fake GPU"
    be.memory = lambda: {"active_bytes": 10, "device_total_bytes": 100}  # type: ignore[method-assign]
    return be


def _cupy_error(base: type[Exception], module: str, *args: Any, **attrs: Any) -> Exception:
    cls = type("OutOfMemoryError" if issubclass(base, MemoryError) else "CUDARuntimeError", (base,), {"__module__": module})
    e = cls(*args)
    for k, v in attrs.items():
        setattr(e, k, v)
    return e


def test_translate_out_of_memory() -> None:
    oom = _cupy_error(MemoryError, "cupy.cuda.memory", "Out of memory allocating 1,024 bytes (allocated so far: 0 bytes).", _size=1024)
    err = _bare_backend().translate_error(oom, "MatMul")
    assert isinstance(err, ResourceExhaustedError)
    assert err.op == "MatMul" and err.requested_bytes == 1024
    assert "'MatMul'" in str(err) and "1024 bytes" in str(err)
    parsed = _bare_backend().translate_error(
        _cupy_error(MemoryError, "cupy.cuda.memory", "Out of memory allocating 2,048 bytes (allocated so far: 0 bytes)."), "Add"
    )
    assert isinstance(parsed, ResourceExhaustedError) and parsed.requested_bytes == 2048


def test_translate_other_cuda_errors() -> None:
    err = _bare_backend().translate_error(
        _cupy_error(RuntimeError, "cupy_backends.cuda.api.runtime", "cudaErrorIllegalAddress: an illegal memory access"), "Conv2D"
    )
    assert isinstance(err, InternalError) and err.op == "Conv2D" and "'Conv2D'" in str(err)
    shapes = _bare_backend().translate_error(ValueError("operands could not be broadcast together with shapes (2,) (3,)"), "Add")
    assert isinstance(shapes, InvalidArgumentError) and "Incompatible shapes" in str(shapes) and shapes.op == "Add"
    assert _bare_backend().translate_error(KeyError("x"), "Add") is None
    assert _bare_backend().translate_error(MemoryError("host"), "Add") is None


class FakePool:
    def __init__(self) -> None:
        self.freed = 0

    def free_all_blocks(self) -> None:
        self.freed += 1


def test_out_of_memory_retries_once(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = FakePool()
    monkeypatch.setattr(runtime.STATE, "pool", pool)
    monkeypatch.setattr(runtime.STATE, "retries", 0)
    calls: list[int] = []

    def flaky(x: int, **attrs: Any) -> int:
        calls.append(x)
        if len(calls) == 1:
            raise MemoryError("Out of memory allocating 8 bytes")
        return x + 1

    assert runtime.guarded(flaky)(1, T=None) == 2
    assert calls == [1, 1] and pool.freed == 1 and runtime.STATE.retries == 1

    def always(x: int) -> int:
        raise MemoryError("Out of memory allocating 8 bytes")

    with pytest.raises(MemoryError):
        runtime.guarded(always)(1)
    assert pool.freed == 2
    with pytest.raises(MemoryError):
        runtime.guarded(always, retry=False)(1)
    assert pool.freed == 2


# ---------------------------------------------------------------- the kernel table


def test_every_op_has_a_cuda_kernel() -> None:
    from opkernel import kernels as registry
    from opkernel import plugins

    plugins.ensure_loaded()
    covered = {op for op, *_ in kernels.rows()}
    cpu = {k.op for k in registry.all_kernels() if k.backend == "cpu" and "cpu" in str(k.provider)}
    assert cpu - covered == set(kernels.CPU_ONLY), sorted(cpu - covered)
    assert covered <= cpu, sorted(covered - cpu)


RAW = {  # op -> the source its raw kernel is in
    "SoftmaxCrossEntropyWithLogits": "xent", "SparseSoftmaxCrossEntropyWithLogits": "sparse_xent",
    "BiasAddGrad": "bias_grad", "MaxPool": "pool", "MaxPoolGrad": "pool", "MaxPoolGradGrad": "pool",
    "MaxPoolWithArgmax": "pool", "MaxPoolGradWithArgmax": "pool",
    "ApplyGradientDescent": "training", "ApplyMomentum": "training", "ApplyAdam": "training",
}


def test_raw_kernels_are_instantiated_for_their_dtypes() -> None:
    table = {op: constraints for op, _, constraints, _ in kernels.rows()}
    for op, name in RAW.items():
        src = source(name)
        raw = POOL_TYPES if name == "pool" else REALS  # the types whose kernel body launches the raw kernel
        dtypes = [d for d in (table[op] or {}).get("T", CTYPES) if d in raw]
        assert dtypes, op
        for d in dtypes:
            for kernel in src.kernels:
                prefix = expression(kernel, (CTYPES[d], ACCUMULATOR[d]))[:-1]
                assert any(e.startswith(prefix) for e in src.name_expressions()), f"{op}: {kernel} for {d}"
    assert {s.name for s in SOURCES} == set(RAW.values()) | RANDOM_SOURCES


#: The sources of the stateless random ops' kernels (random_kernels.py).
RANDOM_SOURCES = {"philox", "philox_double", "philox_int", "multinomial"}


def test_random_kernels_launch_instantiated_kernels() -> None:
    from opkernel_cuda import random_kernels as rk

    names = {(s.name, n) for s in SOURCES for n in s.name_expressions()}
    for d in rk.FLOATS:
        for kind in ("uniform", "normal", "truncated"):
            want = (("philox_double", expression(f"philox_{kind}_double", ("double",))) if d == "float64"
                    else ("philox", expression(f"philox_{kind}", (CTYPES[d],))))
            assert want in names, (d, kind)
    for d in rk.INTS:
        assert ("philox_int", expression("philox_int", rk._INT_ARGS[d])) in names, d
    for t in ("float32", "float64"):
        for o in ("int32", "int64"):
            assert ("multinomial", expression("multinomial", (CTYPES[t], CTYPES[o]))) in names


# ---------------------------------------------------------------- the table run on numpy


class SimBackend(ok.Backend):
    """numpy arrays, and the CUDA plugin's kernels built over numpy."""

    name = "cudasim"
    priority = -100
    array_types = (np.ndarray,)

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.array(array)

    def to_numpy(self, value: Any) -> np.ndarray:
        return value  # type: ignore[no-any-return]

    def as_output(self, value: Any, dtype: ok.DType) -> np.ndarray:
        return np.asarray(value, dtype.np)


class SimPlugin:
    @ok.hookimpl
    def opkernel_register_backends(self) -> list[type[ok.Backend]]:
        return [SimBackend]

    @ok.hookimpl
    def opkernel_register_kernels(self) -> None:
        kernels.register_all(backend="cudasim", xp="numpy", special="numpy")


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with isolated_registries():
        ok.register_plugin(SimPlugin(), name="cudasim")
        with ok.use_backend("cudasim"):
            yield "cudasim"


def _cases() -> list[OpCase]:
    import test_ops_array
    import test_ops_math
    import test_ops_nn

    return [c for c in test_ops_math.CASES + test_ops_array.CASES + test_ops_nn.CASES if c.op not in kernels.CPU_ONLY]


CASES = _cases()


@pytest.mark.parametrize("case,dtype", optable.value_params(CASES))
def test_table_on_numpy_values(case: OpCase, dtype: str, sim: str) -> None:
    if dtype == "bfloat16":
        pytest.skip("cupy has no bfloat16")
    optable.check_values(case, dtype, sim)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=str)
def test_table_on_numpy_gradients(case: OpCase, sim: str) -> None:
    optable.check_gradient(case, sim)


def test_conv2d_nchw_and_dilation_on_numpy(sim: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    f = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
    attrs = dict(strides=[1, 2, 1, 1], padding="SAME", dilations=[1, 1, 2, 1])
    got = ok.execute("Conv2D", x, f, **attrs).numpy()
    with ok.use_backend("cpu"):
        want = ok.execute("Conv2D", x, f, **attrs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- fixes from the first GPU run, on numpy


def test_zeros_of_max_and_min_take_the_sign_of_the_last_zero() -> None:
    """cupy's tree reduction keeps whichever equal zero it meets first; the fix-up gives each
    zero result the sign of the last zero of its slice, which numpy's sequential reduction
    (TensorFlow's rule) gives."""
    from opkernel_cuda.math_kernels import zeros_signed_as_the_last

    rng = np.random.default_rng(0)
    values = np.array([-0.0, 0.0, 1.0, -1.0, np.nan], np.float32)
    for _ in range(100):
        shape = tuple(int(n) for n in rng.integers(1, 5, rng.integers(1, 4)))
        x = rng.choice(values, size=shape, p=[0.4, 0.4, 0.08, 0.08, 0.04])
        axes = tuple(sorted(int(a) for a in rng.choice(x.ndim, rng.integers(1, x.ndim + 1), replace=False)))
        for fn in (np.max, np.min):
            for keep in (False, True):
                want = fn(x, axis=axes, keepdims=keep)
                got = zeros_signed_as_the_last(x, axes, keep, np.where(want == 0, -want, want))
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "int8", "int16", "uint8", "uint16"])
def test_segment_sums_of_the_types_cupy_add_at_lacks(dtype: str) -> None:
    from opkernel_cpu import array_kernels as cpu_kernels
    from opkernel_cuda.array_kernels import summed_as_wider

    rng = np.random.default_rng(1)
    x = rng.integers(-300, 300, (6, 3)).astype(dtype)
    if dtype.startswith("complex"):
        x = x + 1j * rng.integers(-5, 5, (6, 3)).astype(dtype)
    ids = np.array([0, 2, 0, -1, 2, 2], np.int32)
    got = summed_as_wider(x, ids, np.int32(4))
    want = cpu_kernels.unsorted_segment_sum(x, ids, np.int32(4))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_range_counts_are_checked_against_the_device_before_any_values() -> None:
    from opkernel_cpu import array_kernels as cpu_kernels
    from opkernel_cuda.array_kernels import range_on

    for dtype, args in [(ok.int32, (0, 10, 3)), (ok.int64, (5, -7, -2)), (ok.float32, (0.0, 1.0, 0.1)),
                        (ok.float16, (0, 3, 0.5)), (ok.uint16, (1, 9, 2))]:
        scalars = [np.asarray(v, dtype.np) for v in args]
        got, want = range_on(np, *scalars, dtype, 1 << 30), cpu_kernels.range_(*scalars, Tidx=dtype)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ResourceExhaustedError, match=r"op 'Range'.*1099511627776 elements of int64") as info:
        range_on(np, np.int64(0), np.int64(2**40), np.int64(1), ok.int64, 80 << 30)
    assert info.value.requested_bytes == 2**43
    with pytest.raises(InvalidArgumentError, match="op 'Range'"):
        range_on(np, np.int32(0), np.int32(5), np.int32(0), ok.int32, 1 << 30)


def test_convolutions_without_output_channels_and_fused_errors_on_numpy(sim: str) -> None:
    x = np.ones((1, 4, 4, 2), np.float32)
    conv = dict(strides=[1, 1, 1, 1], padding="VALID")
    assert ok.ops.conv2d(x, np.ones((1, 1, 2, 0), np.float32), **conv).shape == (1, 4, 4, 0)
    dy = np.ones((1, 4, 4, 0), np.float32)
    assert ok.ops.conv2d_backprop_filter(x, np.array([1, 1, 2, 0], np.int32), dy, **conv).shape == (1, 1, 2, 0)
    with pytest.raises(InvalidArgumentError, match=r"^op 'FusedConv2D': input 'filter' must be 4-D"):
        ok.ops.fused_conv2d(x, np.ones((3, 3, 2, 3, 1), np.float32), np.ones(3, np.float32), **conv)


def test_a_readback_past_host_memory_is_resource_exhausted() -> None:
    """A tensor the device holds may not fit in the host's memory: ``numpy()`` of it is a
    ResourceExhaustedError saying so, not numpy's raw MemoryError."""

    class Device:
        shape, nbytes = (2, 3, 2**31 - 1), 48 << 30

        def get(self) -> np.ndarray:
            raise MemoryError("Unable to allocate 48.0 GiB")

    be = CudaBackend.__new__(CudaBackend)
    be.index, be.device_name = 0, "NVIDIA H200"
    with pytest.raises(ResourceExhaustedError, match=r"host memory copying .*\[2, 3, 2147483647\].*48.0 GiB") as info:
        be.to_numpy(Device())
    assert info.value.requested_bytes == 48 << 30
