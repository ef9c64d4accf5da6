"""The device-kernel API op packages use: ``DeviceProgram``, ``Kernel.launch`` /
``launch1d`` and ``ElementwiseKernel`` on the OpenCL backend (PoCL here), and the
CUDA counterpart compile-checked with NVRTC (no GPU needed).

A program built through the API goes through the backend's verified disk cache
(a second process loads it) and ``ok.warmup``; bad sizes and arguments raise
``opkernel.errors`` errors naming the kernel before anything is queued.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from isolated import run_isolated

import opkernel as ok
from opkernel.device_programs import ProgramRegistry
from opkernel import engine
from opkernel.errors import InvalidArgumentError, OpSpecError, OpTypeError

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("opkernel_opencl", reason="opkernel-opencl is not installed")

from opkernel_opencl import DeviceProgram, ElementwiseKernel, backend_of, ctype, device_kernels, programs  # noqa: E402


def _opencl_reason() -> str | None:
    return dict((n, r) for n, _, r in engine.backend_status()).get("opencl", "not registered")


needs_opencl = pytest.mark.skipif(_opencl_reason() is not None, reason=f"backend 'opencl' unavailable: {_opencl_reason()}")

SCALE_SOURCE = """
__kernel void scale(__global float* y, __global const float* x, const float a, const int n) {
    const int i = get_global_id(0);
    if (i < n) y[i] = a * x[i];
}
"""


@pytest.fixture(scope="module")
def be() -> Any:
    if _opencl_reason() is not None:
        pytest.skip(f"backend 'opencl' unavailable: {_opencl_reason()}")
    return backend_of(engine.backend_instance("opencl"))


@pytest.fixture(scope="module")
def scale(be: Any) -> Any:
    return be.build_program(SCALE_SOURCE, name="test>scale", op="Test>Scale").kernel("scale")


def _up(be: Any, a: np.ndarray) -> Any:
    return be.from_numpy(np.ascontiguousarray(a))


# ---------------------------------------------------------------- build and launch


def test_build_program_and_launch(be: Any, scale: Any) -> None:
    x = np.arange(100, dtype=np.float32)
    y = be.new_array((100,), np.dtype(np.float32))
    scale.launch(128, y, _up(be, x), np.float32(3), np.int32(100), local_size=64)
    np.testing.assert_array_equal(be.to_numpy(y), 3 * x)
    y2 = be.new_array((100,), np.dtype(np.float32))
    scale.launch1d(100, y2, _up(be, x), np.float32(-1), np.int32(100))
    np.testing.assert_array_equal(be.to_numpy(y2), -x)
    assert scale.program.kernel_names == ("scale",)


def test_the_same_source_is_built_once(be: Any) -> None:
    be.build_program(SCALE_SOURCE, name="test>scale")
    builds = be.programs.builds
    p1 = be.build_program(SCALE_SOURCE, name="test>scale")
    p2 = be.build_program(SCALE_SOURCE, name="another name", op="Test>Other")
    assert be.programs.builds == builds and p1.handle is p2.handle
    assert p1 is be.build_program(SCALE_SOURCE, name="test>scale")
    with pytest.raises(InvalidArgumentError, match=r"^kernel 'scale' of OpenCL program 'another name' \(op 'Test>Other'\): takes 4"):
        p2.kernel("scale").launch1d(1)  # the op of this launch, though another op built the program first


def test_device_program_renders_per_parameters_and_options(be: Any) -> None:
    prog = DeviceProgram(
        "test>fill", lambda dtype: f"__kernel void fill(__global {dtype}* y) {{ y[get_global_id(0)] = ({dtype})VALUE; }}",
        options=("-DVALUE=7",), register=False,
    )
    for ctype, dtype in (("float", np.float32), ("int", np.int32), ("uchar", np.uint8)):
        y = be.new_array((5,), np.dtype(dtype))
        prog.kernel(be, "fill", dtype=ctype).launch1d(5, y)
        np.testing.assert_array_equal(be.to_numpy(y), np.full(5, 7, dtype))
    assert prog.build(be, dtype="float") is prog.build(be, dtype="float")


def test_two_dimensional_launch_with_offset(be: Any) -> None:
    src = """__kernel void coords(__global int* y, const int w) {
        const int r = get_global_id(0), c = get_global_id(1);
        y[r * w + c] = r * 100 + c; }"""
    k = be.build_program(src, name="test>coords").kernel("coords")
    y = be.from_numpy(np.full((4, 8), -1, np.int32))
    k.launch((2, 8), y, np.int32(8), local_size=(1, 4), global_offset=(2, 0))
    out = be.to_numpy(y)
    assert (out[:2] == -1).all()
    np.testing.assert_array_equal(out[2:], np.add.outer(np.arange(2, 4) * 100, np.arange(8)))


def test_half_buffers_through_vload_half(be: Any) -> None:
    src = """__kernel void twice(__global half* y, __global const half* x) {
        const size_t i = get_global_id(0); vstore_half(2.0f * vload_half(i, x), i, y); }"""
    k = be.build_program(src, name="test>twice").kernel("twice")
    x = np.linspace(-2, 2, 67).astype(np.float16)
    y = be.new_array(x.shape, x.dtype)
    k.launch1d(x.size, y, _up(be, x))
    np.testing.assert_array_equal(be.to_numpy(y), 2 * x)


# ---------------------------------------------------------------- offsets


def test_an_aligned_offset_is_passed_as_a_sub_buffer(be: Any, scale: Any) -> None:
    align = be.device.mem_base_addr_align // 8 // 4  # in float32 elements
    x = _up(be, np.arange(4 * align, dtype=np.float32))
    part = x[align : 2 * align]
    assert part.offset == align * 4
    y = be.new_array((align,), np.dtype(np.float32))
    scale.launch1d(align, y, part, np.float32(1), np.int32(align))
    np.testing.assert_array_equal(be.to_numpy(y), np.arange(align, 2 * align, dtype=np.float32))


def test_an_unaligned_offset_is_an_error_with_the_fix(be: Any, scale: Any) -> None:
    x = _up(be, np.arange(64, dtype=np.float32))
    y = be.new_array((8,), np.dtype(np.float32))
    with pytest.raises(InvalidArgumentError, match=r"kernel 'scale' of OpenCL program 'test>scale' \(op 'Test>Scale'\): "
                       r"argument 1 starts 4 bytes into its buffer.*element offset 1"):
        scale.launch1d(8, y, x[1:9], np.float32(1), np.int32(8))


# ---------------------------------------------------------------- bad sizes and arguments


@pytest.mark.parametrize("call, error, match", [
    (lambda k, y, x: k.launch1d(8, y, x, np.float32(1)), InvalidArgumentError, r"takes 4 arguments \(y, x, a, n\), got 3"),
    (lambda k, y, x: k.launch1d(8, y, x, 2.0, np.int32(8)), OpTypeError, r"argument 2 \(float a\) is a Python float; pass np\.float32\(2\.0\)"),
    (lambda k, y, x: k.launch1d(8, y, x, np.float64(2), np.int32(8)), OpTypeError, r"argument 2 \(float a\) takes np\.float32, got float64"),
    (lambda k, y, x: k.launch1d(8, y, x, np.float32(2), np.int64(8)), OpTypeError, r"argument 3 \(int n\) takes np\.int32, got int64"),
    (lambda k, y, x: k.launch1d(8, y, np.ones(8, np.float32), np.float32(2), np.int32(8)), OpTypeError, r"argument 1 is a host numpy array"),
    (lambda k, y, x: k.launch1d(8, y, x.astype(np.int32), np.float32(2), np.int32(8)), OpTypeError, r"argument 1 \(__global float\* x\) points to float32, got an array of int32"),
    (lambda k, y, x: k.launch1d(8, y, np.float32(1), np.float32(2), np.int32(8)), OpTypeError, r"argument 1 \(__global float\* x\) takes a device array"),
    (lambda k, y, x: k.launch(10, y, y, np.float32(1), np.int32(8), local_size=4), InvalidArgumentError, r"global size \[10\] must be a multiple of the local size \[4\]"),
    (lambda k, y, x: k.launch(1 << 20, y, y, np.float32(1), np.int32(8), local_size=1 << 20), InvalidArgumentError, r"a work-group of \[1048576\] is 1048576 work-items; at most \d+"),
    (lambda k, y, x: k.launch((8, 8, 8, 8), y, y, np.float32(1), np.int32(8)), InvalidArgumentError, r"global size must be 1 to 3 dimensions"),
    (lambda k, y, x: k.launch(8, y, y, np.float32(1), np.int32(8), local_size=(4, 2)), InvalidArgumentError, r"local size must be 1 dimension"),
    (lambda k, y, x: k.launch(-1, y, y, np.float32(1), np.int32(8)), InvalidArgumentError, r"global size must be .* integers >= 0"),
    (lambda k, y, x: k.launch1d(-3, y, y, np.float32(1), np.int32(8)), InvalidArgumentError, r"launch1d needs a work-item count >= 0"),
], ids=["count", "python-scalar", "scalar-type", "index-type", "host-array", "array-dtype", "scalar-for-buffer",
        "not-a-multiple", "group-too-large", "rank", "local-rank", "negative", "negative-1d"])
def test_bad_launches_name_the_kernel(be: Any, scale: Any, call: Any, error: type, match: str) -> None:
    y = be.new_array((8,), np.dtype(np.float32))
    x = be.from_numpy(np.ones(8, np.float32))
    before = be.to_numpy(y).copy()
    with pytest.raises(error, match=r"kernel 'scale' of OpenCL program 'test>scale'.*" + match):
        call(scale, y, x)
    np.testing.assert_array_equal(be.to_numpy(y), before)  # nothing was queued


def test_bad_programs_name_themselves(be: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"OpenCL program 'test>scale'.* has no kernel 'scal'; its kernels: scale"):
        be.build_program(SCALE_SOURCE, name="test>scale").kernel("scal")
    with pytest.raises(OpSpecError, match=r"options must be a sequence of build options"):
        be.build_program(SCALE_SOURCE, name="test>scale", options="-DX=1")
    with pytest.raises(programs.ProgramBuildError, match=r"(?s)op 'Test>Broken'.*test>broken.*line 1: __kernel void broken.*undeclared identifier 'undefined_name'"):
        be.build_program("__kernel void broken(__global float* y) { y[0] = undefined_name; }", name="test>broken", op="Test>Broken")
    with pytest.raises(InvalidArgumentError, match=r"needs backend 'opencl', got 'cpu'"):
        DeviceProgram("test>x", lambda: SCALE_SOURCE, register=False).build(engine.backend_instance("cpu"))


# ---------------------------------------------------------------- the elementwise helper


AXPY = ElementwiseKernel("test_axpy", "a * x + y", inputs=("x", "y"), scalars=("a",), register=False)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_elementwise_matches_numpy(be: Any, dtype: str) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(1000) * 10).astype(dtype)
    y = (rng.standard_normal(1000) * 10).astype(dtype)
    out = be.to_numpy(AXPY(be, _up(be, x), _up(be, y), a=3))
    assert out.dtype == np.dtype(dtype)
    if dtype == "float16":  # stored as half, computed in float: one rounding at the store
        want = (3 * x.astype(np.float32) + y.astype(np.float32)).astype(np.float16)
        np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-2)
    elif dtype == "float32":  # OpenCL C may fuse a * x + y into one fma: one rounding, not two
        np.testing.assert_allclose(out, np.float32(3) * x + y, rtol=1e-6, atol=1e-5)
    else:
        np.testing.assert_array_equal(out, np.int32(3) * x + y)


def test_elementwise_with_an_output_dtype_a_preamble_and_views(be: Any) -> None:
    inside = ElementwiseKernel(
        "test_inside", "between(x, lo, hi)", scalars=("lo", "hi"), out_dtype="bool", register=False,
        preamble="inline int between(float v, float lo, float hi) { return v >= lo && v <= hi; }",
    )
    x = np.linspace(-1, 1, 50).astype(np.float32)
    got = be.to_numpy(inside(be, _up(be, x)[5:45], lo=-0.5, hi=0.25))
    np.testing.assert_array_equal(got, (x[5:45] >= -0.5) & (x[5:45] <= 0.25))
    out = be.new_array((3, 2), np.dtype(np.float32))
    assert AXPY(be, _up(be, np.ones((3, 2), np.float32)), _up(be, np.ones((3, 2), np.float32)), a=2, out=out) is out
    np.testing.assert_array_equal(be.to_numpy(out), np.full((3, 2), 3, np.float32))
    empty = AXPY(be, _up(be, np.ones((0, 2), np.float32)), _up(be, np.ones((0, 2), np.float32)), a=2)
    assert empty.shape == (0, 2)


def test_elementwise_bad_calls(be: Any) -> None:
    f32, i32 = _up(be, np.ones(4, np.float32)), _up(be, np.ones(4, np.int32))
    with pytest.raises(InvalidArgumentError, match=r"elementwise kernel 'test_axpy': every input must have the dtype and shape of 'x' \(float32, \[4\]\); 'y' is int32"):
        AXPY(be, f32, i32, a=1)
    with pytest.raises(InvalidArgumentError, match=r"takes the scalars \['a'\]; missing \['a'\], unexpected \['b'\]"):
        AXPY(be, f32, f32, b=1)
    with pytest.raises(OpTypeError, match=r"scalar 'a' must be a integer for inputs of int32, got 1.5"):
        AXPY(be, i32, i32, a=1.5)
    with pytest.raises(InvalidArgumentError, match=r"scalar 'a'=4294967296 does not fit int32"):
        AXPY(be, i32, i32, a=2**32)
    with pytest.raises(OpTypeError, match=r"input 1 is a ndarray; expected an OpenCL device array"):
        AXPY(be, f32, np.ones(4, np.float32), a=1)
    with pytest.raises(OpSpecError, match=r"inputs and scalars must be distinct C identifiers"):
        ElementwiseKernel("bad", "x + x", inputs=("x", "x"), register=False)
    with pytest.raises(OpSpecError, match=r"one C expression \(no ';'\)"):
        ElementwiseKernel("bad", "x; y", register=False)
    with pytest.raises(OpSpecError, match=r"dtypes must be among"):
        ElementwiseKernel("bad", "x", dtypes=("complex64",), register=False)


# ---------------------------------------------------------------- cache and warmup


def test_warmup_builds_declared_programs(be: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    tag = uuid.uuid4().hex  # a source no earlier build has seen
    prog = DeviceProgram(
        "test>warm", lambda dtype: f"// {tag}\n__kernel void k(__global {ctype(dtype)}* y) {{ y[get_global_id(0)] = 1; }}",
        warmup=[{"dtype": "float32"}, {"dtype": "int32"}], register=False,
    )
    monkeypatch.setattr(programs, "_families", {})
    registry: ProgramRegistry[DeviceProgram] = ProgramRegistry("OpenCL program")
    registry.declare(prog)
    monkeypatch.setattr(device_kernels, "_registry", registry)
    assert ok.warmup("opencl") == 2
    builds = be.programs.builds
    y = be.new_array((3,), np.dtype(np.int32))
    prog.kernel(be, "k", dtype="int32").launch1d(3, y)
    assert be.programs.builds == builds and be.to_numpy(y).tolist() == [1, 1, 1]
    assert ok.warmup("opencl") == 0


def test_a_name_declared_by_another_module_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_kernels, "_registry", ProgramRegistry("OpenCL program"))

    def render() -> str:
        return SCALE_SOURCE

    first = DeviceProgram("test>named", render)
    again = DeviceProgram("test>named", render)  # the same module imported again: replaces it
    assert device_kernels.registered()["test>named"] is again and first is not again
    with pytest.raises(ok.errors.AlreadyExistsError, match=r"OpenCL program 'test>named' is already declared \(by test_device_kernel_api\)"):
        DeviceProgram("test>named", lambda: SCALE_SOURCE)
    ElementwiseKernel("test_same", "x + 1")
    ElementwiseKernel("test_same", "x + 1")
    with pytest.raises(ok.errors.AlreadyExistsError, match=r"'elementwise:test_same' is already declared"):
        ElementwiseKernel("test_same", "x + 2")


def test_median_pool_programs_are_registered_for_warmup() -> None:
    pytest.importorskip("opkernel_medianpool")
    from opkernel_medianpool import opencl as mp

    assert device_kernels.registered()["Addons>MedianPool2D"] is mp.PROGRAM
    assert {p["dtype"] for p in mp.PROGRAM.warmup} == set(mp.TYPES)


CHILD = """
import json, uuid
import numpy as np
import opkernel as ok
from opkernel import engine
from opkernel_opencl import ElementwiseKernel, backend_of
from opkernel_medianpool import opencl as mp
be = backend_of(engine.backend_instance("opencl"))
cube = ElementwiseKernel("cached_cube", "x * x * x + c", scalars=("c",), dtypes=("float32",))
x = be.from_numpy(np.arange(5, dtype=np.float32))
out = {"cube": be.to_numpy(cube(be, x, c=1)).tolist()}
with ok.use_backend("opencl"):
    y = ok.ops.addons.median_pool2d(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1), ksize=[1, 3, 3, 1],
                                    strides=[1, 1, 1, 1], padding="VALID")
    out["median"] = y.numpy().ravel().tolist()
