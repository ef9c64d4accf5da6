"""ok.dask.apply: every partitioning rule, chunked in several ways, equals the op run
on the whole array, on Dask's threaded scheduler and on a 2-process LocalCluster;
a killed worker's chunks are rescheduled; an array larger than a worker's memory
limit spills and completes while the client holds none of it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import opkernel as ok  # noqa: E402
from opkernel.dask import rules as dask_rules  # noqa: E402

# ---------------------------------------------------------------- where chunks run

#: Dask's threaded scheduler and the process cluster (its workers on cpu); OpenCL runs in
#: test_threaded_on_opencl and test_workers_pick_their_backend_and_build_each_call_once.
WHERE = ["threads", "cluster"]
#: The cluster's worker memory limit: the spill test's array is larger.
WORKER_MEMORY = 48 * 2**20


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    import dask

    # Past the limit a worker spills to disk; it neither pauses nor is restarted (a
    # worker process holds more than 48 MiB of libraries before it holds any data).
    limits = {
        "distributed.worker.memory.target": 0.3,
        "distributed.worker.memory.spill": False,
        "distributed.worker.memory.pause": False,
        "distributed.worker.memory.terminate": False,
    }
    # (Held while the cluster lives: a nanny restarting a killed worker reads it again.)
    with dask.config.set(limits):
        cluster = distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, memory_limit=WORKER_MEMORY, dashboard_address=":0"
        )
        c = distributed.Client(cluster, set_as_default=False)
        c.register_plugin(ok.dask.BackendPlugin("cpu"))
        try:
            yield c
        finally:
            c.close()
            cluster.close()


Case = tuple[str, tuple[Any, ...], tuple[Any, ...], dict[str, Any]]


class Runner:
    """Runs cases ``(op, inputs, chunks, attrs)`` through ok.dask.apply (all of them in
    one compute) and through the op on whole arrays, on the same backend; ``chunks``
    gives each array input's chunks (None: passed as it is)."""

    def __init__(self, client: Any, backend: str = "cpu") -> None:
        self.client = client
        self.backend = backend

    def many(self, cases: list[Case]) -> list[tuple[np.ndarray, np.ndarray]]:
        ys, wants = [], []
        with ok.use_backend(self.backend):
            for op, inputs, chunks, attrs in cases:
                padded = list(chunks) + [None] * (len(inputs) - len(chunks))
                xs = [x if ch is None else da.from_array(x, chunks=ch) for x, ch in zip(inputs, padded)]
                ys.append(ok.dask.apply(op, *xs, **attrs))
                wants.append(ok.execute(op, *inputs, **attrs).numpy())
            if self.client is None:
                import dask

                gots = dask.compute(*ys, scheduler="threads")
            else:
                gots = self.client.gather(self.client.compute(ys))
        for y, got, want, case in zip(ys, gots, wants, cases):
            assert y.shape == want.shape and y.dtype == want.dtype, (case[0], case[3], y, want.shape, want.dtype)
            assert got.shape == want.shape and got.dtype == want.dtype, (case[0], case[3])
        return list(zip(gots, wants))

    def __call__(self, op: str, *inputs: Any, chunks: tuple[Any, ...] = (), **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
        return self.many([(op, inputs, chunks, attrs)])[0]


@pytest.fixture(params=WHERE)
def run(request: pytest.FixtureRequest) -> Runner:
    return Runner(request.getfixturevalue("client") if request.param == "cluster" else None)


def _equal(pairs: list[tuple[np.ndarray, np.ndarray]], cases: list[Case]) -> None:
    for (got, want), case in zip(pairs, cases):
        np.testing.assert_array_equal(got, want, err_msg=f"{case[0]} {case[3]} chunks {case[2]}")


def _close(pairs: list[tuple[np.ndarray, np.ndarray]], cases: list[Case], tol: float = 1e-5) -> None:
    for (got, want), case in zip(pairs, cases):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{case[0]} {case[3]} chunks {case[2]}")


RNG = np.random.default_rng(27)


def _data(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    if np.dtype(dtype) == np.bool_:
        return RNG.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-4, 5, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- elementwise

CHUNKINGS_2D = [(3, 2), (7, 5), (1, 4)]  # uneven last chunks, one chunk, thin


def test_elementwise_broadcasting_lists_and_literals(run: Runner) -> None:
    x, row, col = _data((7, 5)), _data((5,)), _data((7, 1))
    cases: list[Case] = []
    for ch in CHUNKINGS_2D:
        cases += [
            ("Add", (x, row), (ch, 2), {}),
            ("Maximum", (x, col), (ch, (3, 1)), {}),
            ("SelectV2", (x > 0, x, np.float32(-1.0)), (ch, (4, 3)), {}),
            ("Relu", (x,), (ch,), {}),
            ("Cast", (x,), (ch,), {"DstT": ok.int32}),
            ("Mul", (x, 3.0), (ch,), {}),
        ]
    _equal(run.many(cases), cases)
    a, b, c = (_data((9, 4)) for _ in range(3))
    y = ok.dask.apply("AddN", [da.from_array(a, chunks=(3, 4)), da.from_array(b, chunks=(9, 2)), c])
    with ok.use_backend("cpu"):
        want = ok.execute("AddN", [a, b, c]).numpy()
        got = y.compute(scheduler="threads") if run.client is None else run.client.compute(y).result()
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- reductions

CHUNKINGS_3D = [(2, 3, 4), (5, 7, 1), (1, 1, 4)]


def test_reductions(run: Runner) -> None:
    x = _data((5, 7, 4)) * 0.5
    cases: list[Case] = []
    for op in ("Sum", "Max", "Min", "Prod", "Mean"):
        for ch in CHUNKINGS_3D:
            for axes, keep in (([1], False), ([0, 2], True), ([-1, 0, 1], False)):
                cases.append((op, (x + (1.0 if op == "Prod" else 0.0), np.array(axes, np.int32)), (ch,),
                              {"keep_dims": keep}))
    _close(run.many(cases), cases)


def test_mean_accumulates_as_the_op_and_keeps_its_empty_rule(run: Runner) -> None:
    """Partial sums in Mean's accumulator type (64-bit integers, float32 for float16),
    and the op's answer for an empty axis (NaN; 0 for integers).  Summed in the input's
    type, int32 [2**30] * 8 gave 0, float16 ones(100000) gave NaN (an inf sum) and an
    empty axis gave 0.0."""
    cases: list[Case] = [
        ("Mean", (np.full(8, 2**30, np.int32), np.array([0], np.int32)), ((1,),), {}),
        ("Mean", (np.full(8, -(2**30) - 1, np.int32), np.array([0], np.int32)), ((3,),), {}),
        ("Mean", (np.full(8, 2**63 // 4, np.int64), np.array([0], np.int64)), ((2,),), {}),
        ("Mean", (np.full(6, 200, np.uint8), np.array([0], np.int32)), ((4,),), {}),
        ("Mean", (np.ones(100_000, np.float16), np.array([0], np.int32)), ((1000,),), {}),
        ("Mean", (np.zeros((0, 3), np.float32), np.array([0], np.int32)), (((0,), (2, 1)),), {}),
        ("Mean", (np.zeros((0, 3), np.int32), np.array([0], np.int32)), (((0,), (3,)),), {"keep_dims": True}),
    ]
    for (got, want), case in zip(run.many(cases), cases):
        np.testing.assert_array_equal(got, want, err_msg=f"{case[0]} {case[1][0].dtype} {case[1][0].shape}")


def test_softmax_over_a_split_last_axis_normalises_the_whole_row(run: Runner) -> None:
    """Softmax and LogSoftmax work over the last axis: it is never split (Batch(-1)), so a
    rank-1 input in chunks sums to 1, not to the number of chunks."""
    x1, x3 = _data((12,)), _data((4, 3, 10))
    cases: list[Case] = []
    for op in ("Softmax", "LogSoftmax"):
        cases += [(op, (x1,), ((5,),), {}), (op, (x3,), ((2, 2, 3),), {})]
    pairs = run.many(cases)
    _close(pairs, cases)
    assert abs(float(pairs[0][0].sum()) - 1.0) < 1e-5


def _chunking(data: Any, size: int) -> tuple[int, ...]:
    """Chunk sizes summing to ``size``, zero-size and single-element chunks included."""
    sizes: list[int] = []
    left = size
    while left > 0 or not sizes:
        n = data.draw(st.integers(0, left))
        sizes.append(n)
        left -= n
        if len(sizes) > 6:
            sizes.append(left)
            left = 0
    return tuple(sizes)


RULED = ["Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "ArgMin", "Softmax", "SoftmaxGrad", "LogSoftmax", "BiasAdd", "Add",
         "Relu", "MatMul"]


@settings(max_examples=int(os.environ.get("OPKERNEL_DASK_EXAMPLES", "200")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), op=st.sampled_from(RULED), dtype=st.sampled_from(["float32", "float64", "int32"]))
def test_rules_equal_the_op_property(data: Any, op: str, dtype: str) -> None:
    """Every rule, any shape and chunking (zero-size and single-element chunks, several
    axes reduced or none), against the op on the whole array (cpu, synchronous)."""
    if dtype == "int32" and op in ("Softmax", "SoftmaxGrad", "LogSoftmax", "Relu", "Mean"):
        dtype = "float32"
    rank = data.draw(st.integers(1 if op not in ("MatMul", "BiasAdd") else 2, 3 if op != "MatMul" else 2))
    shape = tuple(data.draw(st.integers(0 if op not in ("ArgMax", "ArgMin") else 1, 5)) for _ in range(rank))
    x = (RNG.integers(-3, 4, shape) if dtype == "int32" else RNG.standard_normal(shape)).astype(dtype)
    chunks = tuple(_chunking(data, n) for n in shape)
    inputs: list[Any] = [da.from_array(x, chunks=chunks)]
    eager: list[Any] = [x]
    attrs: dict[str, Any] = {}
    if op in ("Sum", "Mean", "Max", "Min", "Prod"):
        axes = sorted(set(data.draw(st.lists(st.integers(-rank, rank - 1), max_size=rank))))
        axes = sorted({a % rank for a in axes})
        if op in ("Max", "Min") and any(shape[a] == 0 for a in axes):
            return  # no identity to give: the op's own error, tested elsewhere
        ax = np.asarray(axes, np.int32)
        inputs.append(ax)
        eager.append(ax)
        attrs["keep_dims"] = data.draw(st.booleans())
    elif op in ("ArgMax", "ArgMin"):
        ax = np.asarray(data.draw(st.integers(0, rank - 1)), np.int32)
        inputs.append(ax)
        eager.append(ax)
    elif op == "BiasAdd":
        bias = RNG.standard_normal(shape[-1:]).astype(dtype) if dtype != "int32" else RNG.integers(-3, 4, shape[-1:]).astype(dtype)
        inputs.append(bias)
        eager.append(bias)
    elif op == "SoftmaxGrad":  # a second operand of x's shape, chunked its own way
        other = RNG.standard_normal(shape).astype(dtype)
        inputs.append(da.from_array(other, chunks=tuple(_chunking(data, n) for n in shape)))
        eager.append(other)
    elif op == "Add":
        other = x[..., :1] if shape[-1] else x
        inputs.append(other)
        eager.append(other)
    elif op == "MatMul":
        k = shape[1]
        w = RNG.standard_normal((k, data.draw(st.integers(0, 4)))).astype(dtype) if dtype != "int32" else \
            RNG.integers(-3, 4, (k, 3)).astype(dtype)
        inputs.append(da.from_array(w, chunks=(chunks[1], _chunking(data, w.shape[1]))))
        eager.append(w)
    with ok.use_backend("cpu"):
        want = ok.execute(op, *eager, **attrs).numpy()
        got = ok.dask.apply(op, *inputs, **attrs).compute(scheduler="sync")
    message = f"{op} {dtype} shape {shape} chunks {chunks} {attrs} {[np.asarray(i).tolist() for i in eager[1:2] if np.ndim(i) <= 1]}"
    assert got.shape == want.shape and got.dtype == want.dtype, message
    if dtype == "int32" or op in ("Max", "Min", "ArgMax", "ArgMin", "Relu", "Add", "BiasAdd"):
        np.testing.assert_array_equal(got, want, err_msg=message)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=message)


def test_boolean_and_integer_reductions(run: Runner) -> None:
    cases: list[Case] = []
    for op in ("All", "Any"):
        x = RNG.random((6, 5)) < (0.9 if op == "All" else 0.1)
        for axes in ([0], [1], [0, 1]):
            cases += [(op, (x, np.array(axes, np.int64)), (ch,), {}) for ch in ((4, 2), (6, 5), (1, 1))]
    ints = RNG.integers(-50, 50, (7, 6)).astype(np.int32)
    cases += [("Mean", (ints, np.array([0], np.int32)), ((3, 4),), {}), ("Sum", (ints, np.array([0, 1])), ((2, 5),), {})]
    _equal(run.many(cases), cases)


def test_index_reductions_with_offsets_ties_and_nan(run: Runner) -> None:
    x = RNG.integers(0, 3, (6, 8)).astype(np.float32)  # many ties: the first index must win
    x[2, 5] = np.nan
    x[4, 1] = np.nan
    cases: list[Case] = []
    for op in ("ArgMax", "ArgMin"):
        for ch in ((2, 3), (6, 8), (1, 1)):
            cases += [(op, (x, axis), (ch,), {}) for axis in (0, 1, -1)]
            cases.append((op, (x, 0), (ch,), {"output_type": ok.int32}))
    _equal(run.many(cases), cases)


# ---------------------------------------------------------------- windows

POOLS = ["MaxPool", "AvgPool", "Addons>MedianPool2D"]
GEOMETRIES = [  # (k, stride, padding)
    (3, 1, "SAME"), (3, 2, "SAME"), (2, 3, "SAME"), (4, 3, "VALID"), (5, 2, "VALID"), (1, 2, "SAME"),
]
#: Uneven last chunks, one chunk, chunks smaller than every window but the 1x1, and mixed sizes.
CHUNKINGS = [(1, 4, 5, 2), (2, 11, 13, 3), (1, 2, 3, 3), (2, (6, 5), (2, 9, 2), 1)]


def test_pools(run: Runner) -> None:
    x = _data((2, 11, 13, 3))
    cases: list[Case] = [
        (op, (x,), (ch,), dict(ksize=[1, k, k, 1], strides=[1, s, s, 1], padding=pad))
        for op in POOLS for ch in CHUNKINGS for k, s, pad in GEOMETRIES
    ]
    _equal(run.many(cases), cases)


def test_conv2d(run: Runner) -> None:
    # Within float tolerance: the cpu kernel's sums go through BLAS, whose order
    # depends on the size of the chunk it is given.
    x, f = _data((2, 11, 13, 3)), _data((3, 2, 3, 4))
    cases: list[Case] = [
        ("Conv2D", (x, f), (ch, (3, 2, 3, 2)), dict(strides=[1, s, s, 1], dilations=[1, d, d, 1], padding=pad))
        for ch in CHUNKINGS
        for s, d, pad in ((1, 1, "SAME"), (2, 1, "SAME"), (3, 2, "SAME"), (2, 1, "VALID"), (1, 2, "VALID"))
    ]
    _close(run.many(cases), cases)


def test_explicit_padding(run: Runner) -> None:
    x = _data((2, 11, 13, 3))
    cases: list[Case] = [
        ("MaxPool", (x,), ((1, 3, 4, 3),), dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="EXPLICIT",
                                                explicit_paddings=[0, 0, 2, 1, 0, 2, 0, 0])),
        ("Conv2D", (x, _data((3, 3, 3, 2))), ((2, 5, 4, 3),),
         dict(strides=[1, 2, 3, 1], padding="EXPLICIT", explicit_paddings=[0, 0, 1, 2, 2, 0, 0, 0])),
    ]
    pairs = run.many(cases)
    _equal(pairs[:1], cases[:1])
    _close(pairs[1:], cases[1:])


def test_pool_nchw() -> None:
    # NCHW pooling runs on cpu only (as in TensorFlow); the rule reads the layout from data_format.
    x = _data((2, 3, 11, 13))
    cases: list[Case] = [
        (op, (x,), ((1, 2, 4, 5),), dict(ksize=[1, 1, 3, 2], strides=[1, 1, 2, 3], padding="SAME", data_format="NCHW"))
        for op in ("AvgPool", "MaxPool")
    ]
    _equal(Runner(None).many(cases), cases)


@settings(max_examples=int(os.environ.get("OPKERNEL_DASK_EXAMPLES", "40")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    op=st.sampled_from(["MaxPool", "AvgPool", "Addons>MedianPool2D", "Conv2D"]),
    h=st.integers(1, 17), w=st.integers(1, 17),
    k=st.integers(1, 5), s=st.integers(1, 4), d=st.integers(1, 2),
    padding=st.sampled_from(["SAME", "VALID", "EXPLICIT"]),
)
def test_window_geometry_property(data: Any, op: str, h: int, w: int, k: int, s: int, d: int, padding: str) -> None:
    """Any window geometry and any chunking: equal to the whole-array op (threaded, cpu)."""
    kh, kw = k, max(1, k - 1)
    sw = data.draw(st.integers(1, 4))
    if op != "Conv2D":
        d = 1
    if padding == "EXPLICIT" and op in ("AvgPool", "Addons>MedianPool2D"):
        padding = "SAME"  # these ops take SAME and VALID only
    pads = [0] * 4
    if padding == "EXPLICIT":  # a pool's padding must be smaller than its window; a convolution's
        # may be wider, so that whole output chunks lie in the padding (a raw IndexError before)
        pads = [data.draw(st.integers(0, max(0, kk - 1) if op != "Conv2D" else kk + 6)) for kk in (kh, kh, kw, kw)]
    eh, ew = (kh - 1) * d + 1, (kw - 1) * d + 1
    if padding != "SAME" and (eh > h + pads[0] + pads[1] or ew > w + pads[2] + pads[3]):
        return  # no output: nothing to split
    ch = data.draw(st.integers(1, h))
    cw = data.draw(st.integers(1, w))
    x = _data((2, h, w, 2))
    attrs: dict[str, Any] = dict(strides=[1, s, sw, 1], padding=padding)
    if padding == "EXPLICIT":
        attrs["explicit_paddings"] = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0]
    if op == "Conv2D":
        inputs: tuple[Any, ...] = (x, _data((kh, kw, 2, 3)))
        attrs["dilations"] = [1, d, d, 1]
    else:
        inputs = (x,)
        attrs["ksize"] = [1, kh, kw, 1]
    with ok.use_backend("cpu"):
        want = ok.execute(op, *inputs, **attrs).numpy()
        y = ok.dask.apply(op, da.from_array(x, chunks=(1, ch, cw, 1)), *inputs[1:], **attrs)
        got = y.compute(scheduler="threads")
    message = f"{op} {attrs} chunks {ch}x{cw}"
    if op == "Conv2D":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=message)
    else:
        np.testing.assert_array_equal(got, want, err_msg=message)


def test_plan_axis_slices_start_on_the_stride_grid() -> None:
    from opkernel.dask._apply import plan_axis

    for size, k, s in ((17, 3, 2), (16, 4, 3), (10, 1, 4), (9, 5, 5)):
        slices = plan_axis(size, k, s, "SAME", (0, 0), list(range(0, size, 4)))
        assert slices[0].o0 == 0 and slices[-1].o1 == -(-size // s)
        for sl in slices:
            assert sl.a % s == 0 and (sl.b == size or (size - sl.b) % s == 0)
            assert 0 <= sl.a < sl.b <= size


# ---------------------------------------------------------------- contractions and batch axes

def test_matmul_and_batch_matmul(run: Runner) -> None:
    a, b = _data((7, 5)), _data((5, 6))
    cases: list[Case] = []
    for ta in (False, True):
        for tb in (False, True):
            for ca, cb in (((3, 2), (2, 4)), ((7, 5), (5, 6)), ((2, 5), (5, 1))):
                cases.append(("MatMul", (a.T.copy() if ta else a, b.T.copy() if tb else b),
                              (ca[::-1] if ta else ca, cb[::-1] if tb else cb), {"transpose_a": ta, "transpose_b": tb}))
    x = _data((3, 1, 4, 5))
    cases += [
        ("BatchMatMul", (x, _data((1, 2, 5, 3))), ((2, 1, 3, 2), (1, 1, 2, 3)), {}),
        ("BatchMatMul", (x, _data((3, 2, 3, 5))), ((1, 1, 4, 2), (2, 2, 3, 5)), {"adj_y": True}),
        ("BatchMatMul", (_data((2, 5, 4)), _data((5, 3))), ((1, 3, 2), (2, 3)), {"adj_x": True}),
    ]
    _close(run.many(cases), cases)


def test_batch_axis_ops(run: Runner) -> None:
    x, bias = _data((10, 6)), _data((6,))
    cases: list[Case] = []
    for ch in ((3, 4), (10, 6), (1, 1)):
        cases += [("Softmax", (x,), (ch,), {}), ("LogSoftmax", (x,), (ch,), {}), ("BiasAdd", (x, bias), (ch, 2), {})]
    _equal(run.many(cases), cases)


def test_traced_and_loaded_functions_map_over_the_batch_axis(run: Runner, tmp_path: Any) -> None:
    with ok.use_backend("cpu"):
        w = ok.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), name="w")

    @ok.function
    def predict(x: Any, bias: Any) -> Any:
        return ok.ops.softmax(ok.ops.relu(ok.ops.mat_mul(x, w)) + bias)

    x, bias = _data((11, 4)), _data((11, 3))
    with ok.use_backend("cpu"):
        want = predict(ok.tensor(x), ok.tensor(bias)).numpy()
        y = ok.dask.apply(predict, da.from_array(x, chunks=(4, 2)), bias)
        ok.save(predict, tmp_path / "predict.okg")  # its traces: (11, 4) and the (None, 4) apply made
        loaded = ok.load(tmp_path / "predict.okg")
        z = ok.dask.apply(loaded, da.from_array(x, chunks=3), da.from_array(bias, chunks=5))
        assert (y.shape, y.dtype, y.chunks[0]) == ((11, 3), np.float32, (4, 4, 3))
        got = dask_compute(run, y, z)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], want)
    with pytest.raises(ok.errors.ShapeError, match="axis 0"):
        ok.dask.apply(predict, x, bias[:3])


