"""GradientTape semantics, the functional API, custom gradients and the tape's memory."""

from __future__ import annotations

import gc
import os
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from opkernel.errors import GradientNotFoundError, InvalidArgumentError


def test_sources_may_be_a_tensor_a_list_or_a_dict(backend):
    x = ok.tensor(np.array([1.0, 2.0], np.float32))
    y = ok.tensor(np.array([3.0, 4.0], np.float32))
    with ok.GradientTape(persistent=True) as tape:
        tape.watch([x, y])
        z = ok.ops.sum(x * y, [0])
    assert tape.gradient(z, x).numpy().tolist() == [3.0, 4.0]
    gx, gy = tape.gradient(z, [x, y])
    assert gy.numpy().tolist() == [1.0, 2.0]
    grads = tape.gradient(z, {"a": x, "b": [y]})
    assert grads["b"][0].numpy().tolist() == [1.0, 2.0]


def test_a_non_persistent_tape_gives_one_gradient_then_releases_its_records(backend):
    x = ok.tensor(np.array([2.0], np.float32))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    assert tape.gradient(y, x).numpy().tolist() == [4.0]
    assert tape._entries == [] and tape._tracked == {}
    with pytest.raises(InvalidArgumentError, match="only be called once"):
        tape.gradient(y, x)


def test_ops_on_unwatched_tensors_are_not_recorded(backend):
    x = ok.tensor(np.array([2.0], np.float32))
    u = ok.tensor(np.array([3.0], np.float32))
    for depth in (1, 2):  # one tape recording, then the same under an outer one
        tapes = [ok.GradientTape(persistent=True) for _ in range(depth)]
        for t in tapes:
            t.__enter__()
        for t in tapes:
            t.watch(x)
        y = x * x
        v = u * u  # nothing watched: no record, and u gets no gradient
        for t in reversed(tapes):
            t.__exit__(None, None, None)
        for t in tapes:
            assert len(t._entries) == 1 and id(v) not in t._tracked
            assert t.gradient(v, u) is None
            assert t.gradient(y, x).numpy().tolist() == [4.0]


def test_trainable_variables_are_watched_automatically_unless_switched_off(backend):
    v = ok.Variable(np.array([3.0], np.float32))
    frozen = ok.Variable(np.array([3.0], np.float32), trainable=False)
    with ok.GradientTape() as tape:
        y = v * frozen
    gv, gf = tape.gradient(y, [v, frozen])
    assert gv.numpy().tolist() == [3.0] and gf is None
    with ok.GradientTape(watch_accessed_variables=False) as tape:
        y = v * v
    assert tape.gradient(y, v) is None


def test_output_gradients_seed_the_backward_pass(backend):
    x = ok.tensor(np.array([1.0, 2.0], np.float32))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = x * 3.0
    g = tape.gradient(y, x, output_gradients=ok.tensor(np.array([10.0, 100.0], np.float32)))
    assert g.numpy().tolist() == [30.0, 300.0]


def test_integer_inputs_get_no_gradient_and_broadcasts_are_reduced(backend):
    x = ok.tensor(np.ones((2, 3), np.float32))
    b = ok.tensor(np.array([1.0, 2.0, 3.0], np.float32))
    idx = ok.tensor(np.array([0, 2], np.int32))
    with ok.GradientTape() as tape:
        tape.watch([x, b, idx])
        y = ok.ops.sum(ok.ops.gather_v2(x + b, idx, 1), [0, 1])
    gx, gb, gi = tape.gradient(y, [x, b, idx])
    assert gx.shape == (2, 3) and gb.numpy().tolist() == [2.0, 0.0, 2.0] and gi is None


def test_a_path_through_an_op_without_a_gradient_fails_at_gradient_time(backend, fresh_registry):
    ok.register_op("Test>NoGrad").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_kernel("Test>NoGrad", backend="*")(lambda x: ok.ops.identity(x))
    x = ok.tensor(np.array([1.0], np.float32))
    with ok.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = ok.ops.test.no_grad(x)  # recording works; only differentiating needs the gradient
        z = ok.ops.test.no_grad(ok.stop_gradient(x)) + x
    with pytest.raises(GradientNotFoundError, match="'Test>NoGrad'.*register_gradient.*stop_gradient"):
        tape.gradient(y, x)
    assert tape.gradient(z, x).numpy().tolist() == [1.0]


def test_not_differentiable_ops_propagate_nothing(backend):
    x = ok.tensor(np.array([1.0, -1.0], np.float32))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = ok.ops.cast(ok.ops.greater(x, 0.0), DstT=ok.float32) * x
    assert tape.gradient(y, x).numpy().tolist() == [1.0, 0.0]


