"""Op libraries in C (``opkernel/c_api.h``): ``ok.load_op_library("./zero_out.so")``.

The libraries are compiled here with the system's C compiler (``$CC``, else ``cc``),
against the header the core installs, with warnings as errors.  Everything that calls
into them runs in a child process (tests/isolated.py): a kernel that crashes fails one
named test.  docs/c-kernels.md is the guide these tests follow.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from isolated import run_isolated

import opkernel as ok
from opkernel import sysconfig

ROOT = Path(__file__).resolve().parents[1]
SOURCES = Path(__file__).parent / "c_libraries"
ZERO_OUT = ROOT / "examples" / "zero_out_c" / "zero_out.c"
ADD_ONE = ROOT / "examples" / "zero_out_c" / "add_one.cu"
#: `make test` requires nvcc (the CUDA library's compile check); elsewhere its absence skips.
NVCC_REQUIRED = os.environ.get("OPKERNEL_REQUIRE_NVCC") == "1"
REFUSED = ("WRONG_ABI", "NO_ENTRY", "BAD_SPEC", "IGNORED_ERROR", "CROSS_CHECK", "OPENCL_KERNEL")


def compile_library(source: Path, out: Path, *defines: str) -> Path:
    cc = shlex.split(os.environ.get("CC", "cc"))
    if shutil.which(cc[0]) is None:
        pytest.fail(f"no C compiler {cc[0]!r} on PATH: the C ABI's tests compile their libraries (set CC)")
    flags = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", *sysconfig.get_compile_flags()]
    cmd = [*cc, *flags, *(f"-D{d}" for d in defines), str(source), "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"compiling {source.name} failed: {' '.join(cmd)}\n{done.stderr}")
    return out


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("c_libraries")
    built = {
        "zero_out": compile_library(ZERO_OUT, out / "zero_out.so"),
        "kitchen_sink": compile_library(SOURCES / "kitchen_sink.c", out / "kitchen_sink.so"),
    }
    for name in REFUSED:
        built[name] = compile_library(SOURCES / "refused.c", out / f"refused_{name.lower()}.so", name)
    not_elf = out / "not_a_library.so"
    not_elf.write_text("text, not machine code\n")
    built["not_a_library"] = not_elf
    return built


def child(code: str, *, backend: str = "cpu", what: str, **paths: Path) -> str:
    """Run ``code`` in a fresh process with ``ok``, ``np`` and the paths as names; its stdout."""
    head = "import numpy as np\nimport opkernel as ok\n" + "".join(f"{k} = {str(v)!r}\n" for k, v in paths.items())
    return run_isolated(head + textwrap.dedent(code), backend=backend, what=what).stdout


def test_the_header_installs_with_the_core_and_speaks_its_version() -> None:
    header = Path(sysconfig.get_include()) / "opkernel" / "c_api.h"
    assert header.is_file()
    assert f"#define OPKERNEL_C_ABI_VERSION {sysconfig.C_ABI_VERSION}\n" in header.read_text()
    assert f"-I{sysconfig.get_include()}" in sysconfig.get_compile_flags()
    assert ok.sysconfig.get_link_flags() == []


def test_zero_out_as_in_tensorflows_guide(libs: dict[str, Path]) -> None:
    out = child(
        """
        from opkernel.errors import InvalidArgumentError, OpTypeError
        lib = ok.load_op_library(path)
        assert lib.op_names == ["ZeroOut"], lib.op_names
        assert ok.load_op_library(path).op_names == ["ZeroOut"]  # a second load registers nothing again
        assert lib.plugin == path and "ZeroOut" in repr(lib)
        op = ok.op_def("ZeroOut")
        assert [a.name for a in op.attrs] == ["T", "preserve_index"] and "Zeroes every element" in op.summary
        rng = np.random.default_rng(1)
        for dtype in (np.float32, np.int32):
            for shape in [(), (1,), (5,), (3, 4), (2, 3, 4), (0, 3)]:
                x = (rng.standard_normal(shape) * 100).astype(dtype)
                for index in {0, max(x.size - 1, 0)}:
                    if x.size == 0 and index:
                        continue
                    expected = np.zeros_like(x)
                    if x.size:
                        expected.flat[index] = x.flat[index]
                    got = lib.zero_out(x, preserve_index=index)
                    assert got.dtype == ok.as_dtype(dtype) and got.shape == shape, (got, shape)
                    np.testing.assert_array_equal(got.numpy(), expected)
        strided = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]  # not contiguous: copied first
        np.testing.assert_array_equal(lib.zero_out(strided, preserve_index=5).numpy().ravel(), [0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0])
        x = ok.tensor(np.arange(6, dtype=np.int32))
        lib.zero_out(x, preserve_index=2)
        np.testing.assert_array_equal(x.numpy(), np.arange(6))  # the input is untouched
        traced = ok.function(lambda t: lib.zero_out(t, preserve_index=3) * 2)
        np.testing.assert_array_equal(traced(x).numpy(), [0, 0, 0, 6, 0, 0])

        @ok.register_gradient("ZeroOut")  # as in TensorFlow, a C op's gradient is Python
        def _zero_out_grad(op, grad):
            return [lib.zero_out(grad, preserve_index=op.get_attr("preserve_index"))]

        v = ok.tensor(np.array([1.0, 2.0, 3.0], np.float32))
        with ok.GradientTape() as tape:
            tape.watch(v)
            loss = ok.ops.sum(lib.zero_out(v, preserve_index=1) * v, axis=0)
        np.testing.assert_array_equal(tape.gradient(loss, v).numpy(), [0.0, 4.0, 0.0])
        try:
            lib.zero_out([1, 2], preserve_index=2)
        except InvalidArgumentError as e:
            print("range:", e)
        try:
            lib.zero_out(np.zeros(2, np.int64))
        except OpTypeError as e:
            print("dtype:", e)
        """,
        what="ZeroOut",
        path=libs["zero_out"],
    )
    assert (
        "range: op 'ZeroOut': the C kernel from " in out
        and "failed (INVALID_ARGUMENT): preserve_index out of range: 2 for an input of 2 elements" in out
    ), out
    assert "dtype: op 'ZeroOut': input 'to_zero' (attr 'T') must have a dtype in [float32, int32], got int64" in out, out


def test_zero_out_elsewhere_runs_on_cpu_through_the_fallback(libs: dict[str, Path], backend: str) -> None:
    """A C kernel is registered for cpu only: on another backend the op says so, and runs
    with the kernel fallback."""
    out = child(
        f"""
        from opkernel.errors import KernelNotFoundError
        lib = ok.load_op_library(path)
        x = ok.tensor(np.array([4.0, 5.0, 6.0], np.float32))
        if {backend!r} != "cpu":
            try:
                lib.zero_out(x)
            except KernelNotFoundError as e:
                print("missing:", e)
        with ok.kernel_fallback("cpu"):
            y = lib.zero_out(x, preserve_index=1)
        print(y.backend, y.numpy().tolist())
        """,
        backend=backend,
        what=f"ZeroOut on {backend}",
        path=libs["zero_out"],
    )
    assert f"{backend} [0.0, 5.0, 0.0]" in out, out
    if backend != "cpu":
        assert f"missing: no kernel on backend {backend!r}: op 'ZeroOut' with T=float32; registered: cpu" in out, out


def test_every_accessor_of_the_table(libs: dict[str, Path]) -> None:
    out = child(
        """
        import ml_dtypes
        lib = ok.load_op_library(path)
        a, b, c = (np.arange(6, dtype=np.float32).reshape(2, 3) * k for k in (1, 10, 100))
        np.testing.assert_array_equal(lib.add_all([a, b, c]).numpy(), a * 111)
        np.testing.assert_array_equal(lib.add_all([a]).numpy(), a)
        info = lib.attrs(np.zeros((2, 3), np.float32), i=-7, f=2.5, b=True, dims=[4, 5, 6], s="hey").numpy()
        # i, f, b, T (kDLFloat, 32), len(dims), dims, len(s), s[0], ndim, strides, outputs, no stream
        assert info.tolist() == [-7, 2.5, 1, 2, 32, 3, 4, 5, 6, 3, ord("h"), 2, 3, 1, 1, 1], info
        info = lib.attrs(np.zeros((), np.int64), i=2**40, f=-0.5, b=False, dims=[], s="").numpy()
        assert info.tolist() == [2**40, -0.5, 0, 0, 64, 0, 0, 0, 0, 1, 1], info
        info = lib.attrs(np.zeros((4,), ml_dtypes.bfloat16), i=0, f=0.0, b=False, dims=[1] * 10, s="a string longer").numpy()
        assert info[3:5].tolist() == [4, 16] and info[5] == 10 and info[14] == 15, info  # kDLBfloat; counts past capacity
        print("ok")
        """,
        what="kitchen sink accessors",
        path=libs["kitchen_sink"],
    )
    assert out.strip() == "ok"


def test_a_kernels_errors_reach_the_caller_as_opkernel_errors(libs: dict[str, Path]) -> None:
    out = child(
        """
        lib = ok.load_op_library(path)
        for mode in range(12):
            try:
                lib.misbehave([1.0], mode=mode)
                print(mode, "no error")
            except ok.errors.OpkernelError as e:
                print(mode, type(e).__name__, e)
        np.testing.assert_array_equal(lib.add_all([[1.0], [2.0]]).numpy(), [3.0])  # the library still works
        """,
        what="misbehaving kernels",
        path=libs["kitchen_sink"],
    )
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    prefix = f"op 'Ck>Misbehave': the C kernel from {libs['kitchen_sink']}"
    expected = {
        "0": f"InvalidArgumentError {prefix} failed (INVALID_ARGUMENT): returned INVALID_ARGUMENT without a message",
        "1": f"InternalError {prefix} returned OK without allocating output(s) [0]",
        "2": f"InvalidArgumentError {prefix} failed (INVALID_ARGUMENT): allocate_output: output 0 was already allocated",
        "3": f"InvalidArgumentError {prefix} failed (INVALID_ARGUMENT): input: input 5 out of range: the op has 1 inputs",
        "4": f"InvalidArgumentError {prefix} failed (INVALID_ARGUMENT): attr_float: the op has no attr 'missing' (attrs: ['mode'])",
        "5": f"InvalidArgumentError {prefix} failed (INVALID_ARGUMENT): attr_bool: attr 'mode' is int 5, not a bool",
        "6": f"ResourceExhaustedError {prefix} failed (RESOURCE_EXHAUSTED): no room for the answer",
        "7": f"InvalidArgumentError {prefix} failed (INVALID_ARGUMENT): allocate_output: output 0: negative dimension in shape [-2]",
        "8": f"ResourceExhaustedError {prefix} failed (RESOURCE_EXHAUSTED): allocate_output: out of memory: "
        "Unable to allocate 4.00 TiB for an array with shape (1048576, 1048576) and data type float32",
        "9": f"InvalidArgumentError {prefix} failed (INVALID_ARGUMENT): allocate_output: output 0: ndim 300 (0 to 254) "
        "with a shape",
        "10": f"InvalidArgumentError {prefix} failed (INVALID_ARGUMENT): allocate_output: output 0: shape "
        "[2147483648, 2147483648] has more bytes than a 64-bit size can count",
        "11": f"InternalError {prefix} failed (UNIMPLEMENTED): no such mode",
    }
    assert lines == expected, out


def test_kernels_run_without_the_gil(libs: dict[str, Path]) -> None:
    """Four 300 ms kernels on four threads end together: ctypes lets go of the GIL for the
    call, and the table's callbacks take it back only while they run."""
    out = child(
        """
        import threading, time
        lib = ok.load_op_library(path)
        x = ok.tensor(np.array([3.0], np.float32))
        lib.sleep(x, ms=1)
        results = []
        threads = [threading.Thread(target=lambda: results.append(float(lib.sleep(x, ms=300).numpy()[0]))) for _ in range(4)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(results, round(time.perf_counter() - start, 3))
        """,
        what="kernels on threads",
        path=libs["kitchen_sink"],
    )
    results, took = out.rsplit(" ", 1)
    assert results == "[3.0, 3.0, 3.0, 3.0]", out
    assert float(took) < 0.9, f"four 300 ms kernels took {took} s: they ran one at a time"


