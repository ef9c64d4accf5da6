"""ok.function: tracing, signatures and retracing, variables, tapes, replay on every backend,
ConcreteFunction over hand-built graphs, and the checks of Graph.validate()."""

from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import opkernel as ok
from opkernel.errors import InvalidArgumentError, ShapeError
from opkernel.function import ConcreteFunction, RetracingWarning, SymbolicTensorError
from opkernel.graph import Edge, Graph, GraphError, Node, TensorSpec

F32 = np.float32


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


# ---------------------------------------------------------------- signatures and retracing


def test_a_new_dtype_shape_or_python_value_retraces_and_nothing_else_does(backend):
    calls = []

    @ok.function
    def f(x, scale):
        calls.append(1)  # runs only while tracing
        return x * float(scale)

    a, b = ok.tensor(_rand(2, 3)), ok.tensor(_rand(2, 3, seed=1))
    np.testing.assert_allclose(f(a, 2).numpy(), a.numpy() * 2, rtol=1e-6)
    np.testing.assert_allclose(f(b, 2).numpy(), b.numpy() * 2, rtol=1e-6)  # same signature: replayed
    assert f.tracing_count == 1 and len(calls) == 1
    f(ok.tensor(_rand(4, 3)), 2)  # new shape
    f(ok.tensor(np.ones((2, 3), np.float64)), 2)  # new dtype
    np.testing.assert_allclose(f(a, 3).numpy(), a.numpy() * 3, rtol=1e-6)  # new Python value: static
    assert f.tracing_count == 4
    f(b, 3)
    f(np.ones((2, 3), F32), 3)  # a numpy array is a tensor of its dtype and shape
    assert f.tracing_count == 4 and len(f.concrete_functions) == 4


def test_more_than_five_traces_warn():
    f = ok.function(lambda x, n: x + float(n))
    x = ok.tensor(np.zeros(2, F32))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetracingWarning)
        for n in range(5):
            f(x, n)
    with pytest.warns(RetracingWarning, match="traced 6 times"):
        f(x, 5)
    assert f.tracing_count == 6


def test_input_signature_with_an_unknown_batch_runs_any_batch_without_retracing(backend):
    w = _rand(4, 2)

    @ok.function(input_signature=[ok.TensorSpec((None, 4), ok.float32)])
    def f(x):
        return ok.ops.relu(ok.ops.mat_mul(x, ok.tensor(w))) + 1.0

    cf = f.get_concrete_function(ok.TensorSpec((None, 4), ok.float32))
    assert cf.graph.nodes[-1].outputs[0].shape == (None, 2) and f.get_concrete_function() is cf
    for batch in (3, 7):
        x = _rand(batch, 4, seed=batch)
        np.testing.assert_allclose(f(ok.tensor(x)).numpy(), np.maximum(x @ w, 0) + 1, rtol=1e-5, atol=1e-6)
    assert f.tracing_count == 1
    with pytest.raises(InvalidArgumentError, match=r"input 0 must be float32 of shape \(\?, 4\), got float32 of shape \(3, 5\)"):
        f(ok.tensor(_rand(3, 5)))
    with pytest.raises(InvalidArgumentError, match="got float64"):
        f(ok.tensor(np.ones((3, 4))))
    with pytest.raises(InvalidArgumentError, match="takes exactly 1 positional"):
        f(ok.tensor(_rand(3, 4)), 1)


def test_python_control_flow_runs_at_trace_time():
    @ok.function
    def f(x, n, negate):
        for _ in range(n):
            x = x * 2.0
        if negate:
            x = -x
        return x

    x = ok.tensor(np.array([1.0, 2.0], F32))
    assert f(x, 3, False).numpy().tolist() == [8.0, 16.0]
    assert f(x, 1, True).numpy().tolist() == [-2.0, -4.0]
    ops = [[n.op for n in cf.graph.nodes] for cf in f.concrete_functions]
    assert ops == [["Mul", "Mul", "Mul"], ["Mul", "Neg"]]


def test_a_shape_mismatch_raises_while_tracing_naming_the_node_the_op_and_the_shapes():
    @ok.function
    def f(x):
        y = ok.ops.relu(x)
        return ok.ops.mat_mul(y, ok.tensor(np.ones((4, 2), F32)))

    with pytest.raises(ShapeError) as e:
        f(ok.tensor(np.ones((2, 3), F32)))
    msg = str(e.value)
    assert "tracing 'f'" in msg and "node 1" in msg and "'MatMul'" in msg and "(2, 3), (4, 2)" in msg
    assert f.tracing_count == 1 and not f.concrete_functions  # nothing kept from a failed trace


@pytest.mark.parametrize("read", [
    lambda t: t.numpy(), lambda t: bool(t), lambda t: float(t), lambda t: int(t), lambda t: np.asarray(t),
    lambda t: t.item(),
])
def test_reading_a_placeholder_value_while_tracing_is_a_clear_error(read):
    @ok.function
    def f(x):
        read(ok.ops.sum(x, [0]))
        return x

    with pytest.raises(SymbolicTensorError, match="while tracing 'f'.*has no value until the function runs"):
        f(ok.tensor(np.ones(3, F32)))


def test_kwargs_and_nested_structures_in_and_out():
    Pair = namedtuple("Pair", "a b")

    @ok.function
    def f(xs, d, scale=1.0):
        s = xs[0] + xs[1]
        return {"sum": s * scale, "parts": (xs[0], [d["y"], None]), "pair": Pair(s, d["y"])}

    x0, x1, y = (ok.tensor(_rand(2, seed=k)) for k in range(3))
    out = f([x0, x1], {"y": y}, scale=2.0)
    assert set(out) == {"sum", "parts", "pair"}
    np.testing.assert_allclose(out["sum"].numpy(), (x0.numpy() + x1.numpy()) * 2, rtol=1e-6)
    assert isinstance(out["parts"], tuple) and out["parts"][1][1] is None
    np.testing.assert_array_equal(out["parts"][1][0].numpy(), y.numpy())
    assert isinstance(out["pair"], Pair)
    assert f.get_concrete_function([x0, x1], {"y": y}, scale=2.0).graph.output_structure == {
        "sum": 0, "parts": [1, [2, None]], "pair": [3, 4],
    }