def test_custom_gradient_replaces_the_functions_gradient(backend):
    @ok.custom_gradient
    def log1pexp(x):
        e = ok.ops.exp(x)

        def grad(dy):
            return dy * (1.0 - 1.0 / (1.0 + e))

        return ok.ops.log(1.0 + e), grad

    x = ok.tensor(np.array([0.0, 100.0], np.float32))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = log1pexp(x)
    assert np.allclose(tape.gradient(y, x).numpy(), [0.5, 1.0])  # finite where exp overflows


def test_grad_and_value_and_grad(backend):
    f = lambda x, y: ok.ops.sum(x * x * y, [0])  # noqa: E731
    value, g = ok.value_and_grad(f)(np.array([1.0, 2.0], np.float32), np.array([3.0, 5.0], np.float32))
    assert value.numpy() == 23.0 and g.numpy().tolist() == [6.0, 20.0]
    gx, gy = ok.grad(f, argnums=(0, 1))(np.array([1.0], np.float32), np.array([3.0], np.float32))
    assert gx.numpy().tolist() == [6.0] and gy.numpy().tolist() == [1.0]


def test_gradients_run_on_the_forward_backend(backend):
    x = ok.tensor(np.array([1.0, 2.0], np.float32))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = ok.ops.tanh(x)
    assert tape.gradient(y, x).backend == backend


def test_tapes_do_not_grow_memory_over_10000_training_steps():
    """What a tape recorded is released after each step: neither Python objects nor
    traced allocations grow over 10,000 training steps.  (The tape is the same code
    on every backend; this runs on cpu to keep the suite fast.)"""
    rng = np.random.default_rng(0)
    with ok.use_backend("cpu"):
        x = ok.tensor(rng.standard_normal((8, 4)).astype(np.float32))
        y = ok.tensor(rng.integers(0, 3, 8).astype(np.int64))
        model = ok.nn.Dense(4, 3, seed=1)
        opt = ok.nn.SGD(0.01, momentum=0.9)

        def steps(n):
            for _ in range(n):
                with ok.GradientTape() as tape:
                    loss = ok.nn.sparse_softmax_cross_entropy(model(x), y)
                opt.apply_gradients(zip(tape.gradient(loss, model.variables), model.variables))

        steps(100)  # warm the signature caches
        gc.collect()
        objects_before, rss_before = len(gc.get_objects()), _resident_bytes()
        steps(10_000)
        gc.collect()
        objects_after, rss_after = len(gc.get_objects()), _resident_bytes()
    assert objects_after - objects_before < 200, f"{objects_after - objects_before} objects more after 10,000 steps"
    # Each step records ~15 ops with their tensors; keeping them would cost far more than this.
    assert rss_after - rss_before < 8 * 2**20, f"resident memory grew by {rss_after - rss_before} bytes"


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_every_variable_an_op_uses_is_watched(backend):
    x = ok.tensor(np.ones((1, 3), np.float32))
    w = ok.Variable(np.ones((3, 2), np.float32))
    b = ok.Variable(np.zeros(2, np.float32))
    with ok.GradientTape() as tape:
        loss = ok.ops.sum(x @ w + b, [0, 1])  # Add sees a tracked tensor first, then b
    gw, gb = tape.gradient(loss, [w, b])
    assert gw.shape == (3, 2) and gb.numpy().tolist() == [1.0, 1.0]


def test_a_variable_updated_after_use_is_an_error_not_a_wrong_gradient(backend):
    x = ok.tensor(np.array([1.0], np.float32))
    v = ok.Variable(np.array([3.0], np.float32))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = x * v
        v.assign_add(np.array([10.0], np.float32))
    with pytest.raises(InvalidArgumentError, match="'Mul'.*updated in place"):
        tape.gradient(y, x)
    with ok.GradientTape() as tape:  # read_value() is a snapshot: fine
        tape.watch(x)
        y = x * v.read_value()
        v.assign_add(np.array([10.0], np.float32))
    assert tape.gradient(y, x).numpy().tolist() == [13.0]


