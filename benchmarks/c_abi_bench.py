"""What the C ABI costs per call: ZeroOut from ``examples/zero_out_c/zero_out.c`` (built
here with ``cc``) against the same op with a Python kernel (numpy), interleaved in one
run, medians.

Two levels: the op call (``lib.zero_out(x).numpy()``: dispatch, the kernel, the result)
and the kernel alone (``compute`` on a ready ``OpKernelContext``: for C, the ctypes call,
the DLTensors of the input and output, and the table's callbacks).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/c_abi_bench.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import opkernel as ok  # noqa: E402
from harness import Timed, fmt_time, interleaved  # noqa: E402
from run import environment  # noqa: E402

from opkernel import kernels, op_registry, sysconfig  # noqa: E402
from opkernel.ops import _wrapper  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SIZES = [1, 1000, 1_000_000]


def build(out_dir: Path) -> Path:
    out = out_dir / "zero_out.so"
    cmd = [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O2", *sysconfig.get_compile_flags(),
           str(ROOT / "examples" / "zero_out_c" / "zero_out.c"), "-o", str(out)]
    subprocess.run(cmd, check=True)
    return out


def python_twin() -> Callable[..., Any]:
    """ZeroOut with a Python (numpy) class kernel, under another name."""
    ok.register_op("Bench>PyZeroOut").attr("T: {float, int32} = DT_INT32").attr("preserve_index: int >= 0 = 0") \
        .input("to_zero: T").output("zeroed: T").set_shape_fn(ok.shape_fns.unchanged_shape)

    class PyZeroOut(ok.OpKernel):
        def __init__(self, ctx: ok.OpKernelConstruction) -> None:
            self.index = ctx.get_attr("preserve_index")

        def compute(self, ctx: ok.OpKernelContext) -> None:
            x = ctx.input(0)
            out = ctx.allocate_output(0, x.shape)
            out[...] = 0
            out.flat[self.index] = x.flat[self.index]

    ok.register_kernel("Bench>PyZeroOut", backend="cpu")(PyZeroOut)
    return _wrapper("Bench>PyZeroOut")


def kernel_call(op: str, x: np.ndarray) -> Callable[[], Any]:
    kdef = kernels.get_kernel(op, "cpu", T=ok.float32)
    op_def = op_registry.get_op_def(op)
    attrs = {"T": ok.float32, "preserve_index": 0}
    be = ok.tensor(0.0)._backend
    kernel = kdef.impl(kernels.OpKernelConstruction(op_def, attrs, be))

    def call() -> Any:
        ctx = kernels.OpKernelContext(op_def, attrs, be, [x], [ok.float32])
        kernel.compute(ctx)
        return ctx.outputs[0]

    return call


def main() -> int:
    ok.set_backend("cpu")
    print(environment())
    with tempfile.TemporaryDirectory() as tmp:
        lib = ok.load_op_library(build(Path(tmp)))
        py = python_twin()
        print("| elements | level | C kernel | Python kernel | C − Python |")
        print("|---|---|---|---|---|")
        for n in SIZES:
            x = np.arange(n, dtype=np.float32)
            t = ok.tensor(x)
            np.testing.assert_array_equal(lib.zero_out(t).numpy(), py(t).numpy())
            levels = (
                ("op call", lambda: lib.zero_out(t).numpy(), lambda: py(t).numpy()),
                ("kernel", kernel_call("ZeroOut", x), kernel_call("Bench>PyZeroOut", x)),
            )
            for level, c_call, py_call in levels:
                c, p = interleaved([Timed(c_call), Timed(py_call)], rounds=5)
                print(f"| {n} | {level} | {fmt_time(c)} | {fmt_time(p)} | {fmt_time(c - p) if c >= p else '−' + fmt_time(p - c)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