def test_a_function_called_while_tracing_another_is_traced_inline():
    inner = ok.function(lambda x: x * 3.0)

    @ok.function
    def outer(x):
        return inner(x) + 1.0

    assert outer(ok.tensor(np.ones(2, F32))).numpy().tolist() == [4.0, 4.0]
    assert inner.tracing_count == 0
    assert [n.op for n in outer.concrete_functions[0].graph.nodes] == ["Mul", "Add"]


def test_as_a_method_each_instance_has_its_own_traces():
    class Model:
        def __init__(self, k: float) -> None:
            self.k = ok.Variable(np.array(k, F32))

        @ok.function
        def __call__(self, x):
            return x * self.k

    m1, m2 = Model(2.0), Model(3.0)
    x = ok.tensor(np.ones(2, F32))
    assert m1(x).numpy().tolist() == [2.0, 2.0] and m2(x).numpy().tolist() == [3.0, 3.0]


# ---------------------------------------------------------------- variables


def test_variables_are_captured_by_reference(backend):
    w = ok.Variable(np.array([1.0, 2.0], F32))
    f = ok.function(lambda x: x * w)
    x = ok.tensor(np.ones(2, F32))
    assert f(x).numpy().tolist() == [1.0, 2.0]
    w.assign(np.array([5.0, 6.0], F32))
    assert f(x).numpy().tolist() == [5.0, 6.0]
    assert f.tracing_count == 1 and f.concrete_functions[0].graph.variables == [w]


def test_outputs_are_values_never_the_variables_memory(backend):
    w = ok.Variable(np.array([1.0, 2.0], F32))

    @ok.function
    def f(x):
        return w, ok.ops.identity(w), ok.ops.reshape(w, [2, 1]), x

    x = ok.tensor(np.array([7.0, 8.0], F32))
    a, b, c, same = f(x)
    w.assign_add(np.array([10.0, 10.0], F32))
    assert a.numpy().tolist() == [1.0, 2.0] and b.numpy().tolist() == [1.0, 2.0]
    assert c.numpy().ravel().tolist() == [1.0, 2.0]
    assert same.numpy().tolist() == [7.0, 8.0] and not isinstance(a, ok.Variable)
    assert w.numpy().tolist() == [11.0, 12.0]


def _mlp_and_data(seed: int):
    rng = np.random.default_rng(seed)
    x = ok.tensor(rng.standard_normal((8, 5)).astype(F32))
    y = ok.tensor(rng.integers(0, 3, 8).astype(np.int64))
    model = ok.nn.Sequential([ok.nn.Dense(5, 6, "relu", seed=1), ok.nn.Dense(6, 3, seed=2)])
    return model, x, y


def _train_step(model, opt, x, y):
    with ok.GradientTape() as tape:
        loss = ok.nn.sparse_softmax_cross_entropy(model(x), y)
    grads = tape.gradient(loss, model.variables)
    opt.apply_gradients(zip(grads, model.variables))
    return loss


def test_a_whole_training_step_traced_with_its_tape_and_apply_ops_trains_as_eager_does(backend):
    eager_model, x, y = _mlp_and_data(0)
    traced_model, _, _ = _mlp_and_data(0)
    eager_opt, traced_opt = ok.nn.SGD(0.1, momentum=0.9), ok.nn.SGD(0.1, momentum=0.9)
    step = ok.function(_train_step)
    for _ in range(4):
        want = _train_step(eager_model, eager_opt, x, y)
        got = step(traced_model, traced_opt, x, y)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(traced_model.variables, eager_model.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert step.tracing_count == 1
    graph = step.concrete_functions[0].graph
    assert "ApplyMomentum" in graph.op_names() and len(graph.variables) == 10  # 4 weights, 4 momentum slots, lr, momentum


def test_a_gradient_computed_inside_the_function_is_returned(backend):
    w = ok.Variable(_rand(3, 2))

    @ok.function
    def grads(x):
        with ok.GradientTape() as tape:
            tape.watch(x)
            loss = ok.ops.sum(ok.ops.tanh(ok.ops.mat_mul(x, w)), [0, 1])
        return tape.gradient(loss, [x, w])

    x = ok.tensor(_rand(4, 3, seed=1))
    gx, gw = grads(x)
    t = np.tanh(x.numpy() @ w.numpy())
    np.testing.assert_allclose(gx.numpy(), (1 - t**2) @ w.numpy().T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw.numpy(), x.numpy().T @ (1 - t**2), rtol=1e-5, atol=1e-6)


def test_a_tape_outside_differentiates_through_a_call(backend):
    w = ok.Variable(_rand(3, 2))
    f = ok.function(lambda x: ok.ops.tanh(ok.ops.mat_mul(x, w)))
    x = ok.tensor(_rand(4, 3, seed=1))
    f(x)  # traced outside the tape; the taped call below replays
    results = []
    for fn in (f, lambda x: ok.ops.tanh(ok.ops.mat_mul(x, w))):
        with ok.GradientTape() as tape:
            tape.watch(x)
            loss = ok.ops.sum(fn(x) * fn(x), [0, 1])
        results.append(tape.gradient(loss, [x, w]))
    for got, want in zip(*results):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    with ok.GradientTape() as tape:  # first call (the trace itself) under a tape
        tape.watch(x)
        g = ok.function(lambda x: x * x)
        y = ok.ops.sum(g(x), [0, 1])
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 2 * x.numpy(), rtol=1e-6)


# ---------------------------------------------------------------- replay on every backend


def _model(x, w, b):
    h = ok.ops.relu(ok.ops.bias_add(ok.ops.mat_mul(x, w), b))
    parts = ok.ops.split(1, h, num_split=2)
    c = ok.ops.concat_v2([parts[1], parts[0]], 1)
    return {"probs": ok.ops.softmax(c), "total": ok.ops.sum(ok.ops.reshape(c, [-1]), [0]), "max": ok.ops.max(c, [1])}