@pytest.mark.parametrize("name", [*REFUSED, "not_a_library", "missing"])
def test_a_bad_library_is_refused_whole_with_the_reason(libs: dict[str, Path], name: str) -> None:
    path = libs.get(name, libs["zero_out"].parent / "missing.so")
    out = child(
        """
        from opkernel.errors import OpNotFoundError, PluginError
        try:
            ok.load_op_library(path)
            print("loaded")
        except PluginError as e:
            print(e)
        for op in ("Refused>Good", "Refused>Bad", "Refused>Ignored", "Refused>CrossCheck", "Refused>OnOpenCL"):
            try:
                ok.op_def(op)
                print("registered:", op)
            except OpNotFoundError:
                pass
        """,
        what=f"refused library {name}",
        path=path,
    )
    expected = {
        "WRONG_ABI": f"load_op_library: {str(path)!r} was built for opkernel C ABI version 2; this opkernel speaks "
        "version 1: rebuild it against this opkernel's header (opkernel.sysconfig.get_include())",
        "NO_ENTRY": f"load_op_library: {str(path)!r} is not an opkernel op library: it exports no "
        "opkernel_c_abi_version and opkernel_library_register",
        "BAD_SPEC": f"load_op_library: {str(path)!r} failed to register, so nothing of it is: op_attr: op "
        "'Refused>Bad': in attr spec \"T: {float,\": expected a dtype",
        "IGNORED_ERROR": f"load_op_library: {str(path)!r} failed to register, so nothing of it is: register_kernel: "
        "type constraint 'T': cannot interpret 'floaty' as a dtype",
        "CROSS_CHECK": f"op 'Refused>CrossCheck' (registered at {path}) is invalid: input 'x' refers to undefined attr 'T'",
        "OPENCL_KERNEL": "register_kernel: kernel of op 'Refused>OnOpenCL': backend 'opencl' keeps tensors in memory "
        "without a DLPack pointer; C kernels run on host backends (cpu) and cuda",
        "not_a_library": f"load_op_library: cannot load shared object {str(path)!r}",
        "missing": f"load_op_library: no such file: {str(path)!r}",
    }[name]
    assert expected in out, out
    assert "loaded" not in out and "registered:" not in out, out