def dask_compute(run: Runner, *ys: Any) -> list[np.ndarray]:
    if run.client is None:
        import dask

        return list(dask.compute(*ys, scheduler="threads"))
    return list(run.client.gather(run.client.compute(list(ys))))


def test_threaded_on_opencl() -> None:
    if "opencl" not in ok.available_backends():
        pytest.skip("backend 'opencl' unavailable")
    x = _data((2, 11, 13, 3))
    cases: list[Case] = [
        ("Add", (x, _data((3,))), ((1, 4, 5, 2), None), {}),
        ("Max", (x, np.array([1, 2], np.int32)), ((1, 4, 5, 2),), {}),
        ("ArgMax", (x, 2), ((1, 4, 5, 2),), {}),
        ("MaxPool", (x,), ((1, 4, 5, 2),), dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")),
        ("Addons>MedianPool2D", (x,), ((1, 2, 3, 3),), dict(ksize=[1, 3, 2, 1], strides=[1, 2, 3, 1], padding="SAME")),
    ]
    _equal(Runner(None, "opencl").many(cases), cases)


# ---------------------------------------------------------------- metadata, errors, declarations

def test_shape_dtype_and_chunks_come_without_computing(fresh_registry: None) -> None:
    calls = []
    ok.register_op("Test>Twice").input("x: T").output("y: T").attr("T: {float, int32}").set_shape_fn(
        ok.shape_fns.unchanged_shape
    )

    @ok.register_kernel("Test>Twice", backend="cpu")
    def twice(x: np.ndarray) -> np.ndarray:
        calls.append(x.shape)
        return x * 2

    ok.dask.declare("Test>Twice", ok.dask.Elementwise())
    x = da.ones((10, 4), chunks=(3, 4), dtype=np.int32)
    y = ok.dask.apply("Test>Twice", x)
    assert (y.shape, y.dtype, y.chunks) == ((10, 4), np.int32, ((3, 3, 3, 1), (4,))) and calls == []
    m = ok.dask.apply("MaxPool", da.ones((2, 10, 10, 3), chunks=(1, 4, 4, 3)), ksize=[1, 3, 3, 1],
                      strides=[1, 2, 2, 1], padding="SAME")
    assert m.shape == (2, 5, 5, 3) and m.chunks[1] == (2, 2, 1)
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(y.compute(scheduler="sync"), np.full((10, 4), 2, np.int32))
    assert len(calls) == 4


def test_op_without_a_rule_names_it_and_the_fix() -> None:
    with pytest.raises(dask_rules.NoPartitioningRuleError, match=r"op 'Transpose'.*ok\.dask\.declare"):
        ok.dask.apply("Transpose", da.ones((4, 4), chunks=2), np.array([1, 0]))
    with pytest.raises(ok.errors.InvalidArgumentError):
        ok.dask.apply("Reshape", da.ones((4, 4), chunks=2), np.array([16]))


def test_bad_calls_fail_before_any_work() -> None:
    x = da.ones((2, 8, 8, 1), chunks=4, dtype=np.float32)
    with pytest.raises(ok.errors.InvalidArgumentError, match="MaxPool"):
        ok.dask.apply("MaxPool", x, ksize=[1, 3, 3, 1], strides=[1, 0, 1, 1], padding="SAME")
    with pytest.raises(ok.errors.InvalidArgumentError, match="padding"):
        ok.dask.apply("MaxPool", x, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="FULL")
    with pytest.raises(ok.errors.OpTypeError, match="'Add'"):
        ok.dask.apply("Add", x, da.ones((8, 1), dtype=np.int32))
    with pytest.raises(ok.errors.InvalidArgumentError, match="'MatMul'"):
        ok.dask.apply("MatMul", da.ones((3, 4), chunks=2), da.ones((5, 2), chunks=2))
    with pytest.raises(ok.errors.OpNotFoundError):
        ok.dask.apply("NoSuchOp", x)
    with pytest.raises(ok.errors.InvalidArgumentError, match="dask array"):
        ok.dask.apply("Sum", x, da.from_array(np.array([1])))
    with pytest.raises(ok.errors.InvalidArgumentError, match="an op name, a generated op wrapper"):
        ok.dask.apply(42, x)
    with pytest.raises(ok.errors.InvalidArgumentError, match="partitioning rule must be"):
        ok.dask.declare("MyOp", "window")  # type: ignore[arg-type]


def test_wrappers_and_declared_rules(fresh_registry: None) -> None:
    x = _data((6, 6))
    with ok.use_backend("cpu"):
        y = ok.dask.apply(ok.ops.relu, da.from_array(x, chunks=4)).compute(scheduler="threads")
        np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert ok.dask.rule_for("Addons>MedianPool2D") == ok.dask.Window(ksize="ksize")
    old = dask_rules._DECLARED.copy()
    try:
        with pytest.raises(ok.errors.AlreadyExistsError, match=r"op 'Transpose' is provided by builtin .* override=True"):
            ok.dask.declare("Transpose", ok.dask.Batch(1))  # another party's op: not silently
        with pytest.warns(UserWarning, match=r"op 'Transpose': partitioning rule declared by .* overrides builtin"):
            ok.dask.declare("Transpose", ok.dask.Batch(1), override=True)  # a wrong rule: the shape check catches it
        with pytest.raises(ok.errors.InvalidArgumentError, match="does not fit"):
            ok.dask.apply("Transpose", da.ones((4, 3), chunks=2), np.array([1, 0]))
    finally:
        dask_rules._DECLARED.clear()
        dask_rules._DECLARED.update(old)


def test_import_opkernel_does_not_import_dask() -> None:
    from isolated import run_isolated

    code = (
        "import sys, opkernel as ok\n"
        "ok.ops.add(1.0, 2.0)\n"
        "import opkernel.dask\n"
        "ok.dask.declare('X', ok.dask.Elementwise())\n"
        "print(any(m == 'dask' or m.startswith('dask.') for m in sys.modules))\n"
        "ok.dask.apply\n"
    )
    assert run_isolated(code, backend="cpu", timeout=60, what="import opkernel.dask").stdout.strip() == "False"


# ---------------------------------------------------------------- the cluster

def test_workers_pick_their_backend_and_build_each_call_once(client: Any) -> None:
    from opkernel.dask import _worker

    x = da.from_array(_data((2, 16, 16, 1)), chunks=(1, 4, 4, 1))
    y = ok.dask.apply("Addons>MedianPool2D", x, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME")
    before = client.run(_worker.calls_made)
    client.compute(y).result()
    made = client.run(_worker.calls_made)
    assert sum(made.values()) - sum(before.values()) <= 2  # once per worker process, not per chunk (32 chunks)
    assert set(client.run(ok.get_backend).values()) == {"cpu"}
    assert set(client.run(_intra_op_threads).values()) == {1}  # the workers are the parallelism
    if "opencl" in ok.available_backends():
        client.register_plugin(ok.dask.BackendPlugin("opencl"))
        try:
            assert set(client.run(ok.get_backend).values()) == {"opencl"}
            with ok.use_backend("opencl"):
                want = ok.execute("Addons>MedianPool2D", x.compute(), ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1],
                                  padding="SAME").numpy()
            np.testing.assert_array_equal(client.compute(y).result(), want)
        finally:
            client.register_plugin(ok.dask.BackendPlugin("cpu"))


def _intra_op_threads() -> int:
    return ok.config.intra_op_parallelism_threads


def test_a_killed_worker_is_rescheduled(client: Any) -> None:
    x = _data((8, 32, 32, 1))
    dx = da.from_array(x, chunks=(1, 8, 8, 1))
    y = ok.dask.apply("MaxPool", dx, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME")

    def slow(b: np.ndarray) -> np.ndarray:
        time.sleep(0.02)
        return b

    z = y.map_blocks(slow, dtype=y.dtype)
    future = client.compute(z)
    deadline = time.monotonic() + 30
    while not any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # some chunks done, most still to come
    assert not future.done()
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    os.kill(pids[victim], signal.SIGKILL)
    got = future.result(timeout=60)
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(got, ok.execute("MaxPool", x, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1],
                                                      padding="SAME").numpy())
    assert victim not in client.run(os.getpid) or client.run(os.getpid)[victim] != pids[victim]
    client.wait_for_workers(2, timeout=60)


def test_larger_than_worker_memory_spills_and_the_client_holds_none(client: Any, tmp_path: Any) -> None:
    zarr = pytest.importorskip("zarr")
    psutil = pytest.importorskip("psutil")
    shape, chunks = (16, 1024, 1024, 1), (1, 512, 512, 1)  # 64 MiB of float32, > the 48 MiB limit
    nbytes = int(np.prod(shape)) * 4
    assert nbytes > WORKER_MEMORY
    rss0 = psutil.Process().memory_info().rss
    src = da.random.default_rng(5).random(shape, dtype=np.float32, chunks=chunks)
    client.compute(src.to_zarr(str(tmp_path / "in.zarr"), compute=False)).result()
    x = da.from_zarr(str(tmp_path / "in.zarr"))
    attrs = dict(ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME")  # the result is 64 MiB too
    y = client.persist(ok.dask.apply("MaxPool", x, **attrs))
    with client.as_current():
        distributed.wait(y)
    spilled = client.run(lambda dask_worker: dask_worker.data.spilled_total.disk)
    assert sum(spilled.values()) > 0, spilled
    client.compute(y.to_zarr(str(tmp_path / "out.zarr"), compute=False)).result()
    del y
    assert psutil.Process().memory_info().rss - rss0 < nbytes // 2  # never the whole array
    out = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")
    inp = zarr.open_array(str(tmp_path / "in.zarr"), mode="r")
    assert out.shape == (16, 1024, 1024, 1)
    with ok.use_backend("cpu"):
        for n in (0, 7, 15):  # whole images: every chunk edge and both array edges
            want = ok.execute("MaxPool", inp[n: n + 1], **attrs).numpy()
            np.testing.assert_array_equal(out[n: n + 1], want)


def test_the_demo_runs_with_its_default_workers_and_backends(tmp_path: Any) -> None:
    """examples/dask_median.py (`make dask-demo`) on a small stack, with its default worker
    memory limit and each worker's default backend (opencl where installed: a worker whose
    limit leaves no room for the backend is killed by its nanny, and the demo then fails)."""
    import subprocess
    import sys
    from pathlib import Path

    from isolated import child_env

    demo = Path(__file__).resolve().parents[1] / "examples" / "dask_median.py"
    # A cold program cache: each opencl worker compiles the median pool with PoCL's LLVM,
    # the memory peak that killed 256 MiB workers (the demo's former default).
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, str(demo), "--images", "4", "--samples", "3", "--workdir", str(work)],
        capture_output=True, text=True, timeout=240, env=child_env(XDG_CACHE_HOME=str(cache)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "3 random tiles equal the single-process op" in done.stdout


# ---------------------------------------------------------------- errors raised on workers

class _DriverRecord:
    """Like pyopencl's ``_ErrorRecord``: what a native error holds that does not pickle."""

    def __reduce__(self) -> Any:
        raise TypeError("cannot pickle '_DriverRecord' object")


class _NativeLibraryError(RuntimeError):
    def __init__(self, record: _DriverRecord) -> None:
        super().__init__(record)
        self.record = record

    def __str__(self) -> str:
        return "clBuildProgram failed: BUILD_PROGRAM_FAILURE"


def _error_classes() -> list[type[ok.errors.OpkernelError]]:
    from opkernel_opencl.programs import ProgramBuildError

    found = [getattr(ok.errors, n) for n in ok.errors.__all__]
    classes = [c for c in found if isinstance(c, type) and issubclass(c, ok.errors.OpkernelError)]
    return [*classes, dask_rules.NoPartitioningRuleError, ProgramBuildError]


def _raise_on_worker(cls: type[ok.errors.OpkernelError], chained: bool) -> None:
    """Raise ``cls`` the way a kernel's error is raised: with op and backend, chained (when
    ``chained``) to a native library's error that does not pickle."""
    error = cls(f"op 'Probe': {cls.__name__} on a worker", op="Probe", backend="opencl", extra=[1, 2])
    if not chained:
        raise error
    try:
        raise _NativeLibraryError(_DriverRecord())
    except _NativeLibraryError as native:
        raise error from native


def _check_received(error: BaseException, cls: type[BaseException], chained: bool) -> None:
    assert type(error) is cls, f"{cls.__name__} arrived as {type(error).__name__}: {error!r}"
    assert (str(error), error.op, error.backend, error.extra) == (  # type: ignore[attr-defined]
        f"op 'Probe': {cls.__name__} on a worker", "Probe", "opencl", [1, 2]
    )
    if chained:
        cause = error.__cause__
        assert isinstance(cause, ok.errors.NativeError), repr(cause)
        assert cause.type_name.endswith("_NativeLibraryError") and "BUILD_PROGRAM_FAILURE" in str(cause)


@pytest.mark.parametrize("chained", [False, True], ids=["plain", "chained-to-native"])
def test_every_error_reaches_the_client_as_itself(client: Any, chained: bool) -> None:
    """An opkernel error raised on a worker arrives at the client as its own class, with its
    op, backend, context and message, even when chained to a native error that does not
    pickle (Dask pickles the chain with tblib; one bad link made it a bare Exception)."""
    import cloudpickle

    import test_dask

    cloudpickle.register_pickle_by_value(test_dask)  # the workers need not import the tests
    try:
        for cls in _error_classes():
            future = client.submit(_raise_on_worker, cls, chained, pure=False)
            with pytest.raises(BaseException) as info:
                future.result()
            _check_received(info.value, cls, chained)
    finally:
        cloudpickle.unregister_pickle_by_value(test_dask)


@pytest.mark.parametrize("chained", [False, True], ids=["plain", "chained-to-native"])
def test_every_error_pickles_and_copies_as_itself(chained: bool) -> None:
    """pickle (multiprocessing), copy, and the chain-pickling Dask does (tblib)."""
    import copy
    import pickle

    import tblib.pickling_support

    for cls in _error_classes():
        try:
            _raise_on_worker(cls, chained)
        except ok.errors.OpkernelError as error:
            tblib.pickling_support.install(error)
            _check_received(pickle.loads(pickle.dumps(error)), cls, chained)
            copied = copy.copy(error)
            assert type(copied) is cls and (copied.op, str(copied)) == (error.op, str(error))