def test_replay_matches_eager_on_every_backend(backend):
    x, w, b = (ok.tensor(a) for a in (_rand(5, 3), _rand(3, 4, seed=1), _rand(4, seed=2)))
    f = ok.function(_model)
    want = _model(x, w, b)
    for _ in range(2):
        got = f(x, w, b)
        for k in want:
            np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-5, atol=1e-6)
            assert got[k].backend == backend


def test_a_function_traced_on_cpu_replays_on_opencl():
    if "opencl" not in ok.available_backends():
        pytest.skip("the opencl backend is not available here")
    f = ok.function(_model)
    arrays = (_rand(5, 3), _rand(3, 4, seed=1), _rand(4, seed=2))
    with ok.use_backend("cpu"):
        want = f(*[ok.tensor(a) for a in arrays])
    with ok.use_backend("opencl"):
        got = f(*[ok.tensor(a) for a in arrays])
    assert f.tracing_count == 1 and got["probs"].backend == "opencl"
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-5, atol=1e-6)
    with ok.use_backend("opencl"), pytest.raises(InvalidArgumentError, match="lives on backend 'cpu'"):
        f(*[ok.tensor(a, backend="cpu") for a in arrays])


def test_a_runtime_failure_names_the_node_and_the_op(backend):
    f = ok.function(lambda x: ok.ops.reshape(x, [3, -1]), input_signature=[ok.TensorSpec((None,), ok.float32)])
    assert f(ok.tensor(np.ones(6, F32))).shape == (3, 2)
    with pytest.raises(InvalidArgumentError, match=r"node 0 \(op 'Reshape'\)"):
        f(ok.tensor(np.ones(7, F32)))


def test_profiling_sees_every_replayed_op():
    f = ok.function(lambda x: ok.ops.exp(x) + 1.0)
    x = ok.tensor(np.ones(3, F32))
    f(x)
    with ok.profile() as p:
        f(x)
    # each op has its row, or is named in the row of the fused group holding it
    rows = [op for _, op, *_ in p.rows()]
    named = {part for op in rows for part in (op[len("Fused("):-1].split("+") if op.startswith("Fused(") else [op])}
    assert named == {"Exp", "Add"}


# ---------------------------------------------------------------- hand-built graphs


def _spec(*shape, dtype=ok.float32):
    return TensorSpec(shape, dtype)


def test_a_concrete_function_runs_a_hand_built_graph(backend):
    f32 = ok.float32
    graph = Graph(
        inputs=[_spec(None, 2), _spec(None, 2)],
        nodes=[
            Node("ConcatV2", {"N": 2, "T": f32, "Tidx": ok.int32}, [Edge("input", 0), Edge("input", 1), Edge("const", 0)], [_spec(None, 4)]),
            Node("Split", {"num_split": 2, "T": f32}, [Edge("const", 0), Edge("node", 0)], [_spec(None, 2), _spec(None, 2)]),
            Node("Mul", {"T": f32}, [Edge("node", 1, 1), Edge("var", 0)], [_spec(None, 2)]),
            Node("Exp", {"T": f32}, [Edge("input", 0)], [_spec(None, 2)]),  # dead: no output reads it
        ],
        outputs=[Edge("node", 2), Edge("node", 1, 0)],
        output_structure={"product": 0, "left": [1]},
        constants=[np.array(1, np.int32)],
        variables=[ok.Variable(np.array([2.0, 3.0], F32))],
        variable_names=["scale"],
    )
    cf = ConcreteFunction(graph)
    assert cf.live_nodes == [0, 1, 2]
    a, b = _rand(3, 2), _rand(3, 2, seed=1)
    out = cf(a, b)
    np.testing.assert_allclose(out["product"].numpy(), b * [2.0, 3.0], rtol=1e-6)
    np.testing.assert_allclose(out["left"][0].numpy(), a, rtol=1e-6)
    with pytest.raises(InvalidArgumentError, match="takes 2 tensors"):
        cf(a)


def test_a_ref_update_node_is_kept_and_updates_its_variable(backend):
    var = ok.Variable(np.array([1.0, 1.0], F32))
    graph = Graph(
        inputs=[_spec(2)],
        nodes=[Node("ApplyGradientDescent", {"T": ok.float32, "use_locking": False},
                    [Edge("var", 0), Edge("const", 0), Edge("input", 0)], [_spec(2)])],
        outputs=[], output_structure=None, constants=[np.array(0.5, F32)], variables=[var], variable_names=["v"],
    )
    cf = ConcreteFunction(graph)
    assert cf(np.array([2.0, 4.0], F32)) is None
    cf(np.array([2.0, 4.0], F32))
    assert var.numpy().tolist() == [-1.0, -3.0]


def _two_node_graph(**changes):
    f32 = ok.float32
    nodes = [
        Node("Neg", {"T": f32}, [Edge("input", 0)], [_spec(3)]),
        Node("Add", {"T": f32}, [Edge("node", 0), Edge("input", 0)], [_spec(3)]),
    ]
    graph = Graph([_spec(3)], nodes, [Edge("node", 1)], 0, [], [], [])
    for k, v in changes.items():
        setattr(graph, k, v)
    return graph


@pytest.mark.parametrize("edit, message", [
    (lambda g: g.nodes[1].inputs.__setitem__(0, Edge("node", 5)), r"node 1 \('Add'\) input 0 is a dangling edge: node 5 does not exist"),
    (lambda g: g.nodes[1].inputs.__setitem__(0, Edge("node", 0, 3)), "has 1 outputs, not an output 3"),
    (lambda g: g.nodes[1].inputs.__setitem__(1, Edge("const", 0)), "const 0 .* does not exist"),
    (lambda g: g.nodes[0].inputs.__setitem__(0, Edge("node", 1)), r"closes a cycle .*node 1 \('Add'\) -> node 0 \('Neg'\)"),
    (lambda g: g.nodes[0].inputs.__setitem__(0, Edge("tensor", 0)), "unknown kind 'tensor'"),
    (lambda g: g.nodes[1].inputs.pop(), "has 1 inputs but op 'Add' takes 2"),
    (lambda g: setattr(g.nodes[0], "op", "NoSuchOp"), "node 0: .*NoSuchOp"),
    (lambda g: setattr(g, "outputs", [Edge("node", 1), Edge("node", 0)]), r"outputs \[1\] appear nowhere"),
    (lambda g: setattr(g, "output_structure", [0, 2]), "output_structure\\[1\\] = 2"),
    (lambda g: g.nodes[1].attrs.__setitem__("T", ok.int32), "input 0 .* is float32, the op expects int32"),
])
def test_bad_graphs_are_clear_errors(edit, message):
    graph = _two_node_graph()
    ConcreteFunction(graph)  # the graph as built is fine
    edit(graph)
    with pytest.raises(GraphError, match=message):
        ConcreteFunction(graph)(np.ones(3, F32))