def test_a_saved_graph_names_the_library_its_op_came_from(libs: dict[str, Path], tmp_path: Path) -> None:
    graph = tmp_path / "zero.okg"
    child(
        """
        lib = ok.load_op_library(path)
        f = ok.function(lambda x: lib.zero_out(x, preserve_index=1) + 1.0)
        f(ok.tensor(np.zeros(3, np.float32)))
        ok.save(f, graph)
        """,
        what="save a graph with a C op",
        path=libs["zero_out"],
        graph=graph,
    )
    out = child(
        """
        from opkernel.errors import OpNotFoundError
        try:
            ok.load(graph)
        except OpNotFoundError as e:
            print("missing:", e)
        ok.load_op_library(path)
        g = ok.load(graph)
        print(g(ok.tensor(np.array([7.0, 8.0, 9.0], np.float32))).numpy().tolist())
        """,
        what="load a graph with a C op",
        path=libs["zero_out"],
        graph=graph,
    )
    lib = str(libs["zero_out"])
    assert (
        f"op 'ZeroOut' is not registered; when the graph was saved it came from the op library {lib!r}: "
        f"ok.load_op_library({lib!r}) before ok.load" in out
    ), out
    assert out.strip().endswith("[1.0, 9.0, 1.0]"), out


def find_nvcc() -> str | None:
    """``$OPKERNEL_NVCC``, the nvcc of NVIDIA's ``nvidia-cuda-nvcc`` wheel, or nvcc on PATH
    (or in /usr/local/cuda)."""
    if os.environ.get("OPKERNEL_NVCC"):
        return os.environ["OPKERNEL_NVCC"]
    import sysconfig as python_sysconfig

    wheel = Path(python_sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "bin" / "nvcc"
    if wheel.is_file():
        return str(wheel)
    return shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")


@pytest.fixture(scope="module")
def add_one(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TensorFlow's CUDA example as a library (a cpu and a cuda kernel), built with nvcc
    for sm_80 and sm_90 against the C ABI's header."""
    nvcc = find_nvcc()
    if nvcc is None:
        message = (
            "no nvcc (set OPKERNEL_NVCC, put nvcc on PATH, or pip install nvidia-cuda-nvcc==13.0.88 "
            "nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96)"
        )
        (pytest.fail if NVCC_REQUIRED else pytest.skip)(message)
    out = tmp_path_factory.mktemp("cuda_library") / "add_one.so"
    lib_dir = Path(nvcc).resolve().parent.parent / "lib"  # the wheel's static cudart (its profile says lib64)
    cmd = [
        nvcc, "-shared", "--cudart", "static", f"-L{lib_dir}", "-Xcompiler", "-fPIC,-Wall,-Wextra,-Werror",
        *sysconfig.get_compile_flags()[:1], "-Xcompiler", "-fvisibility=hidden",
        "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
        str(ADD_ONE), "-o", str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"nvcc failed: {' '.join(cmd)}\n{done.stderr}")
    return out


def test_a_cuda_library_from_nvcc_loads_and_runs_where_it_can(add_one: Path, backend: str) -> None:
    """TensorFlow's AddOne: built by nvcc into a .so whose cuda kernel is registered here
    even without a GPU, and whose cpu kernel runs; on cuda (when a GPU is lent) the CUDA
    kernel runs on the tensors' stream."""
    out = child(
        """
        from opkernel import kernels
        lib = ok.load_op_library(path)
        assert lib.op_names == ["AddOne"], lib.op_names
        cuda = kernels.get_kernel("AddOne", "cuda")
        assert cuda.provider.plugin == path and cuda.is_class, cuda
        x = np.arange(-3, 1000, dtype=np.int32)
        with ok.kernel_fallback("cpu"):  # on opencl: the cpu kernel, the result copied back
            y = lib.add_one(ok.tensor(x))
            empty = lib.add_one(np.zeros((0, 2), np.int32))
        print(y.backend, (y.numpy() == x + 1).all(), empty.shape)
        """,
        backend=backend,
        what=f"AddOne on {backend}",
        path=add_one,
    )
    assert out.split() == [backend, "True", "(0,", "2)"], out
