"""ok.function's elementwise fusion (opkernel._fusion, Backend.fuse_elementwise): which
nodes are grouped, that a group never moves a read across a Variable update or a value
past its reader, and that fused results are bit-identical to the unfused replay's: the CPU
backend's groups run numpy's own inner loops, OpenCL's generated kernel evaluates each
op's own expression in turn.  CUDA does not fuse (its graphs replay node by node)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import opkernel as ok
from opkernel.shapes import broadcast_layout as layout
from opkernel.errors import OpTypeError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("opkernel_cpu") is None, reason="needs the cpu backend")

RNG = np.random.default_rng(11)


def gelu(x):
    """GELU composed of elementwise ops, as ok.nn.gelu was before the Gelu op: five fusable nodes."""
    return x * 0.5 * (ok.ops.erf(x * (1.0 / math.sqrt(2.0))) + 1.0)


@pytest.fixture(autouse=True)
def on_cpu():
    """Tensors made in a test live on cpu, where the fusion is (one test also uses opencl)."""
    with ok.use_backend("cpu"):
        yield


def _plan(f, be="cpu"):
    cf = f.concrete_functions[-1]
    return cf._plans[ok.engine.backend_instance(be)]


def _groups(f, be="cpu"):
    return [g.ops for g in _plan(f, be).groups]


@pytest.fixture
def no_fusion():
    ok.config.graph_fusion = False
    try:
        yield
    finally:
        ok.config.graph_fusion = True


def _both(fn, *args, be="cpu"):
    """fn traced with fusion and without (each its own ok.function), on ``be``."""
    with ok.use_backend(be):
        fused = ok.function(fn)
        a = fused(*args)
        ok.config.graph_fusion = False
        try:
            plain = ok.function(fn)
            b = plain(*args)
        finally:
            ok.config.graph_fusion = True
    return fused, a, b


def test_layouts():
    assert layout((4, 5), (4, 5)) == (1, 20)
    assert layout((), (4, 5)) == (1, 1) and layout((1, 1), (4, 5)) == (1, 1)
    assert layout((5,), (4, 5)) == (1, 5)  # a row
    assert layout((4, 1), (4, 5)) == (5, 4)  # a column
    assert layout((3, 1), (2, 3, 7)) == (7, 3)  # a middle run
    assert layout((2, 1, 7), (2, 3, 7)) is None  # kept axes around a broadcast one
    assert layout((6,), (4, 5)) is None  # does not broadcast
    assert layout((1, 4, 5), (4, 5)) is None  # a higher rank: the result would have it too
    assert layout((1, 5), (1, 1, 5)) == (1, 5)  # axes of size 1 in the result are neither


def test_gelu_is_one_group_and_bit_identical():
    x = ok.tensor((RNG.standard_normal((300, 70)) * 3).astype(np.float32))
    f, a, b = _both(gelu, x)
    assert _groups(f) == [["Mul", "Mul", "Erf", "Add", "Mul"]]
    assert np.array_equal(a.numpy(), b.numpy())
    assert np.array_equal(a.numpy(), gelu(x).numpy())  # and eager's
    assert np.array_equal(a.numpy(), ok.nn.gelu(x).numpy())  # and the Gelu op's native kernel


def test_graph_fusion_off_replays_node_by_node(no_fusion):
    f = ok.function(gelu)
    with ok.use_backend("cpu"):
        f(ok.tensor(np.ones((4, 4), np.float32)))
    assert _groups(f) == []


def test_broadcast_inputs_and_several_outputs():
    x = ok.tensor(RNG.standard_normal((6, 70, 33)).astype(np.float32))
    row = ok.tensor(RNG.standard_normal(33).astype(np.float32))
    col = ok.tensor(RNG.standard_normal((6, 70, 1)).astype(np.float32))

    def fn(x, row, col):
        centered = x - col
        scaled = centered * row + 1.5
        return ok.ops.exp(scaled * -0.1), centered  # centered also leaves the group

    f, a, b = _both(fn, x, row, col)
    assert _groups(f) == [["Sub", "Mul", "Add", "Mul", "Exp"]]
    group = _plan(f).groups[0]
    assert group.layouts[:3] == [(1, x.numpy().size), (33, 420), (1, 33)] and len(group.outputs) == 2
    for u, v in zip(a, b):
        assert np.array_equal(u.numpy(), v.numpy())


def test_a_reader_of_the_group_closes_it_first():
    x = ok.tensor(RNG.standard_normal((50, 8)).astype(np.float32))

    def fn(x):
        y = ok.ops.tanh(x * 2.0)
        s = ok.ops.sum(y, [1], keep_dims=True)  # reads the group: it runs before Sum
        return (y + 1.0) * s

    f, a, b = _both(fn, x)
    assert _groups(f) == [["Mul", "Tanh"], ["Add", "Mul"]]
    assert np.array_equal(a.numpy(), b.numpy())


def test_no_read_moves_across_a_variable_update():
    v = ok.Variable(np.full((16, 16), 2.0, np.float32))
    one = ok.tensor(np.ones((16, 16), np.float32))
    x = ok.tensor(RNG.standard_normal((16, 16)).astype(np.float32))

    def fn(x):
        before = x * v  # reads v before the update
        ok.ops.assign_add(v, one)
        after = x * v  # and after it
        return before + after

    with ok.use_backend("cpu"):
        f = ok.function(fn)
        got = f(x).numpy()  # v: 2 then 3
        v.assign(ok.tensor(np.full((16, 16), 2.0, np.float32)))
        want = fn(x).numpy()
    assert np.array_equal(got, want)
    np.testing.assert_allclose(got, x.numpy() * 5, rtol=1e-6)
    assert _groups(f) == [["Mul", "Add"]]  # the first Mul stands alone: the update closed its group


def test_unrelated_nodes_of_the_shape_join_and_others_run_before():
    x = ok.tensor(RNG.standard_normal((40, 40)).astype(np.float32))
    m = ok.tensor(RNG.standard_normal((40, 40)).astype(np.float32))

    def fn(x, m):
        a = x * 3.0
        p = ok.ops.mat_mul(m, m)  # reads nothing of the group: runs before its call
        b = ok.ops.neg(a) + p  # reads p and the group: joins
        return b

    f, a, b = _both(fn, x, m)
    assert _groups(f) == [["Mul", "Neg", "Add"]]
    assert np.array_equal(a.numpy(), b.numpy())


def test_unknown_shapes_and_other_dtypes_are_not_fused():
    spec = [ok.TensorSpec([None, 8], "float32")]
    f = ok.function(gelu, input_signature=spec)
    with ok.use_backend("cpu"):
        x = RNG.standard_normal((5, 8)).astype(np.float32)
        np.testing.assert_array_equal(f(ok.tensor(x)).numpy(), gelu(ok.tensor(x)).numpy())
    assert _groups(f) == []
    g = ok.function(lambda a: (a * a + a) * 3)
    with ok.use_backend("cpu"):
        ints = ok.tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
        assert np.array_equal(g(ints).numpy(), (np.arange(12).reshape(3, 4) ** 2 + np.arange(12).reshape(3, 4)) * 3)
    assert _groups(g) == []  # int32: not a fusable type on cpu


def test_a_group_falls_back_to_the_ufuncs_for_arrays_the_native_code_cannot_take():
    x = ok.tensor(RNG.standard_normal((30, 30)).astype(np.float32))
    f = ok.function(gelu)
    with ok.use_backend("cpu"):
        f(x)
    runner = _plan(f).groups[0].runner
    strided = np.asfortranarray(x.numpy())
    consts = [np.array(v, np.float32) for v in (0.5, 1 / math.sqrt(2), 1.0)]
    (out,) = runner(strided, *consts)
    assert out.flags.c_contiguous and np.array_equal(out, gelu(x).numpy())


def test_config_is_checked_and_toggling_rebinds():
    with pytest.raises(OpTypeError, match="graph_fusion must be a bool"):
        ok.config.graph_fusion = 1
    x = ok.tensor(np.ones((8, 8), np.float32))
    f = ok.function(gelu)
    with ok.use_backend("cpu"):
        f(x)
        assert _groups(f)
        ok.config.graph_fusion = False
        try:
            f(x)
            assert _groups(f) == []
        finally:
            ok.config.graph_fusion = True
        f(x)
        assert _groups(f)


def test_gradients_of_a_traced_function_are_unchanged():
    x = ok.Variable(RNG.standard_normal((20, 20)).astype(np.float32))
    f = ok.function(lambda: ok.ops.sum(gelu(x), [0, 1]))
    with ok.use_backend("cpu"):
        f()
        with ok.GradientTape() as tape:
            y = f()  # a recording tape replays node by node
        (g,) = tape.gradient(y, [x])
        with ok.GradientTape() as tape:
            y2 = ok.ops.sum(gelu(x), [0, 1])
        (g2,) = tape.gradient(y2, [x])
    assert np.array_equal(g.numpy(), g2.numpy())


def _transformer_losses_with_and_without_fusion(be):
    """Two training steps of a small transformer LM (examples/transformer_lm.py), traced,
    with fusion and without: the losses, each way."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    try:
        import transformer_lm as lm
    finally:
        sys.path.pop(0)
    cfg = lm.Config(batch=4, context=16, d_model=32, layers=1)
    w = lm.initial_weights(cfg)
    losses = []
    with ok.use_backend(be):
        data = lm.batches(cfg)
        batches = [data() for _ in range(2)]
        for fused in (True, False):
            ok.config.graph_fusion = fused
            try:
                step = lm.opkernel_step(cfg, w, traced=True)
                losses.append([float(step(x, y).numpy()) for x, y in batches])
            finally:
                ok.config.graph_fusion = True
    return losses


