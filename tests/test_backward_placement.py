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



def test_an_opkernel_error_that_cannot_be_rebuilt_goes_through_unchanged(twin: str) -> None:
    class _PickyArgument(ok.errors.InvalidArgumentError):
        """An opkernel error class that cannot be rebuilt from its args (copying it fails)."""

        def __init__(self, what: str, code: int) -> None:
            super().__init__(f"{what} ({code})", op="Probe>Picky")

    @ok.custom_gradient
    def picky(x: ok.Tensor) -> tuple[ok.Tensor, object]:
        def grad(dy: ok.Tensor) -> ok.Tensor:
            raise _PickyArgument("a picky gradient", 7)

        return ok.ops.neg(x), grad

    with ok.use_backend(twin):
        x = ok.tensor([1.0])
        with ok.GradientTape() as tape:
            tape.watch(x)
            y = picky(x)
        with pytest.raises(_PickyArgument, match=r"^a picky gradient \(7\)$"):
            tape.gradient(y, x, output_gradients=ok.tensor([1.0]))


def test_a_nested_gradients_error_names_the_failing_gradient_once(twin: str) -> None:
    """A gradient function that takes a gradient itself (a nested tape), two levels deep:
    the error says once whose gradient failed, not once per level."""
    ok.register_op("Probe>Flaky").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Probe>Flaky", backend="twin")(lambda x: x)

    @ok.register_gradient("Probe>Flaky")
    def flaky_grad(op: OpRecord, grad: ok.Tensor) -> ok.Tensor:
        raise ZeroDivisionError("a bug in the gradient function")

    def nested(inside: object, name: str) -> object:
        def f(x: ok.Tensor) -> tuple[ok.Tensor, object]:
            def grad(dy: ok.Tensor) -> ok.Tensor:
                with ok.GradientTape() as tape:
                    tape.watch(x)
                    y = inside(x)  # type: ignore[operator]
                return tape.gradient(y, x, output_gradients=dy)  # type: ignore[no-any-return]

            return ok.ops.neg(x), grad

        f.__name__ = name
        return ok.custom_gradient(f)

    outer = nested(nested(ok.ops.probe.flaky, "middle"), "outer")
    with ok.use_backend(twin):
        x = ok.tensor([1.0])
        with ok.GradientTape() as tape:
            tape.watch(x)
            y = outer(x)  # type: ignore[operator]
        with pytest.raises(ZeroDivisionError) as caught:
            tape.gradient(y, x, output_gradients=ok.tensor([1.0]))
    assert str(caught.value) == (
        "while computing the gradient of 'Probe>Flaky' (recorded on backend 'twin'): a bug in the gradient function"
    )


def test_gradient_refuses_an_unknown_unconnected_gradients_and_a_seed_count_off_by_one(twin: str) -> None:
    with ok.use_backend(twin):
        x, unused = ok.tensor([1.0, 2.0]), ok.tensor([3.0])
        with ok.GradientTape(persistent=True) as tape:
            tape.watch([x, unused])
            y, z = ok.ops.mul(x, x), ok.ops.add(x, x)
        with pytest.raises(ok.errors.InvalidArgumentError, match=r"unconnected_gradients must be 'none' or 'zero', got 'zeros'"):
            tape.gradient(y, [x, unused], unconnected_gradients="zeros")  # was: None for unused, silently
        with pytest.raises(ok.errors.InvalidArgumentError, match=r"output_gradients holds 1 gradient\(s\) for 2 target\(s\)"):
            tape.gradient([y, z], x, output_gradients=[ok.tensor([1.0, 1.0])])  # was: z dropped, silently
        with pytest.raises(ok.errors.InvalidArgumentError, match=r"output_gradients holds 2 gradient\(s\) for 1 target\(s\)"):
            tape.gradient(y, x, output_gradients=[1.0, 1.0])  # was: the first number seeded y, silently
        ones = ok.tensor([1.0, 1.0])
        dx = tape.gradient([y, z], x, output_gradients=[ones, ones])
        assert dx.numpy().tolist() == [4.0, 6.0]  # 2x + 2
        with ok.GradientTape() as once:
            once.watch(x)
            w = ok.ops.neg(x)
        with pytest.raises(ok.errors.InvalidArgumentError, match="unconnected_gradients"):
            once.gradient(w, x, output_gradients=ones, unconnected_gradients="zeros")
        # A refused call leaves a non-persistent tape usable.
        assert once.gradient(w, x, output_gradients=ones).numpy().tolist() == [-1.0, -1.0]