def test_gradient_functions_can_tell_tape_made_zeros(backend: str, fresh_registry: None) -> None:
    from opkernel.autodiff import is_zero_gradient

    seen: list[tuple[bool, bool]] = []
    ok.register_op("Probe>TwoOut").input("x: float").output("a: float").output("b: float")

    @ok.register_kernel("Probe>TwoOut", backend="*")
    def two_out(x: ok.Tensor) -> tuple[ok.Tensor, ok.Tensor]:
        return ok.ops.mul(x, 2.0), ok.ops.mul(x, 3.0)

    @ok.register_gradient("Probe>TwoOut")
    def _grad(op: Any, da: ok.Tensor, db: ok.Tensor) -> ok.Tensor:
        seen.append((is_zero_gradient(da), is_zero_gradient(db)))
        return ok.ops.add(ok.ops.mul(da, 2.0), ok.ops.mul(db, 3.0))

    x = ok.Variable(np.ones(3, np.float32))
    with ok.GradientTape(persistent=True) as tape:
        a, b = ok.ops.probe.two_out(x)
    assert tape.gradient(a, x).numpy().tolist() == [2.0, 2.0, 2.0]
    assert tape.gradient([a, b], x).numpy().tolist() == [5.0, 5.0, 5.0]
    assert seen == [(False, True), (False, False)]
    assert not is_zero_gradient(ok.ops.zeros_like(x)) and not is_zero_gradient(None)


def test_gradient_functions_can_take_none_for_unused_outputs(backend: str, fresh_registry: None) -> None:
    seen: list[tuple[Any, Any]] = []
    ok.register_op("Probe>Pair").input("x: float").output("a: float").output("b: float")
    ok.register_kernel("Probe>Pair", backend="*")(lambda x: (ok.ops.mul(x, 2.0), ok.ops.mul(x, 3.0)))

    @ok.register_gradient("Probe>Pair", materialize_grads=False)
    def _grad(op: Any, da: ok.Tensor | None, db: ok.Tensor | None) -> ok.Tensor:
        seen.append((da is None, db is None))
        terms = [ok.ops.mul(g, k) for g, k in ((da, 2.0), (db, 3.0)) if g is not None]
        return terms[0] if len(terms) == 1 else ok.ops.add(*terms)

    x = ok.Variable(np.ones(2, np.float32))
    with ok.GradientTape(persistent=True) as tape:
        a, b = ok.ops.probe.pair(x)
    assert tape.gradient(b, x).numpy().tolist() == [3.0, 3.0]
    assert tape.gradient(a, x).numpy().tolist() == [2.0, 2.0]
    assert tape.gradient([a, b], x).numpy().tolist() == [5.0, 5.0]
    assert seen == [(True, False), (False, True), (False, False)]


def test_sparse_cross_entropy_backward_makes_no_zeros(backend: str) -> None:
    logits = ok.Variable(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    with ok.GradientTape() as tape:
        loss = ok.nn.sparse_softmax_cross_entropy(logits, ok.tensor(np.array([0, 2, 1, 1])))
    with ok.profile() as prof:
        g = tape.gradient(loss, logits)
    assert "ZerosLike" not in {op for _, op, *_ in prof.rows()}
    z = logits.numpy().astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(4), [0, 2, 1, 1]] -= 1
    np.testing.assert_allclose(g.numpy(), p / 4, rtol=1e-5, atol=1e-7)


def test_gradient_constants_are_made_once_per_backend_and_read_only(backend: str) -> None:
    from opkernel.ops._grad_util import constant

    like = ok.tensor(np.ones(2, np.float32))
    shape = constant((2, 3), like)
    assert shape is constant((2, 3), like) and shape.dtype == ok.int32 and shape.numpy().tolist() == [2, 3]
    count = constant(4, like, ok.float32)
    assert count is not constant(4, like, ok.float64) and count.numpy().dtype == np.float32
    assert count.backend == like.backend
    if backend == "cpu":  # the array is the backend's own: an op handing it out could not have it written
        with pytest.raises(ValueError, match="read-only"):
            ok.ops.identity(count).numpy()[...] = 5
    assert float(constant(4, like, ok.float32).numpy()) == 4.0


def test_mean_gradient_reuses_its_constants_and_is_exact(backend: str) -> None:
    x = ok.Variable(np.arange(12, dtype=np.float32).reshape(3, 4))
    for axes, keep in (([0, 1], False), ([1], False), ([0], True)):
        with ok.GradientTape() as tape:
            y = ok.ops.mean(x, axes, keep_dims=keep)
        n = 12 // int(np.prod(y.shape)) if not keep else 3
        g = tape.gradient(y, x).numpy()
        assert g.shape == (3, 4) and (g == np.float32(1) / np.float32(n)).all(), (axes, g)


def test_a_gradient_written_through_numpy_never_changes_a_later_seed(backend: str) -> None:
    x = ok.Variable(np.ones(3, np.float32))
    with ok.GradientTape() as tape:
        y = ok.ops.identity(x)
    g = tape.gradient(y, x)
    try:
        g.numpy()[:] *= 0.5  # the seed itself may come back as the gradient
    except ValueError as e:  # read-only on host backends: a tensor is a value
        assert "read-only" in str(e)
    with ok.GradientTape() as tape:
        z = ok.ops.mul(x, 3.0)
    assert tape.gradient(z, x).numpy().tolist() == [3.0, 3.0, 3.0]