def test_transformer_training_is_bit_identical_with_and_without_fusion():
    fused, plain = _transformer_losses_with_and_without_fusion("cpu")
    assert fused == plain


def _opencl():
    if "opencl" not in ok.available_backends():
        pytest.skip("opencl is not available here")


def test_opencl_fuses_into_one_generated_kernel_with_the_ops_expressions():
    _opencl()
    x = (RNG.standard_normal((6, 70, 33)) * 3).astype(np.float32)
    row = RNG.standard_normal(33).astype(np.float32)
    col = RNG.standard_normal((6, 70, 1)).astype(np.float32)

    def fn(x, row, col):
        centered = x - col
        return gelu(centered * row + 1.5), centered

    with ok.use_backend("opencl"):
        args = [ok.tensor(v) for v in (x, row, col)]
        f, a, b = _both(fn, *args, be="opencl")
    assert _groups(f, "opencl") == [["Sub", "Mul", "Add", "Mul", "Mul", "Erf", "Add", "Mul"]]
    for u, v in zip(a, b):  # the same expressions on the same float values: the same bits
        assert np.array_equal(u.numpy(), v.numpy())
    np.testing.assert_allclose(a[0].numpy(), fn(*[ok.tensor(v) for v in (x, row, col)])[0].numpy(), rtol=2e-6, atol=1e-6)