def test_a_ref_input_fed_by_a_tensor_is_refused():
    graph = Graph(
        inputs=[_spec(2)],
        nodes=[Node("AssignAdd", {"T": ok.float32, "use_locking": False}, [Edge("input", 0), Edge("input", 0)], [_spec(2)])],
        outputs=[Edge("node", 0)], output_structure=0,
    )
    with pytest.raises(GraphError, match="'ref' is a Ref input and must come from a variable"):
        graph.validate()


def test_a_training_step_with_an_unknown_batch_trains_as_eager_does():
    eager_model, _, _ = _mlp_and_data(0)
    traced_model, _, _ = _mlp_and_data(0)
    eager_opt, traced_opt = ok.nn.SGD(0.1), ok.nn.SGD(0.1)
    specs = [ok.TensorSpec((None, 5), ok.float32), ok.TensorSpec((None,), ok.int64)]
    step = ok.function(lambda x, y: _train_step(traced_model, traced_opt, x, y), input_signature=specs)
    rng = np.random.default_rng(3)
    for batch in (3, 7, 3):
        x, y = ok.tensor(rng.standard_normal((batch, 5)).astype(F32)), ok.tensor(rng.integers(0, 3, batch))
        np.testing.assert_allclose(step(x, y).numpy(), _train_step(eager_model, eager_opt, x, y).numpy(), rtol=1e-5)
    for a, b in zip(traced_model.variables, eager_model.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert step.tracing_count == 1


def test_a_concrete_function_called_while_tracing_is_recorded_node_by_node():
    inner = ok.function(lambda x: x * 3.0).get_concrete_function(ok.TensorSpec((2,), ok.float32))
    outer = ok.function(lambda x: inner(x) + 1.0)
    assert outer(ok.tensor(np.ones(2, F32))).numpy().tolist() == [4.0, 4.0]
    assert [n.op for n in outer.concrete_functions[0].graph.nodes] == ["Mul", "Add"]


def test_small_constant_subexpressions_are_folded_and_large_ones_stay_nodes():
    @ok.function
    def f(x):
        small = ok.ops.exp(ok.tensor(np.zeros(3, F32)))  # constant inputs, 3 elements: run while tracing
        large = ok.ops.fill([100, 100], 2.0)  # 10000 elements: a node, not a 40 kB constant
        return x * small, ok.ops.sum(large, [0, 1])

    a, total = f(ok.tensor(np.full(3, 2.0, F32)))
    assert a.numpy().tolist() == [2.0, 2.0, 2.0] and float(total) == 20000.0
    graph = f.concrete_functions[0].graph
    assert [n.op for n in graph.nodes] == ["Fill", "Mul", "Sum"]
    assert max(c.size for c in graph.constants) <= 3  # the folded Exp's input is not kept


def _twice_op() -> None:
    ok.register_op("FnTestTwice").attr("T: {float}").input("x: T").output("y: T").set_shape_fn(
        ok.shape_fns.unchanged_shape
    )

    @ok.register_kernel("FnTestTwice", backend="cpu")
    def twice(x, **attrs):
        return x * 2


def test_a_kernel_registered_after_binding_is_used_by_later_replays():
    from opkernel.testing import isolated_registries

    with isolated_registries(), ok.use_backend("cpu"):
        _twice_op()
        f = ok.function(lambda x: ok.execute("FnTestTwice", x) + 1.0)
        x = ok.tensor(np.ones(2, F32))
        assert f(x).numpy().tolist() == [3.0, 3.0]

        @ok.register_kernel("FnTestTwice", backend="cpu", priority=5)
        def thrice(x, **attrs):
            return x * 3

        assert f(x).numpy().tolist() == [4.0, 4.0] and f.tracing_count == 1


def test_a_replay_falls_back_as_eager_calls_do():
    if "opencl" not in ok.available_backends():
        pytest.skip("needs the opencl backend")
    from opkernel.testing import isolated_registries

    with isolated_registries():
        _twice_op()
        f = ok.function(lambda x: ok.execute("FnTestTwice", x) + 1.0)
        with ok.use_backend("cpu"):
            f(ok.tensor(np.ones(2, F32)))
        with ok.use_backend("opencl"):
            x = ok.tensor(np.ones(2, F32))
            with pytest.raises(ok.errors.KernelNotFoundError, match="node 0 \\(op 'FnTestTwice'\\)"):
                f(x)
            with ok.kernel_fallback("cpu"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = f(x)
        assert out.backend == "opencl" and out.numpy().tolist() == [3.0, 3.0]
        assert ok.config.fallbacks.get(("FnTestTwice", "opencl", "cpu"), 0) >= 1


def test_a_kernel_label_chosen_while_tracing_is_kept_by_every_replay():
    from opkernel.testing import isolated_registries

    with isolated_registries(), ok.use_backend("cpu"):
        _twice_op()

        @ok.register_kernel("FnTestTwice", backend="cpu", label="ten")
        def ten(x, **attrs):
            return x * 10

        f = ok.function(lambda x: ok.execute("FnTestTwice", x))
        x = ok.tensor(np.ones(2, F32))
        with ok.kernel_label_map({"FnTestTwice": "ten"}):
            assert f(x).numpy().tolist() == [10.0, 10.0]
            assert f(x).numpy().tolist() == [10.0, 10.0]  # the node keeps its label
        assert f.concrete_functions[0].graph.nodes[0].label == "ten"
        # The label map keys the traces: outside it the default kernel runs, as eagerly.
        assert f(x).numpy().tolist() == [2.0, 2.0] and f.tracing_count == 2
        with ok.kernel_label_map({"FnTestTwice": "ten"}):
            assert f(x).numpy().tolist() == [10.0, 10.0] and f.tracing_count == 2
        g = ok.function(lambda x: ok.execute("FnTestTwice", x), input_signature=[ok.TensorSpec((2,), ok.float32)])
        assert g(x).numpy().tolist() == [2.0, 2.0]
        with ok.kernel_label_map({"FnTestTwice": "ten"}):
            assert g(x).numpy().tolist() == [10.0, 10.0]


def test_other_threads_run_eagerly_while_a_function_is_traced():
    import threading

    seen = []

    @ok.function
    def f(x):
        worker = threading.Thread(target=lambda: seen.append(ok.ops.neg(ok.tensor([1.0])).numpy().tolist()))
        worker.start()
        worker.join()
        return x + 1.0

    assert f(ok.tensor([1.0])).numpy().tolist() == [2.0]
    assert seen == [[-1.0]] and [n.op for n in f.concrete_functions[0].graph.nodes] == ["Add"]


def test_a_failed_trace_leaves_nothing_behind():
    @ok.function
    def f(x):
        with ok.GradientTape():
            ok.ops.neg(x)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        f(ok.tensor([1.0]))
    assert ok.engine.SLOW_SCOPES[0] == 0 and ok.engine.TRACER.get() is None
    assert ok.ops.neg(ok.tensor([1.0])).numpy().tolist() == [-1.0]


def test_outputs_sized_by_runtime_values_keep_the_engines_size_guard(backend):
    f = ok.function(lambda dims: ok.ops.fill(dims, 1.0), input_signature=[ok.TensorSpec((2,), ok.int64)])
    assert f(np.array([2, 3])).shape == (2, 3)
    with pytest.raises((InvalidArgumentError, ok.errors.ResourceExhaustedError), match="'Fill'"):
        f(np.array([2**31, 2**31]))
    g = ok.function(lambda x: ok.ops.pad(x, [[1, 1]]))  # sizes known while tracing: no guard needed
    assert g(ok.tensor(np.ones(3, F32))).numpy().tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_reduce_retracing_relaxes_the_dimensions_that_changed():
    f = ok.function(lambda x, k: ok.ops.sum(x, [1]) * float(k), reduce_retracing=True)
    for batch in (3, 7, 9, 2):
        x = _rand(batch, 4, seed=batch)
        np.testing.assert_allclose(f(ok.tensor(x), 2).numpy(), x.sum(1) * 2, rtol=1e-5)
    assert f.tracing_count == 2  # (3, 4), then (None, 4) for every other batch
    assert f.concrete_functions[-1].graph.inputs[0].shape == (None, 4)
    f(ok.tensor(_rand(3, 5)), 2)  # another width: relaxed to (None, None)
    f(ok.tensor(_rand(3, 4)), 3)  # another Python value: a trace of its own
    f(ok.tensor(np.ones((3, 4))), 2)  # another dtype: a trace of its own
    assert f.tracing_count == 5
    f(ok.tensor(_rand(8, 8)), 2)
    assert f.tracing_count == 5


def test_a_placeholder_kept_past_its_trace_is_a_clear_error_when_used(backend):
    leaked = []

    @ok.function
    def f(x):
        y = x * 2.0
        leaked.append(y)
        return y

    f(ok.tensor([1.0]))
    with pytest.raises(SymbolicTensorError, match="traced function 'f' was used outside its trace"):
        ok.ops.neg(leaked[0])
    with pytest.raises(SymbolicTensorError, match="has no value"):
        leaked[0].numpy()


def test_an_input_signature_may_nest_its_specs_as_the_arguments_are_nested():
    spec = ok.TensorSpec((None, 2), ok.float32)

    @ok.function(input_signature=[{"a": spec, "b": [spec, spec]}, spec])
    def f(d, x):
        return d["a"] + d["b"][0] * d["b"][1] + x

    ones = np.ones((3, 2), F32)
    out = f({"a": ones, "b": (ones * 2, ones * 3)}, ones)
    assert out.numpy().tolist() == [[8.0, 8.0]] * 3
    assert f({"a": ones[:1], "b": [ones[:1], ones[:1]]}, ones[:1]).shape == (1, 2) and f.tracing_count == 1
    with pytest.raises(InvalidArgumentError, match=r"expected \(\{'a': \*, 'b': \[\*, \*\]\}, \*\), got \(\{'a': \*, 'b': \[\*\]\}, \*\)"):
        f({"a": ones, "b": [ones]}, ones)
    with pytest.raises(ok.errors.OpTypeError, match="must hold ok.TensorSpecs"):
        ok.function(lambda x: x, input_signature=[[spec, (2, 3)]])


def test_variable_arguments_are_inputs_of_one_trace(backend):
    """Variables passed as arguments feed the trace on each call (TensorFlow's resource
    inputs): one trace for every Variable of a dtype and shape, which keeps none of them."""
    f = ok.function(lambda v, x: ok.ops.assign_add(v, x))
    a, b = ok.Variable(np.zeros(2, F32)), ok.Variable(np.ones(2, F32))
    x = ok.tensor(np.array([1.0, 2.0], F32))
    for _ in range(2):
        f(a, x)
    f(b, x)
    assert a.numpy().tolist() == [2.0, 4.0] and b.numpy().tolist() == [2.0, 3.0]
    assert f.tracing_count == 1
    assert not any(isinstance(v, ok.Variable) for cf in f.concrete_functions for v in cf.graph.variables)
    bound = f.get_concrete_function(a, x)
    assert bound.graph.variables == [a]
    bound(x)
    assert a.numpy().tolist() == [3.0, 6.0] and f.tracing_count == 1
    with pytest.raises(ok.errors.InvalidArgumentError, match="takes 1 Variable argument"):
        f.concrete_functions[0](x)
    c = ok.Variable(np.zeros(3, F32))
    f(c, ok.tensor(np.ones(3, F32)))       # another shape: another trace
    assert f.tracing_count == 2 and c.numpy().tolist() == [1.0, 1.0, 1.0]


def test_variable_arguments_are_not_kept_alive(backend):
    """100 Variables passed to an ok.function made 100 traces that kept every Variable (and
    its memory) alive; now one trace, and each Variable is freed when the caller drops it."""
    import gc
    import weakref

    f = ok.function(lambda v: ok.ops.assign_add(v, ok.ops.ones_like(v)))
    refs = []
    for _ in range(100):
        v = ok.Variable(np.zeros(1000, F32))
        f(v)
        assert v.numpy()[0] == 1.0
        refs.append(weakref.ref(v))
        del v
    gc.collect()
    assert f.tracing_count == 1
    assert sum(r() is not None for r in refs) == 0


def test_variable_arguments_keep_their_aliasing_and_closures(backend):
    """A trace where two arguments are one Variable is not the trace of two Variables, and a
    Variable the function closes over stays its own even when it is also passed."""
    g = ok.Variable(np.full(2, 10.0, F32))

    def step(v, w):
        ok.ops.assign_add(v, ok.ops.ones_like(v))
        ok.ops.assign_add(w, ok.ops.ones_like(w))
        return ok.ops.add(g, 0.0)

    f = ok.function(step)
    a, b = ok.Variable(np.zeros(2, F32)), ok.Variable(np.zeros(2, F32))
    f(a, a)
    f(a, b)
    assert a.numpy().tolist() == [3.0, 3.0] and b.numpy().tolist() == [1.0, 1.0]
    assert f.tracing_count == 2
    out = f(g, b)                            # g is an argument and the captured global
    assert g.numpy().tolist() == [11.0, 11.0] and out.numpy().tolist() == [11.0, 11.0]
    h = ok.Variable(np.zeros(2, F32))
    out = f(h, b)                            # the global is still g, the argument is h
    assert h.numpy().tolist() == [1.0, 1.0] and out.numpy().tolist() == [11.0, 11.0]


def test_variable_arguments_under_a_tape(backend):
    """Under a GradientTape the replay runs node by node on the Variables given."""
    f = ok.function(lambda v, x: ok.ops.sum(ok.ops.mul(v, x), [0]))
    a = ok.Variable(np.array([1.0, 2.0], F32))
    b = ok.Variable(np.array([3.0, 4.0], F32))
    x = ok.tensor(np.array([5.0, 6.0], F32))
    for v in (a, b):
        with ok.GradientTape() as tape:
            y = f(v, x)
        assert tape.gradient(y, v).numpy().tolist() == [5.0, 6.0]
    assert f(b, x).numpy() == 39.0 and f.tracing_count == 1


# ---------------------------------------------------------------- random programs: replay == eager

# Every value keeps the shape (3, 2): the programs mix elementwise ops, broadcasts and products.
_UNARY = [ok.ops.neg, ok.ops.tanh, ok.ops.relu, ok.ops.square, lambda t: t - ok.ops.sum(t, [1], keep_dims=True)]
_BINARY = [ok.ops.add, ok.ops.sub, ok.ops.mul, ok.ops.maximum, lambda a, b: ok.ops.mat_mul(ok.ops.mat_mul(a, b, transpose_b=True), a)]
_STEP = st.tuples(st.booleans(), st.integers(0, 4), st.integers(0, 63), st.integers(0, 63))


def _program(steps, x, y):
    values = [x, y, x * 0.5]
    for binary, op, i, j in steps:
        a, b = values[i % len(values)], values[j % len(values)]
        values.append(_BINARY[op](a, b) if binary else _UNARY[op](a))
    return values[-1], values[len(values) // 2]


@settings(max_examples=25, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_STEP, min_size=1, max_size=12))
def test_random_programs_replay_as_they_run_eagerly(steps):
    with ok.use_backend("cpu"):
        x, y = ok.tensor(_rand(3, 2)), ok.tensor(_rand(3, 2, seed=1))
        want = _program(steps, x, y)
        f = ok.function(lambda x, y: _program(steps, x, y))
        for _ in range(2):
            got = f(x, y)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
        grads = []
        for fn in (f, lambda x, y: _program(steps, x, y)):  # a tape across the replay, and eagerly
            with ok.GradientTape() as tape:
                tape.watch([x, y])
                loss = ok.ops.sum(ok.ops.tanh(fn(x, y)[0]), [0, 1])
            grads.append(tape.gradient(loss, [x, y]))

        def inside(x, y):  # the tape inside: the gradient functions are traced too
            with ok.GradientTape() as tape:
                tape.watch([x, y])
                loss = ok.ops.sum(ok.ops.tanh(_program(steps, x, y)[0]), [0, 1])
            return tape.gradient(loss, [x, y])

        grads.append(ok.function(inside)(x, y))
        for g, w, t in zip(*grads):
            assert (g is None) == (w is None) == (t is None)
            if g is not None:
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
                np.testing.assert_allclose(t.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)


def test_a_traced_adam_step_advances_its_bias_correction_on_every_replay(backend):
    """Adam's step count is graph state: six replays of a traced step equal six eager steps."""
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    x = ok.tensor(rng.standard_normal((5, 4)).astype(np.float32))

    def train(traced: bool) -> np.ndarray:
        w = ok.Variable(ok.tensor(w0))
        opt = ok.nn.Adam(0.1)

        def step(x):
            with ok.GradientTape() as tape:
                loss = ok.ops.sum(ok.ops.square(ok.ops.mat_mul(x, w)), axis=[0, 1])
            opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
            return loss

        f = ok.function(step) if traced else step
        for _ in range(6):
            f(x)
        return w.numpy().copy()

    eager, traced = train(False), train(True)
    assert not np.allclose(eager, w0)
    np.testing.assert_allclose(traced, eager, rtol=1e-6, atol=1e-6)


def test_flatten_traces_with_an_unknown_batch(backend):
    layer = ok.nn.Flatten()
    f = ok.function(layer, input_signature=[ok.TensorSpec((None, 2, 3), ok.float32)])
    for n in (1, 4):
        x = np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3)
        np.testing.assert_array_equal(f(ok.tensor(x)).numpy(), x.reshape(n, 6))


# ---------------------------------------------------------------- trace-time state is never baked in


def test_read_value_in_a_trace_reads_the_variable_on_every_replay(backend):
    w = ok.Variable(np.array([1.0, 2.0], F32))

    @ok.function
    def f(x):
        before = w.read_value()
        w.assign(x)
        return before, w.read_value()

    for new in ([5.0, 6.0], [7.0, 8.0]):
        old = w.numpy().tolist()
        before, after = f(ok.tensor(np.array(new, F32)))
        assert before.numpy().tolist() == old and after.numpy().tolist() == new
    assert f.tracing_count == 1


def test_a_variables_numpy_value_while_tracing_is_an_error_not_a_constant():
    w = ok.Variable(np.array([1.0, 2.0], F32), name="w")
    f = ok.function(lambda x: x + w.numpy())
    with pytest.raises(SymbolicTensorError, match="variable 'w'.*read_value"):
        f(ok.tensor(np.zeros(2, F32)))
    with pytest.raises(SymbolicTensorError, match="variable 'w'"):
        ok.function(lambda x: x + np.asarray(w))(ok.tensor(np.zeros(2, F32)))
    shown = []
    ok.function(lambda x: shown.append(repr(w)) or x)(ok.tensor(np.zeros(2, F32)))  # repr still works
    assert shown[0].startswith("ok.Variable(") and "'w'" in shown[0]
    assert w.numpy().tolist() == [1.0, 2.0]  # eagerly, as ever


@pytest.mark.parametrize("zero, negative", [(np.float32(0.0), np.float32(-0.0)), (0.0, -0.0)])
def test_python_and_numpy_scalars_that_compare_equal_but_differ_trace_apart(zero, negative):
    f = ok.function(lambda x, s: x * s)
    with ok.use_backend("cpu"):  # the cuda backend loses the sign of a scalar -0.0
        x = ok.tensor(np.ones(1, F32))
        f(x, zero)
        assert np.signbit(f(x, negative).numpy()[0]) and not np.signbit(f(x, zero).numpy()[0])
        nan = np.float32("nan")
        f(x, nan)
        f(x, np.float32("nan"))
    assert f.tracing_count == 3  # equal NaNs share a trace


@pytest.mark.parametrize("make", [lambda: ok.nn.SGD(0.1), lambda: ok.nn.SGD(0.1, momentum=0.5), lambda: ok.nn.Adam(0.1)])
def test_optimizer_hyperparameters_set_after_tracing_are_used_by_replays(make):
    def train(traced: bool) -> np.ndarray:
        w = ok.Variable(np.array([1.0, -2.0], F32))
        opt = make()

        def step(x):
            with ok.GradientTape() as tape:
                loss = ok.ops.sum(ok.ops.square(w * x), [0])
            opt.apply_gradients([(tape.gradient(loss, w), w)])

        f = ok.function(step) if traced else step
        x = ok.tensor(np.array([1.0, 0.5], F32))
        for lr in (0.1, 0.01, 0.3):
            opt.learning_rate = lr
            if isinstance(opt, ok.nn.Adam):
                opt.beta1 = lr * 2
            else:
                opt.momentum = opt.momentum and lr
            f(x)
            f(x)
        return w.numpy().copy()

    np.testing.assert_allclose(train(True), train(False), rtol=1e-5, atol=1e-6)


def test_gradients_traced_with_unknown_dimensions_equal_eagers(backend):
    """Which axes broadcasting stretched, a mean's count and a reshape's shape are known only
    when the graph runs: a (1, 3) input broadcast against (4, 3) gets a (1, 3) gradient."""

    def grads(a, b):
        with ok.GradientTape() as tape:
            tape.watch([a, b])
            y = ok.ops.mean(ok.ops.square(a * b - b), [0, 1]) + ok.ops.sum(ok.ops.reshape(a, [-1]) * 2.0, [0])
            y = y + ok.ops.sum(ok.ops.sum(ok.ops.tanh(a + b), [1]), [0])
        return tape.gradient(y, [a, b])

    spec = ok.TensorSpec((None, 3), ok.float32)
    traced = ok.function(grads, input_signature=[spec, spec])
    for n, m in ((4, 1), (1, 4), (4, 4), (1, 1)):
        a, b = ok.tensor(_rand(n, 3, seed=n)), ok.tensor(_rand(m, 3, seed=m + 9))
        for got, want in zip(traced(a, b), grads(a, b)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert traced.tracing_count == 1


def test_a_graph_returning_a_variable_inlined_into_a_trace_returns_its_value_then():
    v = ok.Variable(np.array([1.0, 2.0], F32))
    inner = ConcreteFunction(Graph(
        inputs=[TensorSpec((2,), ok.float32)], nodes=[], outputs=[Edge("var", 0)], output_structure=0,
        constants=[], variables=[v], variable_names=["v"],
    ))

    @ok.function
    def outer(x):
        before = inner(x)
        v.assign_add(x)
        return before, inner(x)

    before, after = outer(ok.tensor(np.ones(2, F32)))
    assert before.numpy().tolist() == [1.0, 2.0] and after.numpy().tolist() == [2.0, 3.0]


def test_an_embedding_gradient_traced_with_an_unknown_batch_equals_eagers():
    rng = np.random.default_rng(5)
    table = ok.Variable(rng.standard_normal((10, 4)).astype(F32))

    def grad(ids):
        with ok.GradientTape() as tape:
            loss = ok.ops.sum(ok.ops.square(ok.ops.gather_v2(table, ids, 0)), [0, 1])
        return tape.gradient(loss, table)

    for spec in ((None,), (None, None)):
        traced = ok.function(grad, input_signature=[ok.TensorSpec(spec, ok.int32)])
        for n in (1, 5):
            ids = ok.tensor(rng.integers(0, 10, (n,) + (3,) * (len(spec) - 1)).astype(np.int32))
            np.testing.assert_allclose(traced(ids).numpy(), grad(ids).numpy(), rtol=1e-6)


def test_convolution_and_pooling_gradients_traced_with_an_unknown_batch_equal_eagers():
    rng = np.random.default_rng(6)
    w = ok.Variable(rng.standard_normal((3, 3, 2, 4)).astype(F32))

    def grads(x):
        with ok.GradientTape() as tape:
            tape.watch(x)
            y = ok.ops.relu(ok.ops.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME"))
            y = ok.ops.avg_pool(y, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
            loss = ok.ops.sum(ok.ops.square(y), [0, 1, 2, 3])
        return tape.gradient(loss, [x, w])

    traced = ok.function(grads, input_signature=[ok.TensorSpec((None, 6, 6, 2), ok.float32)])
    for n in (1, 3):
        x = ok.tensor(rng.standard_normal((n, 6, 6, 2)).astype(F32))
        for got, want in zip(traced(x), grads(x)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_concat_slice_and_pad_gradients_traced_with_an_unknown_batch_equal_eagers():
    def grads(a, b):
        with ok.GradientTape() as tape:
            tape.watch([a, b])
            c = ok.ops.concat_v2([a, b], 1)
            middle = ok.ops.strided_slice(c, np.array([0, 1], np.int32), np.array([0, 4], np.int32),
                                          np.array([1, 1], np.int32), begin_mask=1, end_mask=1)
            y = ok.ops.pad(middle, np.array([[0, 1], [2, 0]], np.int32))
            y = ok.ops.slice(y, np.array([0, 1], np.int32), np.array([-1, 3], np.int32))
            loss = ok.ops.sum(ok.ops.square(y), [0, 1])
        return tape.gradient(loss, [a, b])

    traced = ok.function(grads, input_signature=[ok.TensorSpec((None, 2), ok.float32), ok.TensorSpec((None, 3), ok.float32)])
    for n in (1, 4):
        a, b = ok.tensor(_rand(n, 2, seed=n)), ok.tensor(_rand(n, 3, seed=n + 1))
        for got, want in zip(traced(a, b), grads(a, b)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_a_forward_edge_in_a_long_chain_is_a_graph_error_not_a_recursion_error():
    f32 = ok.float32
    n = 5000
    nodes = [Node("Neg", {"T": f32}, [Edge("input", 0) if i == 0 else Edge("node", i - 1)], [TensorSpec((2,), f32)])
             for i in range(n)]
    nodes[0].inputs[0] = Edge("node", n - 1)  # node 0 reads the last node: a cycle through all of them
    graph = Graph(inputs=[TensorSpec((2,), f32)], nodes=nodes, outputs=[Edge("node", n - 1)], output_structure=0)
    with pytest.raises(GraphError, match=r"closes a cycle \(each node reads the next\): node 4999 \('Neg'\) -> "
                       r"node 0 \('Neg'\) -> .* -> node 3 \('Neg'\) -> \.\.\. \(4993 more nodes\) -> .* -> node 4999 "
                       r"\('Neg'\)$"):
        graph.validate()


def test_a_gradient_through_a_variable_updated_since_is_refused_inside_a_trace_as_eagerly():
    v = ok.Variable(np.array([2.0, 3.0], F32))

    def fn(x):
        with ok.GradientTape() as tape:
            tape.watch(x)
            y = x * v
        v.assign_add(np.array([10.0, 10.0], F32))
        return tape.gradient(y, x)  # would read v after the update: x's gradient would be 12, 13

    x = ok.tensor(np.ones(2, F32))
    for f in (fn, ok.function(fn)):
        version = v._version
        with pytest.raises(InvalidArgumentError, match="updated in place after the op ran"):
            f(x)
        assert v._version == version + (f is fn)  # tracing updates nothing, versions included


def _compile_opcodes(n: int) -> int:
    """Bytecode instructions the replay compiler (opkernel._replay._compile) runs for a chain of
    n Adds: a count, not a time, so the same on any machine."""
    import sys

    from opkernel import _replay, engine

    cf = ok.function(lambda x: _chain(x, n)).get_concrete_function(ok.TensorSpec([2], "float32"))
    count = [0]
    target = _replay.__file__

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            count[0] += 1
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename == target:
            frame.f_trace_opcodes = True
            return local
        return None

    be = engine.backend_instance("cpu")
    sys.settrace(calls)
    try:
        _replay._compile(cf, be)
    finally:
        sys.settrace(None)
    return count[0]


def _chain(x: Any, n: int) -> Any:
    for _ in range(n):
        x = ok.ops.add(x, x)
    return x


def test_compiling_a_replay_is_linear_in_its_nodes() -> None:
    """Four times the nodes, about four times the work (a scan of every name per node made
    the first call quadratic: 6000 nodes took 5.9 s, 1500 took 0.49 s)."""
    small, large = _compile_opcodes(300), _compile_opcodes(1200)
    assert large < 6 * small, (small, large)


def test_saving_a_trace_with_variable_arguments(tmp_path):
    """A saved graph holds its Variables' values: the trace fed Variables is saved bound to some."""
    f = ok.function(lambda v, x: ok.ops.add(v, x))
    a = ok.Variable(np.array([1.0, 2.0], F32))
    x = ok.tensor(np.array([5.0, 6.0], F32))
    f(a, x)
    with pytest.raises(ok.errors.InvalidArgumentError, match="takes Variables as arguments"):
        ok.save(f, tmp_path / "f.okg")
    ok.save(f.get_concrete_function(a, x), tmp_path / "bound.okg")
    loaded = ok.load(tmp_path / "bound.okg")
    assert loaded(x).numpy().tolist() == [6.0, 8.0]


def test_a_variable_argument_the_function_does_not_use(backend):
    f = ok.function(lambda v, w, x: ok.ops.add(x, ok.ops.mul(w, 2.0)))
    a, b = ok.Variable(np.ones(2, F32)), ok.Variable(np.full(2, 3.0, F32))
    x = ok.tensor(np.zeros(2, F32))
    assert f(a, b, x).numpy().tolist() == [6.0, 6.0] and f(b, a, x).numpy().tolist() == [2.0, 2.0]
    with ok.GradientTape() as tape:
        y = f(a, b, x)
    assert tape.gradient(y, b).numpy().tolist() == [2.0, 2.0] and f.tracing_count == 1