def test_sgd_takes_a_numpy_learning_rate(backend: str) -> None:
    v = ok.Variable(np.ones(2, np.float32))
    ok.nn.SGD(np.array(0.5, np.float32)).apply_gradients([(ok.tensor(np.ones(2, np.float32)), v)])
    assert v.numpy().tolist() == [0.5, 0.5]


@pytest.mark.parametrize("act, slope", [("elu", 1.0), ("selu", 1.0507009873554805)])
def test_elu_and_selu_gradients_where_the_output_is_infinite_or_nan(backend: str, act: str, slope: float) -> None:
    """TensorFlow's EluGrad and SeluGrad select on ``output < 0``: an infinite or NaN
    output takes the right side's slope.  0/1 masks times the output gave NaN (0 * inf)."""
    x = ok.Variable(np.array([np.inf, np.nan, 2.0, 0.0], np.float32))
    with ok.GradientTape() as tape:
        y = getattr(ok.ops, act)(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.full(4, slope, np.float32), rtol=1e-6)


class _Block(ok.nn.Layer):
    """Sublayers held in an attribute, a list, a tuple and a dict, one shared Variable,
    and a reference back to a parent: what a transformer block holds."""

    def __init__(self, shared: ok.Variable, parent: ok.nn.Layer | None = None) -> None:
        super().__init__()
        self.proj = ok.nn.Dense(4, 4, seed=1)
        self.heads = [ok.nn.Dense(4, 4, seed=2), ok.nn.Dense(4, 4, seed=3)]
        self.pair = (ok.nn.Dense(4, 4, seed=4),)
        self.named = {"out": ok.nn.Dense(4, 2, seed=5), "scale": shared}
        self.again = self.proj  # the same sublayer twice
        self.parent = parent
        self.bias = self.add_variable("bias", (4,), ok.nn.zeros, "float32", seed=0)

    def __call__(self, x: ok.Tensor) -> ok.Tensor:
        h = self.proj(x) + self.bias
        for head in [*self.heads, *self.pair]:
            h = ok.nn.Dense.__call__(head, h)
        return self.named["out"](h) * self.named["scale"]


class _Model(ok.nn.Layer):
    def __init__(self) -> None:  # no super().__init__(): Keras tolerates it, so do we
        self.shared = ok.Variable(np.float32(1.0), name="scale")
        self.blocks = [_Block(self.shared), _Block(self.shared)]
        self.blocks[1].parent = self  # a cycle

    def __call__(self, x: ok.Tensor) -> ok.Tensor:
        widen = ok.tensor(np.full((2, 4), 0.5, np.float32))
        return self.blocks[1](ok.ops.mat_mul(self.blocks[0](x), widen))


def test_a_layer_tracks_the_variables_of_its_sublayers(backend: str) -> None:
    """A Layer holding Dense sublayers (attributes, lists, tuples, dicts, nested) lists their
    Variables; before, it listed none, and an optimizer silently updated nothing."""
    model = _Model()
    block = model.blocks[0]
    # each block: bias, then proj (2), heads (4), pair (2), named out (2) and the shared scale
    assert len(block.variables) == 1 + 2 + 4 + 2 + 2 + 1
    assert block.variables[0] is block.bias and block.variables[1] is block.proj.kernel
    assert len(model.variables) == 1 + 2 * 11  # the shared scale once, each block's own
    assert len({id(v) for v in model.variables}) == len(model.variables)
    shared = ok.Variable(np.float32(1.0))
    b1, b2 = _Block(shared), _Block(shared)
    assert ok.nn.Sequential([b1, b2]).variables == b1.variables + b2.variables[:-1]  # the shared scale once
    frozen = ok.Variable(np.float32(2.0), trainable=False)
    block.extra = frozen
    assert any(v is frozen for v in block.variables) and all(v is not frozen for v in block.trainable_variables)
    del block.extra

    x = ok.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    y = ok.tensor(np.array([0, 1, 1]))
    opt = ok.nn.SGD(0.1)
    before = [v.numpy().copy() for v in model.variables]
    losses = []
    for _ in range(3):
        with ok.GradientTape() as tape:
            loss = ok.nn.sparse_softmax_cross_entropy(model(x), y)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(float(loss.numpy()))
    assert losses[-1] < losses[0]
    changed = [not np.array_equal(b, v.numpy()) for b, v in zip(before, model.variables)]
    assert sum(changed) > len(changed) // 2, changed