def test_opencl_fused_source_reads_each_input_through_its_layout():
    _opencl()
    from opkernel.backend import ElementwiseProgram
    from opkernel_opencl.elementwise import fused_source, spec_of

    program = ElementwiseProgram(
        dtype=ok.as_dtype("float32"), shape=(4, 6), layouts=((1, 24), (1, 1), (1, 6), (6, 4)),
        instructions=((None, (0, 1)), (None, (4, 2)), (None, (5, 3)), (None, (6,))), outputs=(7, 4),
        ops=("Mul", "Mul", "Mul", "Exp"),
    )
    src = fused_source(program, [spec_of("Mul")] * 3 + [spec_of("Exp")])
    # whole-shape inputs and the outputs at the long index gi, the broadcast ones through int i
    assert "long gi = get_global_id(0); int i = (int)gi;" in src
    assert "T s0 = x0[gi];" in src and "T s1 = x1[0];" in src and "T s2 = x2[i % 6];" in src
    assert "T s3 = x3[(i / 6) % 4];" in src and "o0[gi] = s7;" in src and "o1[gi] = s4;" in src
    assert "s5 = (T)(a * b)" in src and "s7 = (T)(exp(a))" in src


def test_opencl_transformer_training_is_bit_identical_with_and_without_fusion():
    _opencl()
    fused, plain = _transformer_losses_with_and_without_fusion("opencl")
    assert fused == plain


def test_profiles_show_fused_groups_with_their_ops():
    x = ok.tensor(RNG.standard_normal((64, 64)).astype(np.float32))
    f = ok.function(lambda x: ok.ops.mat_mul(gelu(x), x))
    f(x)
    with ok.profile() as prof:
        got = f(x)
    ops = {row[1]: row[2] for row in prof.rows()}
    assert ops == {"Fused(Mul+Mul+Erf+Add+Mul)": 1, "MatMul": 1}
    assert np.array_equal(got.numpy(), f(x).numpy())


