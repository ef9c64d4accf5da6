"""Backward placement: each recorded op's gradient runs on the backend the op ran on,
whatever backend is active at ``tape.gradient()``; the seed is made on the target's
backend, a gradient comes back on its source's backend, transfers are differentiable,
and an error in the backward pass names the gradient that was running.

``twin`` (tests/twin.py) has kernels for Add, Sub, Mul and Neg only: a gradient that
ran there by mistake fails for want of a kernel, so these tests cannot pass by luck.
"""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok
from opkernel.autodiff import OpRecord
from opkernel.errors import KernelNotFoundError

X = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)


def test_a_forward_pass_recorded_on_cpu_is_differentiated_on_cpu(twin: str) -> None:
    """The README's sum(x @ x), recorded under use_backend("cpu") and differentiated
    while another backend is active (which has none of the gradient's kernels)."""
    with ok.use_backend("cpu"):
        x = ok.tensor(X)
        with ok.GradientTape(persistent=True) as tape:
            tape.watch(x)
            loss = ok.ops.sum(ok.ops.mat_mul(x, x), [0, 1])
            vector = ok.ops.mat_mul(x, x)  # a non-scalar target: its seed is made on cpu too
    with ok.use_backend(twin):
        dx = tape.gradient(loss, x)
        dv = tape.gradient(vector, x)
        assert ok.get_backend() == "twin"  # left as it was
    ones = np.ones_like(X)
    expected = ones @ X.T + X.T @ ones
    assert dx.backend == "cpu" and dv.backend == "cpu"
    np.testing.assert_allclose(dx.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(dv.numpy(), expected, rtol=1e-6)


def test_each_gradient_runs_on_the_backend_its_op_ran_on(twin: str) -> None:
    ok.register_op("Probe>Twice").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    from twin import Boxed

    ok.register_kernel("Probe>Twice", backend="cpu")(lambda x: x * 2)
    ok.register_kernel("Probe>Twice", backend="twin")(lambda x: Boxed(x.array * 2))
    ran: list[tuple[str | None, str]] = []

    @ok.register_gradient("Probe>Twice")
    def twice_grad(op: OpRecord, grad: ok.Tensor) -> ok.Tensor:
        ran.append((op.backend, ok.get_backend()))
        return ok.ops.mul(grad, 2.0)

    with ok.use_backend("cpu"):
        x = ok.tensor([1.0, 2.0])
    with ok.GradientTape() as tape:
        tape.watch(x)
        with ok.use_backend("cpu"):
            a = ok.ops.probe.twice(x)
        with ok.use_backend(twin):
            b = ok.ops.probe.twice(a.to(twin))  # the copy is recorded: its gradient goes back to cpu
        with ok.use_backend("cpu"):
            loss = ok.ops.sum(b.to("cpu"), [0])
    dx = tape.gradient(loss, x)
    assert ran == [("twin", "twin"), ("cpu", "cpu")]  # backwards: twin's call first
    assert dx.backend == "cpu" and dx.numpy().tolist() == [4.0, 4.0]


def test_gradients_cross_backends_with_the_copy_transfer_policy(twin: str) -> None:
    with ok.use_backend("cpu"):
        x = ok.tensor([1.0, 2.0, 3.0])
    ok.config.transfer_policy = "copy"
    try:
        with ok.use_backend(twin), ok.GradientTape() as tape:
            tape.watch(x)
            y = ok.ops.mul(x, x)  # x is copied to twin (and the copy recorded)
        with ok.use_backend(twin):
            dx = tape.gradient(y, x, output_gradients=ok.tensor([1.0, 1.0, 1.0], backend="cpu"))
    finally:
        ok.config.transfer_policy = "error"
    assert dx.backend == "cpu"  # on its source's backend
    assert dx.numpy().tolist() == [2.0, 4.0, 6.0]


def test_output_gradients_and_unconnected_zeros_follow_their_tensors(twin: str) -> None:
    x = ok.tensor([1.0, 2.0], backend=twin)
    unused = ok.tensor([5.0], backend="cpu")
    with ok.GradientTape() as tape:
        tape.watch([x, unused])
        with ok.use_backend(twin):
            y = ok.ops.mul(x, ok.ops.neg(x))
    seed = ok.tensor([1.0, 10.0], backend="cpu")  # a seed on cpu for a target on twin
    with ok.use_backend(twin):  # the zeros for `unused` are made on cpu, where it lives
        dx, du = tape.gradient(y, [x, unused], output_gradients=seed, unconnected_gradients="zero")
    assert (dx.backend, du.backend) == ("twin", "cpu")
    assert dx.numpy().tolist() == [-2.0, -40.0] and du.numpy().tolist() == [0.0]


def test_second_order_gradients_across_a_transfer(twin: str) -> None:
    with ok.use_backend("cpu"):
        x = ok.tensor([1.0, -2.0])
    with ok.GradientTape() as outer:
        outer.watch(x)
        with ok.GradientTape() as inner:
            inner.watch(x)
            with ok.use_backend(twin):
                t = x.to(twin)
                y = ok.ops.mul(ok.ops.mul(t, t), t)  # x**3 on twin
        dy = inner.gradient(y, x, output_gradients=ok.tensor([1.0, 1.0], backend=twin))  # 3 x**2 on cpu
    d2y = outer.gradient(dy, x, output_gradients=ok.tensor([1.0, 1.0], backend="cpu"))  # 6 x on cpu
    assert (dy.backend, d2y.backend) == ("cpu", "cpu")
    assert dy.numpy().tolist() == [3.0, 12.0] and d2y.numpy().tolist() == [6.0, -12.0]


def test_an_error_in_a_gradient_names_its_op_and_backend(twin: str) -> None:
    ok.register_op("Probe>Smooth").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Probe>Smooth", backend="twin")(lambda x: x)

    @ok.register_gradient("Probe>Smooth")
    def smooth_grad(op: OpRecord, grad: ok.Tensor) -> ok.Tensor:
        if grad.shape == (1,):
            raise ZeroDivisionError("a bug in the gradient function")
        return ok.ops.mul(grad, ok.ops.exp(op.inputs[0]))  # twin has no Exp kernel

    for values, error, original in (
        ([1.0, 2.0], KernelNotFoundError, r"no kernel on backend 'twin': op 'Exp'"),
        ([1.0], ZeroDivisionError, r"a bug in the gradient function"),
    ):
        with ok.use_backend(twin):
            x = ok.tensor(values)
            with ok.GradientTape() as tape:
                tape.watch(x)
                y = ok.ops.probe.smooth(x)
            seed = ok.tensor(np.ones(len(values), np.float32))
        with ok.use_backend("cpu"), pytest.raises(error) as caught:
            tape.gradient(y, x, output_gradients=seed)
        message = str(caught.value)
        assert message.startswith("while computing the gradient of 'Probe>Smooth' (recorded on backend 'twin'): ")
        assert type(caught.value.__cause__) is error and caught.match(original)


def test_an_error_that_cannot_be_rebuilt_goes_through_unchanged(twin: str) -> None:
    # Defined here, not at module level: tblib (imported with distributed, by the dask
    # tests) teaches every exception class existing at that time to copy itself.
    class _Picky(Exception):
        """An exception class that cannot be rebuilt from its args."""

        def __init__(self, message: str, *, code: int) -> None:
            super().__init__(message)
            self.code = code

    @ok.custom_gradient
    def picky(x: ok.Tensor) -> tuple[ok.Tensor, object]:
        def grad(dy: ok.Tensor) -> ok.Tensor:
            raise _Picky("picky", code=7)

        return ok.ops.neg(x), grad

    with ok.use_backend(twin):
        x = ok.tensor([1.0])
        with ok.GradientTape() as tape:
            tape.watch(x)
            y = picky(x)
        with pytest.raises(_Picky, match="^picky$") as caught:
            tape.gradient(y, x, output_gradients=ok.tensor([1.0]))
    assert caught.value.code == 7


def test_custom_gradients_and_transfers_are_recorded_with_their_backend(twin: str) -> None:
    @ok.custom_gradient
    def clipped(x: ok.Tensor) -> tuple[ok.Tensor, object]:
        def grad(dy: ok.Tensor) -> ok.Tensor:
            seen.append(ok.get_backend())
            return ok.ops.neg(dy)

        return ok.ops.add(x, x), grad

    seen: list[str] = []
    with ok.use_backend(twin):
        x = ok.tensor([1.0])
        with ok.GradientTape() as tape:
            tape.watch(x)
            y = clipped(x)
    records = [r for r in tape._entries if isinstance(r, OpRecord)]
    assert [(r.type, r.backend) for r in records] == [("clipped", "twin")]
    with ok.use_backend("cpu"):
        dx = tape.gradient(y, x, output_gradients=ok.tensor([1.0], backend=twin))
    assert seen == ["twin"] and dx.backend == "twin" and dx.numpy().tolist() == [-1.0]