out["loaded"], out["builds"] = be.programs.store.loaded, be.programs.builds
print(json.dumps(out))
"""


@needs_opencl
def test_a_second_process_loads_programs_from_the_disk_cache(tmp_path: Path) -> None:
    pytest.importorskip("opkernel_medianpool")
    env = {"OPKERNEL_OPENCL_CACHE_DIR": str(tmp_path / "cache"), "XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    runs = []
    for what in ("cold cache", "warm cache"):
        done = run_isolated(CHILD, what=what, env=env, timeout=240)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for run in runs:
        assert run["cube"] == [1.0, 2.0, 9.0, 28.0, 65.0] and run["median"] == [5.0, 6.0, 9.0, 10.0]
    assert runs[0]["loaded"] == 0 and runs[0]["builds"] >= 2
    assert runs[1]["loaded"] == runs[1]["builds"] == runs[0]["builds"]  # every program came from disk


# ---------------------------------------------------------------- typing


def test_the_api_is_typed_for_op_packages() -> None:
    """``backend_of`` returns the typed backend; what the median-pool package calls is
    declared on it (mypy checks the package in CI)."""
    import inspect

    from opkernel_opencl.backend import OpenCLBackend

    assert inspect.signature(backend_of).return_annotation in ("OpenCLBackend", OpenCLBackend)
    for name in ("build_program", "launch", "launch1d", "new_array"):
        assert callable(getattr(OpenCLBackend, name))
    assert "Kernel" in inspect.signature(DeviceProgram.kernel).return_annotation


# ---------------------------------------------------------------- CUDA, without a GPU


def _cuda_device_kernels() -> Any:
    sys.path.insert(0, str(ROOT / "plugins" / "cuda"))
    try:
        from opkernel_cuda import device_kernels as cuda_dk
    finally:
        sys.path.remove(str(ROOT / "plugins" / "cuda"))
    return cuda_dk


#: As in test_cuda_compile.py: where opkernel-cuda is installed, a missing NVRTC is a failure.
NVRTC_REQUIRED = any(ep.value == "opkernel_cuda" for ep in importlib.metadata.entry_points(group="opkernel")) or (
    os.environ.get("OPKERNEL_REQUIRE_NVRTC") == "1"
)


def _nvrtc() -> tuple[Any, list[str]]:
    missing = pytest.fail if NVRTC_REQUIRED else pytest.skip
    try:
        from cuda.pathfinder import find_nvidia_header_directory
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
        headers = find_nvidia_header_directory("cudart")
    except Exception as e:
        missing(f"NVRTC is not usable ({type(e).__name__}: {e}); pip install cupy-cuda12x nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12")
    if headers is None:
        missing("the CUDA headers (cuda_fp16.h) were not found: pip install nvidia-cuda-runtime-cu12")
    return nvrtc, [f"-I{headers}"]


@pytest.mark.parametrize("dtype, out_dtype", [("float32", None), ("float16", None), ("int32", None), ("float64", None),
                                              ("uint8", None), ("float16", "bool"), ("int64", "float16")])
def test_cuda_elementwise_source_compiles_with_nvrtc(dtype: str, out_dtype: str | None) -> None:
    cuda_dk = _cuda_device_kernels()
    nvrtc, includes = _nvrtc()
    k = cuda_dk.ElementwiseKernel("axpy", "a * x + y", inputs=("x", "y"), scalars=("a",), out_dtype=out_dtype, register=False)
    src = k.source(dtype)
    program = nvrtc.createProgram(src, "axpy.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(program, ("-std=c++17", "-arch=sm_80", *includes))
        except nvrtc.NVRTCError:
            pytest.fail(f"{dtype}:\n{src}\n{nvrtc.getProgramLog(program)}")
        assert nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)
    storage = cuda_dk.STORAGE
    assert cuda_dk.signatures(src)["axpy"] == (
        (storage[out_dtype or dtype], True, "out_"), (storage[dtype], True, "x_"), (storage[dtype], True, "y_"),
        (cuda_dk.compute_type(dtype), False, "a"), ("long long", False, "n_"),
    )


def test_cuda_launch_checks_without_a_gpu() -> None:
    """The CUDA kernel's checks, on a stand-in backend whose arrays are numpy's."""
    cuda_dk = _cuda_device_kernels()
    src = 'extern "C" __global__ void scale(float* y, const float* __restrict__ x, const float a, const int n) {}'
    calls: list[Any] = []
    fake_be = SimpleNamespace(cupy=SimpleNamespace(ndarray=np.ndarray), index=0)
    program = cuda_dk.Program(fake_be, SimpleNamespace(get_function=lambda name: lambda *a, **kw: calls.append(a)), src, "test>scale", "Test>Scale")
    k = program.kernel("scale")
    y, x = np.zeros(8, np.float32), np.ones(8, np.float32)
    k.launch1d(8, y, x, np.float32(2), np.int32(8))
    k.launch(512, y, x, np.float32(2), np.int32(8), local_size=128)
    k.launch(300, y, x, np.float32(2), np.int32(8))  # blocks of 150: the largest divisor up to 256
    assert [(grid, block) for grid, block, _ in calls] == [((1,), (256,)), ((4,), (128,)), ((2,), (150,))]
    assert all(args[0] is y and args[1] is x and args[2:] == (2, 8) for _, _, args in calls)
    where = r"kernel 'scale' of CUDA program 'test>scale' \(op 'Test>Scale'\): "
    with pytest.raises(OpTypeError, match=where + r"argument 2 \(float a\) is a Python float; pass np\.float32\(2\.0\)"):
        k.launch1d(8, y, x, 2.0, np.int32(8))
    with pytest.raises(OpTypeError, match=where + r"argument 1 \(float\* x\) points to float32, got an array of int32"):
        k.launch1d(8, y, x.astype(np.int32), np.float32(2), np.int32(8))
    with pytest.raises(InvalidArgumentError, match=where + r"takes 4 arguments \(y, x, a, n\), got 3"):
        k.launch1d(8, y, x, np.float32(2))
    with pytest.raises(InvalidArgumentError, match=where + r"a block of \[2048\] is 2048 threads; at most 1024"):
        k.launch(4096, y, x, np.float32(2), np.int32(8), local_size=2048)
    with pytest.raises(InvalidArgumentError, match=where + r"the global size \[100\] must be a multiple of the local size \[64\]"):
        k.launch(100, y, x, np.float32(2), np.int32(8), local_size=64)
    assert len(calls) == 3


AUTHOR = '''
from __future__ import annotations

import numpy as np
import opkernel as ok
from opkernel_opencl import DeviceProgram, ElementwiseKernel, backend_of

SOURCE = "__kernel void k(__global float* y) { y[get_global_id(0)] = 1; }"
PROGRAM = DeviceProgram("Pkg>k", lambda dtype: SOURCE, warmup=[{"dtype": "float32"}])
SQUARE = ElementwiseKernel("pkg_square", "x * x")


class Kernel(ok.OpKernel):
    def compute(self, ctx: ok.OpKernelContext) -> None:
        be = backend_of(ctx)
        y = ctx.allocate_output(0, (4,))
        be.build_program(SOURCE, name="Pkg>k", options=("-DN=1",)).kernel("k").launch1d(4, y)
        PROGRAM.kernel(ctx, "k", dtype="float32").launch(4, y, local_size=2)
        be.launch1d(PROGRAM.kernel(be, "k").handle, 4, be.new_array((4,), np.dtype(np.float32)))
        ctx.set_output(0, SQUARE(ctx, ctx.input(0)))
        ctx.backend.launch1d(None, 4)  # the base Backend: mypy must reject this line only
'''


def test_an_op_package_kernel_type_checks(tmp_path: Path) -> None:
    """What an op package writes against the API passes ``mypy --strict``; the
    untyped ``ctx.backend.launch1d`` of before is still reported (so the check is live)."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install mypy)")
    import subprocess

    (tmp_path / "author.py").write_text(AUTHOR)
    env = {**os.environ, "MYPYPATH": f"{ROOT / 'core'}{os.pathsep}{ROOT / 'plugins' / 'opencl'}"}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), str(tmp_path / "author.py")],
        capture_output=True, text=True, env=env, timeout=300,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and '"Backend" has no attribute "launch1d"' in errors[0], done.stdout + done.stderr