# ---------------------------------------------------------------- planned memory


def _split_groups(x, v):
    a = ok.ops.exp(x) * 2.0  # group 1, of x's shape
    z = ok.ops.exp(v) * 3.0  # group 2, another shape: closes group 1
    b = ok.ops.tanh(a) * a + 1.0  # group 3 reads a, which dies there
    return b, z


def test_a_group_writes_its_result_into_an_input_that_dies_there(monkeypatch):
    x = ok.tensor(RNG.standard_normal((64, 64)).astype(np.float32))
    v = ok.tensor(RNG.standard_normal((32,)).astype(np.float32))
    x_before = x.numpy().copy()
    f = ok.function(_split_groups)
    got = f(x, v)
    plan = _plan(f)
    assert [g.ops for g in plan.groups] == [["Exp", "Mul"], ["Exp", "Mul"], ["Tanh", "Mul", "Add"]]
    assert [g.donated for g in plan.groups] == [[], [], [0]]
    assert plan.groups[2].runner.reuse == [0]  # its one output goes into a's array
    from opkernel_cpu import fusion

    calls = []
    real = fusion._writable

    def spy(a, shape, dtype):
        out = real(a, shape, dtype)
        calls.append(out is a)
        return out

    monkeypatch.setattr(fusion, "_writable", spy)
    again = f(x, v)
    assert calls == [True]
    ok.config.buffer_reuse = False
    try:
        plain = ok.function(_split_groups)
        want = plain(x, v)
        assert all(g.donated == [] for g in _plan(plain).groups)
    finally:
        ok.config.buffer_reuse = True
    for a, b, c in zip(got, again, want):
        assert np.array_equal(a.numpy(), c.numpy()) and np.array_equal(b.numpy(), c.numpy())
    assert np.array_equal(x.numpy(), x_before)  # the caller's input is never written


@pytest.mark.parametrize("case", ["returned", "other-reader", "view", "input", "later-reader"])
def test_values_that_are_seen_elsewhere_are_never_donated(case):
    x = ok.tensor(RNG.standard_normal((16, 16)).astype(np.float32))
    v = ok.tensor(RNG.standard_normal((8,)).astype(np.float32))

    def fn(x, v):
        a = ok.ops.exp(x) * 2.0
        z = ok.ops.exp(v) * 3.0
        extra = []
        if case == "returned":
            extra = [a]  # the caller sees a
        elif case == "other-reader":
            extra = [ok.ops.sum(a, [0, 1])]  # a kernel that is not elementwise reads a too
        elif case == "view":
            a = ok.ops.reshape(a, [16, 16])  # a view of group 1's array reaches group 3
        elif case == "input":
            a = x  # the function's own argument
        b = ok.ops.tanh(a) * a + 1.0
        if case == "later-reader":  # elementwise readers of a after group 3's call
            w = a * np.full((2, 16, 16), 0.5, np.float32)  # of another shape: closes group 3
            extra = [w]
        return [b, z, *extra]

    f = ok.function(fn)
    got = f(x, v)
    last = [g for g in _plan(f).groups if g.ops[-2:] == ["Mul", "Add"] and g.ops[0] == "Tanh"]
    assert len(last) == 1 and last[0].donated == [], [(g.ops, g.donated) for g in _plan(f).groups]
    with _no_reuse():
        want = ok.function(fn)(x, v)
    for a, b in zip(got, want):
        assert np.array_equal(a.numpy(), b.numpy())


class _no_reuse:
    def __enter__(self):
        ok.config.buffer_reuse = False

    def __exit__(self, *exc):
        ok.config.buffer_reuse = True


def test_buffer_reuse_is_checked_and_toggling_rebinds():
    with pytest.raises(OpTypeError, match="buffer_reuse must be a bool"):
        ok.config.buffer_reuse = "no"
    x = ok.tensor(np.ones((8, 8), np.float32))
    v = ok.tensor(np.ones((4,), np.float32))
    f = ok.function(_split_groups)
    f(x, v)
    assert _plan(f).groups[2].donated == [0]
    with _no_reuse():
        f(x, v)
        assert _plan(f).groups[2].donated == []
    f(x, v)
    assert _plan(f).groups[2].donated == [0]
