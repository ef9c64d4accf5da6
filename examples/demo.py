"""The README's demo: discover backends, list kernels, run ZeroOut and a few ops,
then train a small CNN on the digits data set on every available backend.

    make demo
"""

from __future__ import annotations

import numpy as np

import digits
import opkernel as ok
from opkernel.cli import main as cli


def define_zero_out() -> None:
    """The seed example, exactly as an op author writes it."""
    ok.register_op("ZeroOut") \
        .attr("T: {float, int32} = DT_INT32") \
        .input("to_zero: T") \
        .output("zeroed: T") \
        .set_shape_fn(ok.shape_fns.unchanged_shape) \
        .doc("Zeroes all but the first element.")

    @ok.register_kernel("ZeroOut", backend="*")
    def zero_out_generic(to_zero: ok.Tensor, T: ok.DType) -> ok.Tensor:
        """Serves every backend without a kernel of its own: built from other ops."""
        flat = ok.ops.reshape(to_zero, [-1])
        mask = ok.ops.pad(ok.tensor([1], dtype=T), [[0, max(flat.shape[0] - 1, 0)]])
        return ok.ops.reshape(ok.ops.mul(flat, mask), ok.ops.shape(to_zero))

    @ok.register_kernel("ZeroOut", backend="cpu", type_constraints={"T": ["float32", "int32"]})
    def zero_out_cpu(to_zero: np.ndarray, T: ok.DType) -> np.ndarray:
        out = np.zeros_like(to_zero)
        if to_zero.size:
            out.flat[0] = to_zero.flat[0]
        return out


def main() -> int:
    cli(["info"])
    define_zero_out()
    cli(["kernels", "--op", "ZeroOut"])
    print(ok.ops.zero_out.__doc__, "\n")
    for name in ok.available_backends():
        with ok.use_backend(name):
            x = ok.tensor([[5, 4], [3, 2]], dtype="int32")
            a = ok.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
            print(f"[{name}] zero_out({x.numpy().tolist()}) = {ok.ops.zero_out(x).numpy().tolist()}")
            print(f"[{name}] a @ a.T = {ok.ops.mat_mul(a, a, transpose_b=True).numpy().tolist()}")
            print(f"[{name}] add_n([a, a, a]) = {ok.ops.add_n([a, a, a]).numpy().tolist()}")
            print(f"[{name}] string_to_number(['1.5', '2']) = "
                  f"{ok.ops.string_to_number(np.array(['1.5', '2'], dtype=object)).numpy().tolist()}")
            print(f"[{name}] pad(a, [[1, 0], [0, 1]]).shape = {ok.ops.pad(a, [[1, 0], [0, 1]]).shape}")
            print(f"[{name}] infer_shapes(MatMul, [(2, None), (None, 7)]) = "
                  f"{ok.infer_shapes('MatMul', [[2, None], [None, 7]])}")
    print()
    return digits.main([])


if __name__ == "__main__":
    raise SystemExit(main())
