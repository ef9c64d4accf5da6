"""The CPU backend's native kernels (opkernel_cpu._native) against its numpy path.

The op tests (test_ops_nn.py) check every backend against numpy references; here the
native MaxPoolGrad is checked against the CPU backend's own numpy implementation,
element for element, on the geometries and data that exercise its branches: every
channel-block width, padding, overlapping windows, ties and nan."""

from __future__ import annotations

import platform

import numpy as np
import pytest

import opkernel as ok

pytest.importorskip("opkernel_cpu")
from opkernel_cpu import sharding  # noqa: E402

native = sharding.native_module()
pytestmark = pytest.mark.skipif(native is None, reason="opkernel_cpu._native was not built")

GEOMETRIES = [  # (ksize, strides, padding, input height and width)
    ((2, 2), (2, 2), "VALID", (8, 8)),  # tiles exactly: every tap written once
    ((2, 2), (2, 2), "VALID", (9, 7)),  # tiles but leaves a row and a column out
    ((3, 3), (2, 2), "SAME", (7, 8)),  # overlapping, padded
    ((3, 3), (1, 1), "SAME", (5, 5)),  # every element in up to nine windows
    ((2, 3), (1, 2), "VALID", (6, 7)),
    ((1, 1), (1, 1), "VALID", (4, 4)),  # one tap
]
CHANNELS = [1, 3, 4, 8, 12, 16, 24, 32, 64, 96]  # every block width (32, 16, 8, 4, 1)


def _data(rng, shape, dtype, kind):
    if kind == "ties":  # few distinct values: many windows hold their maximum twice
        return rng.integers(-2, 3, shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    if kind == "nan":
        x.reshape(-1)[rng.choice(x.size, x.size // 7, replace=False)] = np.nan
    return x


def _both_paths(monkeypatch, x, y, dy, attrs):
    calls = []
    real = native.max_pool_grad
    monkeypatch.setattr(native, "max_pool_grad", lambda *a: calls.append(a[4]) or real(*a))
    with ok.use_backend("cpu"):
        fast = ok.ops.max_pool_grad(x, y, dy, **attrs).numpy()
        assert len(calls) == 1  # the native kernel ran
        monkeypatch.setattr(sharding, "_native", None)
        slow = ok.ops.max_pool_grad(x, y, dy, **attrs).numpy()
        assert len(calls) == 1  # and now the numpy path
    return fast, slow, calls[0]


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"{g[0]}-{g[1]}-{g[2]}-{g[3]}")
@pytest.mark.parametrize("channels", CHANNELS)
@pytest.mark.parametrize("kind", ["random", "ties", "nan"])
def test_native_max_pool_grad_matches_the_numpy_path(geometry, channels, kind, monkeypatch):
    (kh, kw), (sh, sw), padding, (h, w) = geometry
    rng = np.random.default_rng(channels * 7 + len(kind))
    dtype = np.float64 if channels in (3, 16) else np.float32
    attrs = {"ksize": [1, kh, kw, 1], "strides": [1, sh, sw, 1], "padding": padding}
    x = _data(rng, (2, h, w, channels), dtype, kind)
    with ok.use_backend("cpu"):
        y = ok.ops.max_pool(x, **attrs).numpy()
    dy = rng.standard_normal(y.shape).astype(dtype)
    fast, slow, assigned = _both_paths(monkeypatch, x, y, dy, attrs)
    assert fast.dtype == slow.dtype == dtype
    assert assigned == ((kh, kw) == (sh, sw) and padding == "VALID" and h % kh == 0 and w % kw == 0)
    if (sh, sw) >= (kh, kw):  # one window per element: the same values exactly
        np.testing.assert_array_equal(fast, slow)
    else:  # overlapping windows add their gradients in another order
        np.testing.assert_allclose(fast, slow, rtol=1e-12 if dtype == np.float64 else 1e-6, atol=1e-6)


def test_native_max_pool_grad_with_nchw_and_nonfinite_gradients(monkeypatch):
    rng = np.random.default_rng(3)
    attrs = {"ksize": [1, 1, 2, 2], "strides": [1, 1, 2, 2], "padding": "VALID", "data_format": "NCHW"}
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    with ok.use_backend("cpu"):
        y = ok.ops.max_pool(x, **attrs).numpy()
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dy[0, 0, 0, :2] = [np.nan, np.inf]  # a nan or inf gradient stays at its window's maximum only
    fast, slow, _ = _both_paths(monkeypatch, x, y, dy, attrs)
    np.testing.assert_array_equal(fast, slow)
    assert np.isnan(fast).sum() == 1 and np.isinf(fast).sum() == 1


def test_native_max_pool_grad_rejects_what_it_cannot_compute():
    x = np.zeros((1, 4, 4, 2), np.float32)
    dy = np.zeros((1, 2, 2, 2), np.float32)
    with pytest.raises(TypeError, match="float32 or float64"):
        native.max_pool_grad(x.astype(np.int32), dy.astype(np.int32), np.zeros((1, 4, 4, 2), np.int32),
                             (2, 2, 2, 2, 1, 1, 0, 0), False)
    with pytest.raises(TypeError, match="C-contiguous"):
        native.max_pool_grad(x[:, ::2], dy, np.zeros((1, 2, 4, 2), np.float32), (2, 2, 2, 2, 1, 1, 0, 0), False)
    with pytest.raises(ValueError, match="tile x"):  # overlapping windows cannot be assigned
        native.max_pool_grad(x, np.zeros((1, 3, 3, 2), np.float32), np.empty_like(x), (2, 2, 1, 1, 1, 1, 0, 0), True)
    with pytest.raises(ValueError, match="of x's shape"):
        native.max_pool_grad(x, dy, np.zeros((1, 4, 4, 3), np.float32), (2, 2, 2, 2, 1, 1, 0, 0), False)


@pytest.mark.parametrize("channels", [1, 3, 4, 10])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_native_max_pool_matches_the_numpy_path(channels, dtype, monkeypatch):
    rng = np.random.default_rng(channels)
    calls = []
    real = native.max_pool
    monkeypatch.setattr(native, "max_pool", lambda *a: calls.append(1) or real(*a))
    for (kh, kw), (sh, sw), padding, (h, w) in GEOMETRIES:
        attrs = {"ksize": [1, kh, kw, 1], "strides": [1, sh, sw, 1], "padding": padding}
        x = _data(rng, (2, h, w, channels), dtype, "nan")
        x[0, 0, 0] = -np.inf  # a padded corner's only real value: -inf, not the padding's
        calls.clear()
        with ok.use_backend("cpu"):
            fast = ok.ops.max_pool(x, **attrs).numpy()
            monkeypatch.setattr(sharding, "_native", None)
            slow = ok.ops.max_pool(x, **attrs).numpy()
        monkeypatch.setattr(sharding, "_native", native)
        assert calls == [1]
        np.testing.assert_array_equal(fast, slow)  # nan where the numpy path has nan


CONVOLUTIONS = [  # (filter height and width, strides, dilations, padding, input height and width)
    ((3, 3), (1, 1), (1, 1), "SAME", (8, 8)),
    ((3, 3), (2, 2), (1, 1), "SAME", (7, 8)),
    ((2, 3), (1, 2), (1, 1), "VALID", (6, 7)),
    ((3, 3), (1, 1), (2, 2), "SAME", (7, 7)),  # dilated: a tap's columns are not contiguous
    ((3, 2), (2, 1), (2, 1), "VALID", (9, 6)),
    ((5, 5), (1, 1), (1, 1), "SAME", (3, 4)),  # windows wider than the input
]


@pytest.mark.parametrize("conv", CONVOLUTIONS, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("channels, dtype", [(1, "float32"), (2, "float16"), (3, "float64"), (16, "float32"),
                                             (4, "int32"), (2, "complex64")])
def test_native_im2col_matches_the_numpy_path(conv, channels, dtype, monkeypatch):
    from opkernel_cpu import nn_kernels

    (kh, kw), (sh, sw), (dh, dw), padding, (h, w) = conv
    x = (np.random.default_rng(channels).standard_normal((2, h, w, channels)) * 10).astype(dtype)
    attrs = {"strides": [1, sh, sw, 1], "dilations": [1, dh, dw, 1], "padding": padding, "data_format": "NHWC",
             "explicit_paddings": []}
    win = nn_kernels._conv_geometry("Conv2D", x.shape, (kh, kw, channels, 5), attrs).win
    fast = nn_kernels._im2col(x, win)
    monkeypatch.setattr(sharding, "_native", None)
    slow = nn_kernels._im2col(x, win)
    assert fast.dtype == slow.dtype and fast.shape == slow.shape
    np.testing.assert_array_equal(fast, slow)


@pytest.mark.parametrize("conv", CONVOLUTIONS[:4], ids=lambda c: "-".join(map(str, c)))
def test_convolutions_with_native_im2col_match_the_numpy_path(conv, monkeypatch):
    (kh, kw), (sh, sw), (dh, dw), padding, (h, w) = conv
    rng = np.random.default_rng(kh * 10 + sh)
    x = rng.standard_normal((2, h, w, 3)).astype(np.float32)
    f = rng.standard_normal((kh, kw, 3, 4)).astype(np.float32)
    attrs = {"strides": [1, sh, sw, 1], "dilations": [1, dh, dw, 1], "padding": padding}
    results = []
    for _ in range(2):
        with ok.use_backend("cpu"):
            y = ok.ops.conv2d(x, f, **attrs).numpy()
            dy = np.ones_like(y) + np.arange(y.size, dtype=np.float32).reshape(y.shape) / y.size
            dx = ok.ops.conv2d_backprop_input(np.array(x.shape, np.int32), f, dy, **attrs).numpy()
            df = ok.ops.conv2d_backprop_filter(x, np.array(f.shape, np.int32), dy, **attrs).numpy()
        results.append((y, dx, df))
        monkeypatch.setattr(sharding, "_native", None)
    for fast, slow in zip(*results):
        np.testing.assert_allclose(fast, slow, rtol=1e-6, atol=1e-5)


def test_native_im2col_rejects_what_it_cannot_copy():
    x = np.zeros((1, 4, 4, 2), np.float32)
    with pytest.raises(TypeError, match="one plain dtype"):
        native.im2col(x, np.zeros((16, 18), np.float64), (3, 3, 1, 1, 1, 1, 1, 1, 4, 4))
    with pytest.raises(TypeError, match="one plain dtype"):
        native.im2col(x.astype(object), np.zeros((16, 18), object), (3, 3, 1, 1, 1, 1, 1, 1, 4, 4))
    with pytest.raises(ValueError, match=r"\(n \* oh \* ow, kh \* kw \* c\)"):
        native.im2col(x, np.zeros((16, 17), np.float32), (3, 3, 1, 1, 1, 1, 1, 1, 4, 4))
    with pytest.raises(ValueError, match="not negative"):
        native.im2col(x, np.zeros((16, 18), np.float32), (3, 3, 1, 1, 1, 1, -1, 1, 4, 4))


@pytest.mark.parametrize("conv", CONVOLUTIONS, ids=lambda c: "-".join(map(str, c)))
def test_native_col2im_is_the_adjoint_of_im2col(conv):
    """<im2col(x), cols> == <x, col2im(cols)> for every x and cols: col2im adds each tap
    back exactly where im2col read it, and drops the padding's."""
    from opkernel_cpu import nn_kernels

    (kh, kw), (sh, sw), (dh, dw), padding, (h, w) = conv
    rng = np.random.default_rng(h * w)
    x = rng.standard_normal((2, h, w, 3))
    attrs = {"strides": [1, sh, sw, 1], "dilations": [1, dh, dw, 1], "padding": padding, "data_format": "NHWC",
             "explicit_paddings": []}
    win = nn_kernels._conv_geometry("Conv2D", x.shape, (kh, kw, 3, 5), attrs).win
    cols = rng.standard_normal((2 * win.oh * win.ow, kh * kw * 3))
    back = np.zeros_like(x)
    native.col2im(cols, back, (*nn_kernels._native_window(win), win.oh, win.ow))
    np.testing.assert_allclose(np.vdot(nn_kernels._im2col(x, win), cols), np.vdot(x, back), rtol=1e-12)


def test_native_col2im_rejects_what_it_cannot_add():
    cols = np.zeros((16, 18), np.float32)
    with pytest.raises(TypeError, match="float32 or float64"):
        native.col2im(cols, np.zeros((1, 4, 4, 2), np.float64), (3, 3, 1, 1, 1, 1, 1, 1, 4, 4))
    with pytest.raises(ValueError, match=r"\(n \* oh \* ow, kh \* kw \* c\)"):
        native.col2im(cols, np.zeros((1, 4, 4, 3), np.float32), (3, 3, 1, 1, 1, 1, 1, 1, 4, 4))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_native_relu_grad_matches_the_numpy_path(dtype, monkeypatch):
    rng = np.random.default_rng(5)
    g = rng.standard_normal((3, 5, 7)).astype(dtype)
    x = rng.standard_normal((3, 5, 7)).astype(dtype)
    x[0, 0, :3] = [0.0, -0.0, np.nan]  # not positive: the gradient is multiplied by 0
    g[0, 1, :2] = [np.nan, np.inf]  # a nan or inf gradient: nan where the feature is not positive
    x[0, 1, :2] = [-1.0, -1.0]
    calls = []
    real = native.relu_grad
    monkeypatch.setattr(native, "relu_grad", lambda *a: calls.append(1) or real(*a))
    with ok.use_backend("cpu"):
        fast = ok.ops.relu_grad(g, x[:, :, ::-1].copy()[:, :, ::-1]).numpy()  # a reversed view: copied first
        assert calls == [1]
        monkeypatch.setattr(sharding, "_native", None)
        slow = ok.ops.relu_grad(g, x).numpy()
    np.testing.assert_array_equal(fast, slow)
    assert np.isnan(fast[0, 1, :2]).all() and (fast[0, 0, :3] == 0).all()
    with pytest.raises(TypeError, match="one size"):
        native.relu_grad(g, x[:1], np.empty_like(g))


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"{g[0]}-{g[1]}-{g[2]}-{g[3]}")
@pytest.mark.parametrize("channels", [1, 3, 8, 16, 64])
@pytest.mark.parametrize("kind", ["random", "ties", "nan"])
def test_native_max_pool_with_argmax_matches_the_numpy_path(geometry, channels, kind, monkeypatch):
    (kh, kw), (sh, sw), padding, (h, w) = geometry
    rng = np.random.default_rng(channels + 3 * len(kind))
    dtype = np.float64 if channels == 3 else np.float32
    x = _data(rng, (2, h, w, channels), dtype, kind)
    attrs = {"ksize": [1, kh, kw, 1], "strides": [1, sh, sw, 1], "padding": padding}
    calls = []
    real = native.max_pool_with_argmax
    monkeypatch.setattr(native, "max_pool_with_argmax", lambda *a: calls.append(1) or real(*a))
    for include_batch in (False, True):
        results = []
        for use_native in (True, False):
            monkeypatch.setattr(sharding, "_native", native if use_native else None)
            with ok.use_backend("cpu"):
                y, arg = ok.ops.max_pool_with_argmax(x, include_batch_in_index=include_batch, **attrs)
            results.append((y.numpy(), arg.numpy()))
        (fy, fa), (sy, sa) = results
        np.testing.assert_array_equal(fy, sy)  # nan where the numpy path has nan
        assert fa.dtype == sa.dtype
        np.testing.assert_array_equal(fa, sa)
    assert calls == [1, 1]


def test_windows_of_padding_only_take_the_numpy_path():
    """A window with no real tap: the native pool gives it the lowest finite value (the start
    of TensorFlow's running maximum) and MaxPoolWithArgmax leaves
    such a geometry to the numpy path.  The op never asks for one: explicit padding as wide
    as the window is an error, as in TensorFlow."""
    x = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "EXPLICIT",
             "explicit_paddings": [0, 0, 3, 0, 0, 0, 0, 0]}
    y = np.empty((2, 3, 2, 3), np.float32)
    native.max_pool(x, y, (2, 2, 2, 2, 1, 1, 3, 0))
    with ok.use_backend("cpu"), pytest.raises(ok.errors.InvalidArgumentError, match="MaxPool.*top padding 3"):
        ok.ops.max_pool(x, **attrs)
    assert (y[:, 0] == np.finfo(np.float32).min).all()
    with ok.use_backend("cpu"):
        pooled = ok.ops.max_pool(x, **{**attrs, "explicit_paddings": [0, 0, 1, 0, 0, 0, 0, 0]}).numpy()
    np.testing.assert_array_equal(pooled, y[:, 1:])  # the same windows as y's rows with a real tap
    arg = np.empty((2, 3, 2, 3), np.int64)
    assert native.max_pool_with_argmax(x, y, arg, (2, 2, 2, 2, 1, 1, 3, 0), False) == 2 * 2  # the top row's windows


@pytest.mark.parametrize("dtype, label_dtype", [("float32", "int64"), ("float64", "int32"), ("float16", "int64")])
@pytest.mark.parametrize("op", ["SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyLoss"])
def test_native_sparse_xent_matches_the_numpy_path(dtype, label_dtype, op, monkeypatch):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((33, 10)) * 5).astype(dtype)
    x[0] += 80  # large logits: the maximum is subtracted first
    x[1, 3], x[2, 4] = np.nan, np.inf  # nan rows, as numpy's arithmetic gives them
    labels = rng.integers(0, 10, 33).astype(label_dtype)
    fn = ok.ops.sparse_softmax_cross_entropy_with_logits if op.endswith("Logits") else \
        (lambda f, l: ok.ops.sparse_softmax_cross_entropy_loss(f, l, reduction="mean"))
    calls = []
    real = native.sparse_xent
    monkeypatch.setattr(native, "sparse_xent", lambda *a: calls.append(1) or real(*a))
    results = []
    for use_native in (True, False):
        monkeypatch.setattr(sharding, "_native", native if use_native else None)
        with ok.use_backend("cpu"), np.errstate(invalid="ignore"):
            results.append([t.numpy() for t in fn(x, labels)])
    assert calls == [1]
    tol = {"float32": 2e-6, "float64": 1e-13, "float16": 1e-3}[dtype]
    for fast, slow in zip(*results):
        assert fast.dtype == slow.dtype
        np.testing.assert_allclose(fast, slow, rtol=tol, atol=tol)  # nan where the numpy path has nan


def test_native_sparse_xent_rejects_what_it_cannot_compute():
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(TypeError, match="int32 or int64 labels"):
        native.sparse_xent(x, np.zeros(4, np.int16), np.empty(4, np.float32), np.empty_like(x))
    with pytest.raises(ValueError, match=r"\(batch,\)"):
        native.sparse_xent(x, np.zeros(5, np.int64), np.empty(4, np.float32), np.empty_like(x))


def test_the_stub_lists_exactly_the_native_functions():
    """mypy reads _native.pyi: it must name every function the module has, and no other."""
    import pathlib
    import re

    stub = pathlib.Path(native.__file__).with_name("_native.pyi")  # package data, next to the module
    declared = set(re.findall(r"^def (\w+)\(", stub.read_text(), re.M))
    declared |= set(re.findall(r"^(\w+): np\.ufunc$", stub.read_text(), re.M))
    defined = {name for name in dir(native) if not name.startswith("_") and callable(getattr(native, name))}
    assert declared == defined


def test_native_kernels_reject_geometries_their_index_arithmetic_cannot_hold():
    import sys

    x = np.ones((1, 2, 2, 1), np.float32)
    with pytest.raises(ValueError, match="below 2\\*\\*31"):
        native.im2col(x, np.zeros((1, 1), np.float32), (1, 1, 1, sys.maxsize, 1, 1, 0, 2, 1, 1))
    with pytest.raises(ValueError, match="below 2\\*\\*31"):  # n * oh * ow wraps around
        native.im2col(x, np.zeros((4, 1), np.float32), (1, 1, 1, 1, 1, 1, 0, 0, 2**62 + 1, 4))
    with pytest.raises(ValueError, match="below 2\\*\\*31"):
        native.col2im(np.zeros((4, 1), np.float32), x.copy(), (1, 1, 1, 1, 1, 1, 0, 0, 2**62 + 1, 4))
    with pytest.raises(ValueError, match="below 2\\*\\*31"):  # kh * kw wraps around
        native.max_pool(x, np.zeros((1, 1, 1, 1), np.float32), (2**32, 2**32, 1, 1, 1, 1, 0, 0))
    # through the ops such geometries take the numpy path
    with ok.use_backend("cpu"):
        y = ok.ops.conv2d(x, np.ones((1, 1, 1, 1), np.float32), strides=[1, 1, 2**40, 1], padding="VALID").numpy()
    np.testing.assert_array_equal(y, np.ones((1, 2, 1, 1), np.float32))


def test_native_kernels_take_unaligned_inputs_and_any_64_bit_labels():
    raw = np.zeros(2 * 4 * 4 * 3 * 4 + 1, np.uint8)
    x = np.frombuffer(raw.data, np.float32, 2 * 4 * 4 * 3, offset=1).reshape(2, 4, 4, 3)
    assert not x.flags.aligned
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(ok.ops.max_pool(x, **attrs).numpy(), np.zeros((2, 2, 2, 3), np.float32))
        np.testing.assert_array_equal(ok.ops.relu_grad(x, x).numpy(), np.zeros_like(x))
        labels = np.array([1, 0], np.longlong)  # numpy's other 64-bit type number
        loss, _ = ok.ops.sparse_softmax_cross_entropy_loss(np.zeros((2, 3), np.float32), labels, reduction="mean")
    np.testing.assert_allclose(loss.numpy(), np.log(3), rtol=1e-6)


def test_the_pool_keeps_large_blocks_and_thread_counts_in_range():
    import sys

    x = np.arange(10, dtype=np.float64)
    out = np.empty_like(x)
    assert native.run(np.negative, (x,), out, 2, sys.maxsize) == 0  # one block, no overflow
    np.testing.assert_array_equal(out, -x)
    assert native.run(np.negative, (x,), out, 10_000, 1) == 0  # clamped to the pool's limit
    np.testing.assert_array_equal(out, -x)


@pytest.mark.parametrize("use_native", [True, False])
def test_integer_power_errors_reach_the_caller_from_either_pool(use_native, monkeypatch):
    monkeypatch.setattr(sharding, "_native", native if use_native else None)
    base = np.full(sharding.MIN_ELEMENTS_PER_SHARD * 4, 2, np.int64)
    exponent = np.ones_like(base)
    exponent[-1] = -1
    with pytest.raises(ValueError, match="negative integer powers"):
        sharding._run_sharded(np.power, (base, exponent), 2, False, sharding.MIN_ELEMENTS_PER_SHARD,
                              (np.power, base.dtype, exponent.dtype))


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="fesetround's constants are x86's")
def test_pool_threads_compute_in_the_callers_rounding_mode():
    import ctypes

    libm = ctypes.CDLL(None)
    x = np.full(sharding.MIN_ELEMENTS_PER_SHARD * 4, 1.0, np.float32)
    y = np.full_like(x, 1e-8)
    for _ in range(3):  # wake the pool threads up first: they keep their mode between jobs
        native.run(np.add, (x, y), np.empty_like(x), 2, 4096)
    assert libm.fesetround(0x800) == 0  # FE_UPWARD
    try:
        out = np.empty_like(x)
        native.run(np.add, (x, y), out, 2, 4096)
        expected = np.add(x, y)
    finally:
        libm.fesetround(0)  # FE_TONEAREST
    assert (expected > 1).all()  # rounded up
    np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------- the native erf ufunc


def _ulps(got, want):
    """|got - want| in float32 ulps of want (want in float64)."""
    spacing = np.spacing(np.abs(want.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def test_native_erf_float32_is_within_2_5_ulp_everywhere():
    import math

    x = np.concatenate([np.linspace(-5, 5, 400_001, dtype=np.float32),
                        np.geomspace(1e-30, 5, 20_001).astype(np.float32)])
    want = np.array([math.erf(float(v)) for v in x])
    assert _ulps(native.erf(x), want).max() <= 2.5


def test_native_erf_float32_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.919206, -3.919206, 1e-45, 1.0, -1.0], np.float32)
    with np.errstate(invalid="raise"):  # a NaN raises no invalid flag (the loop clears the one its compare sets)
        y = native.erf(x)
    assert np.array_equal(np.signbit(y[:2]), [False, True]) and y[0] == 0 and y[1] == 0
    assert y[2] == 1 and y[3] == -1 and np.isnan(y[4])
    assert y[5] == 1 and y[6] == -1  # the first float32 whose erf rounds to 1
    assert native.erf(np.nextafter(np.float32(3.919206), np.float32(0))) < 1
    assert y[7] > 0 and y[8] == np.float32(0.8427008) and y[9] == -y[8]


def test_native_erf_float64_is_the_c_librarys():
    import math

    x = np.concatenate([np.linspace(-7, 7, 20_001), [0.0, -0.0, np.inf, -np.inf, 1e-300, 27.0]])
    assert np.array_equal(native.erf(x), np.array([math.erf(v) for v in x]))


def test_native_erf_strided_in_place_and_sharded_agree_with_the_contiguous_call():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((700, 300)).astype(np.float32) * 3
    contiguous = native.erf(x)
    assert np.array_equal(native.erf(x[:, ::3]), contiguous[:, ::3])  # the strided loop
    inplace = x.copy()
    native.erf(inplace, out=inplace)
    assert np.array_equal(inplace, contiguous)
    out = np.empty_like(x)
    assert native.run(native.erf, (x,), out, 2, 4096) == 0  # the pool: blocks on two threads
    assert np.array_equal(out, contiguous)


def test_erf_kernel_native_and_numpy_paths_agree():
    from opkernel_cpu import math_kernels

    rng = np.random.default_rng(4)
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        T = ok.as_dtype(dtype)
        x = (rng.standard_normal(5000) * 2).astype(T.np)
        fast, slow = math_kernels.erf(x, T=T), math_kernels.erf_cody(x, T)
        assert fast.dtype == slow.dtype == T.np
        tol = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 3e-7, "float64": 1e-15}[dtype]
        np.testing.assert_allclose(fast.astype(np.float64), slow.astype(np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------- the native row kernels


def _numpy_rows(kind, x):
    with np.errstate(all="ignore"):
        if kind == sharding.ROW_SUM:
            return x.sum(-1)
        shifted = x - x.max(-1, keepdims=True)
        if kind == sharding.SOFTMAX:
            e = np.exp(shifted)
            return e / e.sum(-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


@pytest.mark.parametrize("kind", [sharding.SOFTMAX, sharding.LOG_SOFTMAX, sharding.ROW_SUM], ids=["softmax", "log_softmax", "sum"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1,), (3, 7), (5, 8), (2, 3, 64), (300, 1000), (2, 1)])
def test_native_rows_match_numpy(kind, dtype, shape):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    want = _numpy_rows(kind, x)
    out = np.empty(want.shape, dtype)
    for threads in (1, 2):
        assert native.rows(kind, x, out, threads) == 0
        tol = 2e-6 if dtype == "float32" else 1e-14
        if kind == sharding.ROW_SUM:
            np.testing.assert_allclose(out, want, rtol=tol * 10, atol=tol * np.sqrt(shape[-1]) * 4)
        else:
            np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
        if threads == 1:
            single = out.copy()
        else:  # rows are whole on one thread: the split changes no bit
            assert np.array_equal(out, single)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_native_softmax_special_rows(dtype):
    x = np.array([[0, -np.inf, 1], [np.nan, 1, 2], [-np.inf] * 3, [-200, 0, -100], [1000, 1001, -1000],
                  [np.inf, 0, 1]], dtype)
    for kind in (sharding.SOFTMAX, sharding.LOG_SOFTMAX):
        out = np.empty_like(x)
        assert native.rows(kind, x, out, 1) == 0
        want = _numpy_rows(kind, x)
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-30, equal_nan=True)
        assert np.array_equal(np.isnan(out), np.isnan(want))


def test_native_rows_refuse_what_they_cannot_compute():
    x = np.ones((4, 6), np.float32)
    assert native.rows(0, x[:, ::2], np.empty((4, 3), np.float32), 1) == -2  # not contiguous
    assert native.rows(0, x, np.empty((4, 6), np.float64), 1) == -2  # mixed types
    assert native.rows(2, x, np.empty((4, 6), np.float32), 1) == -2  # sums: one value a row
    assert native.rows(0, x.astype(np.int32), np.empty((4, 6), np.int32), 1) == -2
    assert native.rows(0, np.ones((4, 0), np.float32), np.empty((4, 0), np.float32), 1) == -2
    with pytest.raises(ValueError, match="kind"):
        native.rows(3, x, np.empty_like(x), 1)
    assert sharding.rows(sharding.SOFTMAX, x[:, ::2]) is None  # the kernels take numpy's path then
    assert sharding.rows(sharding.SOFTMAX, x.astype(np.float16)) is None


# ---------------------------------------------------------------- layer normalization


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 16), (300, 64), (2048, 64), (9,), (20000, 5), (70, 3000)])
def test_native_layer_norm_matches_the_numpy_path(dtype, shape, monkeypatch):
    """FusedLayerNorm and FusedLayerNormGrad on the cpu backend: the native row kernel
    (threaded past 64 K elements; the parameters' gradients from per-block column sums,
    several blocks of rows, a last one short, a row longer than a block) against the
    numpy path, values and all three gradients."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    scale, offset = rng.standard_normal(shape[-1]).astype(dtype), rng.standard_normal(shape[-1]).astype(dtype)
    calls = []
    real = native.layer_norm
    monkeypatch.setattr(native, "layer_norm", lambda *a: calls.append(a[1] is None) or real(*a))

    def run():
        with ok.use_backend("cpu"):
            y = ok.ops.fused_layer_norm(x, scale, offset, epsilon=1e-3).numpy()
            return [y] + [t.numpy() for t in ok.ops.fused_layer_norm_grad(dy, x, scale, epsilon=1e-3)]

    fast = run()
    assert calls == [True, False]  # the forward and the gradient took the native kernel
    monkeypatch.setattr(sharding, "_native", None)
    slow = run()
    tol = 2e-5 if dtype == "float32" else 1e-12
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * 10)


def test_native_layer_norm_refuses_what_it_cannot_compute():
    x, s = np.ones((4, 6), np.float32), np.ones(6, np.float32)
    out = np.empty((4, 6), np.float32)
    assert native.layer_norm(x[:, ::2], None, s[:3], s[:3], np.empty((4, 3), np.float32), None, 1e-3, 1) == -2
    assert native.layer_norm(x, None, s.astype(np.float64), s, out, None, 1e-3, 1) == -2  # mixed types
    assert native.layer_norm(x, None, s[:5], s, out, None, 1e-3, 1) == -2  # scale of another size
    assert native.layer_norm(x, x, s, None, out, np.empty((4, 1), np.float32), 1e-3, 1) == -2  # stats: 2 a row
    stats = np.empty((4, 2), np.float32)
    assert native.layer_norm(x, x, s, None, out, stats, 1e-3, 1, np.zeros((1, 2, 5), np.float32)) == -2  # [blocks, 2, n]
    assert native.layer_norm(x, x, s, None, out, stats, 1e-3, 1, np.zeros((1, 2, 6), np.float64)) == -2  # its type
    assert native.layer_norm(x, None, s, s, out, None, 1e-3, 1, np.zeros((1, 2, 6), np.float32)) == -2  # forward
    partials = np.zeros((1, 2, 6), np.float32)
    assert native.layer_norm(x, x, s, None, out, stats, 1e-3, 1, partials) == 0
    np.testing.assert_allclose(partials[0, 1], x.sum(0))  # sum(dy) over the rows (dy = x here)
    assert native.layer_norm(x.astype(np.float16), None, s.astype(np.float16), s.astype(np.float16),
                             out.astype(np.float16), None, 1e-3, 1) == -2
    assert sharding.layer_norm(x[:, ::2], s[:3], s[:3], 1e-3) is None  # the kernels take numpy's path then


# ---------------------------------------------------------------- fused elementwise programs


def _gelu_program():
    """x * 0.5 * (erf(x * c) + 1), as ok.nn.gelu traces it: slots 0 x, 1 0.5, 2 c, 3 1.0."""
    return ((np.multiply, (0, 1), 4), (np.multiply, (0, 2), 5), (native.erf, (5,), 6), (np.add, (6, 3), 7),
            (np.multiply, (4, 7), 8))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", [1, 255, 256, 257, 5000, 70_001])
def test_native_fused_program_is_bit_identical_to_the_ufuncs_in_turn(dtype, size):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal(size) * 3).astype(dtype)
    consts = [np.array(v, dtype) for v in (0.5, 1 / np.sqrt(2), 1.0)]
    half = x * consts[0]
    want = half * (native.erf(x * consts[1]) + consts[2])
    for threads in (1, 2):
        out, half_out = np.empty_like(x), np.empty_like(x)
        rc = native.fused(_gelu_program(), (x, *consts), ((1, size), (1, 1), (1, 1), (1, 1)), (out, half_out), (8, 4), threads)
        assert rc == 0
        assert np.array_equal(out, want) and np.array_equal(half_out, half)


def test_native_fused_broadcast_layouts():
    """Rows (inner 1), columns (mod = the leading size) and a middle run, gathered per sub-block."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 70, 33)).astype(np.float32)
    row = rng.standard_normal(33).astype(np.float32)         # [33]: inner 1, mod 33
    col = rng.standard_normal((6, 70, 1)).astype(np.float32)  # [6, 70, 1]: inner 33, mod 420
    mid = rng.standard_normal((70, 1)).astype(np.float32)     # [70, 1]: inner 33, mod 70
    program = ((np.subtract, (0, 2), 4), (np.multiply, (4, 1), 5), (np.add, (5, 3), 6))
    out = np.empty_like(x)
    for threads in (1, 2):
        rc = native.fused(program, (x, row, col, mid), ((1, x.size), (1, 33), (33, 420), (33, 70)), (out,), (6,), threads)
        assert rc == 0
        assert np.array_equal(out, (x - col) * row + mid)


def test_native_fused_refuses_what_it_cannot_run():
    x = np.ones(10, np.float32)
    out = np.empty_like(x)
    one = ((np.negative, (0,), 1),)
    assert native.fused(one, (x,), ((1, 10),), (out,), (1,), 1) == 0 and np.array_equal(out, -x)
    assert native.fused(one, (x[::2],), ((1, 5),), (out[:5],), (1,), 1) == -2             # not contiguous
    assert native.fused(one, (x.astype(np.float64),), ((1, 10),), (out,), (1,), 1) == -2  # mixed dtypes
    assert native.fused(one, (x,), ((1, 9),), (out,), (1,), 1) == -2                     # layout vs size
    assert native.fused(((np.negative, (1,), 1),), (x,), ((1, 10),), (out,), (1,), 1) == -3  # reads itself
    assert native.fused(((np.negative, (0,), 2),), (x,), ((1, 10),), (out,), (1,), 1) == -3  # wrong slot
    assert native.fused(((np.add, (0,), 1),), (x,), ((1, 10),), (out,), (1,), 1) == -3       # arity
    assert native.fused(((np.isnan, (0,), 1),), (x,), ((1, 10),), (out,), (1,), 1) == -3     # no f->f loop
    assert native.fused(one, (x,), ((1, 10),), (out,), (0,), 1) == -3                      # an input as output
    too_long = tuple((np.negative, (k,), k + 1) for k in range(33))
    assert native.fused(too_long, (x,), ((1, 10),), (out,), (33,), 1) == -3


# ---------------------------------------------------------------- large broadcasting binary ops


@pytest.mark.parametrize("shapes", [((128, 70, 65), (65,)), ((128, 70, 65), (128, 70, 1)), ((128, 70, 65), ()),
                                    ((4096, 1), (1, 140)), ((70, 1), (128, 70, 65))],
                         ids=["row", "column", "scalar", "outer", "middle-first"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_broadcasts_run_natively_and_bit_identically(shapes, dtype, monkeypatch):
    rng = np.random.default_rng(8)
    x, y = (rng.standard_normal(s).astype(dtype) for s in shapes)
    calls = []
    real = native.fused
    monkeypatch.setattr(native, "fused", lambda *a: calls.append(a) or real(*a))
    with ok.use_backend("cpu"):
        for op, fn in ((ok.ops.mul, np.multiply), (ok.ops.sub, np.subtract), (ok.ops.real_div, np.true_divide)):
            got = op(ok.tensor(x), ok.tensor(y)).numpy()
            assert np.array_equal(got, fn(x, y))
    assert len(calls) == 3  # every one took the native path


def test_large_broadcasts_keep_numpys_warnings_and_leave_other_types_alone(monkeypatch):
    calls = []
    real = native.fused
    monkeypatch.setattr(native, "fused", lambda *a: calls.append(a) or real(*a))
    big = np.full((800, 800), 3e38, np.float32)  # past the size where a Mul is shared out
    with ok.use_backend("cpu"):
        with pytest.warns(RuntimeWarning, match="overflow"):
            ok.ops.mul(ok.tensor(big), ok.tensor(np.float32(10)))  # Mul lets numpy warn, as before
        assert len(calls) == 1
        ints = np.arange(640_000, dtype=np.int32).reshape(800, 800)
        assert np.array_equal(ok.ops.mul(ok.tensor(ints), ok.tensor(np.int32(3))).numpy(), ints * 3)
        less = ok.ops.less(ok.tensor(big), ok.tensor(np.float32(1))).numpy()
        assert less.dtype == np.bool_ and not less.any()
    assert len(calls) == 1  # int32 and a comparison (bool result) take numpy's call


# ---------------------------------------------------------------- the native sigmoid ufunc


def test_native_sigmoid_float32_is_within_2_5_ulp_where_the_result_is_normal():
    x = np.concatenate([np.linspace(-90, 90, 400_001, dtype=np.float32), np.geomspace(1e-30, 20, 20_001).astype(np.float32)])
    x = np.concatenate([x, -x])
    want = 1 / (1 + np.exp(-x.astype(np.float64)))
    got = native.sigmoid(x)
    normal = want > np.finfo(np.float32).tiny
    assert _ulps(got[normal], want[normal]).max() <= 2.5
    assert np.all(got[~normal] <= np.finfo(np.float32).tiny)  # results below the normal floats: 0 or the least


def test_native_sigmoid_special_values_and_float64():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.0, -88.0], np.float32)
    with np.errstate(invalid="raise"):
        y = native.sigmoid(x)
    assert y[0] == y[1] == 0.5 and y[2] == 1 and y[3] == 0 and np.isnan(y[4]) and y[5] == 1 and y[6] == 0
    d = np.linspace(-700, 700, 20_001)
    want = np.where(d >= 0, 1 / (1 + np.exp(-np.abs(d))), np.exp(-np.abs(d)) / (1 + np.exp(-np.abs(d))))
    np.testing.assert_allclose(native.sigmoid(d), want, rtol=1e-15, atol=0)


# ---------------------------------------------------------------- the native elu and selu ufuncs


@pytest.mark.parametrize("name", ["elu", "selu"])
def test_native_elu_selu_float32_within_3_ulp_and_specials(name):
    from opkernel.ops.activation_ops import SELU_ALPHA, SELU_SCALE

    neg, pos = (1.0, 1.0) if name == "elu" else (SELU_SCALE * SELU_ALPHA, SELU_SCALE)
    fn = getattr(native, name)
    x = np.concatenate([np.linspace(-100, 10, 400_001), -np.geomspace(1e-30, 100, 40_001)]).astype(np.float32)
    x64 = x.astype(np.float64)
    want = np.where(x64 < 0, neg * np.expm1(np.minimum(x64, 0)), pos * x64)
    assert _ulps(fn(x), want).max() <= 3
    with np.errstate(invalid="raise"):
        y = fn(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32))
    assert y[0] == 0 and y[1] == 0 and np.signbit(y[1]) and y[2] == np.inf and np.isnan(y[4])
    assert y[3] == np.float32(-neg)
    d = np.linspace(-40, 5, 4001)
    np.testing.assert_allclose(fn(d), np.where(d < 0, neg * np.expm1(np.minimum(d, 0)), pos * d), rtol=1e-15)


def test_native_softplus_float32_within_3_5_ulp_and_specials():
    x = np.concatenate([np.linspace(-100, 100, 400_001), np.geomspace(1e-30, 100, 40_001),
                        -np.geomspace(1e-30, 100, 40_001)]).astype(np.float32)
    want = np.logaddexp(x.astype(np.float64), 0)
    got = native.softplus(x)
    normal = want > np.finfo(np.float32).tiny
    assert _ulps(got[normal], want[normal]).max() <= 3.5
    with np.errstate(invalid="raise"):
        y = native.softplus(np.array([0.0, np.inf, -np.inf, np.nan, 88.0], np.float32))
    assert y[0] == np.float32(np.log(2)) and y[1] == np.inf and y[2] == 0 and np.isnan(y[3]) and y[4] == 88
    d = np.linspace(-700, 700, 10_001)
    np.testing.assert_allclose(native.softplus(d), np.logaddexp(d, 0), rtol=1e-15)


# ---------------------------------------------------------------- batched matrix products


@pytest.mark.parametrize("shapes, adj", [
    (((128, 64, 16), (128, 16, 64)), (False, False)),  # attention's scores
    (((128, 64, 64), (128, 64, 16)), (False, False)),  # and its weighted sum
    (((128, 64, 16), (128, 64, 16)), (False, True)),  # a transposed operand (strided items)
    (((128, 16, 64), (128, 16, 64)), (True, False)),
    (((4, 32, 64, 16), (4, 32, 16, 64)), (False, False)),  # two batch dimensions
    (((128, 64, 64), (64, 16)), (False, False)),  # a matrix broadcast over the batch
    (((1, 64, 64), (96, 64, 16)), (False, False)),
    (((4, 1, 64, 32), (1, 8, 32, 64)), (False, False)),  # both sides broadcast
], ids=["scores", "weighted", "adj_y", "adj_x", "rank4", "matrix-b", "single-a", "outer"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_matmul_shares_the_batch_out(shapes, adj, dtype, monkeypatch):
    rng = np.random.default_rng(11)
    x, y = (rng.standard_normal(s).astype(dtype) for s in shapes)
    calls = []
    real = native.matmul
    monkeypatch.setattr(native, "matmul", lambda *a: calls.append(a[3]) or real(*a))
    with ok.use_backend("cpu"):
        got = ok.ops.batch_mat_mul(ok.tensor(x), ok.tensor(y), adj_x=adj[0], adj_y=adj[1]).numpy()
    a = np.swapaxes(x, -1, -2) if adj[0] else x
    b = np.swapaxes(y, -1, -2) if adj[1] else y
    _assert_matmul_equal(got, a, b)
    assert len(calls) == 1 and calls[0] == (ok.config.intra_op_parallelism_threads or sharding.cores())


def _assert_matmul_equal(got, a, b):
    """float64 items go through numpy's loop per item: np.matmul's bits.  float32 items
    of these sizes take the register-blocked kernel: within float32 rounding of the exact
    products (the sums' order and fused multiply-adds differ from BLAS's)."""
    if got.dtype == np.float64:
        assert np.array_equal(got, np.matmul(a, b))
        return
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    bound = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64)) * (a.shape[-1] + 2) * 2.0 ** -24
    assert (np.abs(got - exact) <= bound).all()


def test_batch_matmul_leaves_what_cannot_gain_to_numpy(monkeypatch):
    calls = []
    real = native.matmul
    monkeypatch.setattr(native, "matmul", lambda *a: calls.append(a) or real(*a))
    rng = np.random.default_rng(12)
    cases = [((2, 3, 4), (2, 4, 5), "float32"),  # too little work to share
             ((4, 128, 128), (4, 128, 128), "float32"),  # items large enough for BLAS's own threads
             ((64, 64, 64), (64, 64, 64), "int32")]  # no BLAS
    with ok.use_backend("cpu"):
        for sa, sb, dtype in cases:
            x = (rng.standard_normal(sa) * 4).astype(dtype)
            y = (rng.standard_normal(sb) * 4).astype(dtype)
            assert np.array_equal(ok.ops.batch_mat_mul(ok.tensor(x), ok.tensor(y)).numpy(), np.matmul(x, y))
        with pytest.raises(ok.errors.InvalidArgumentError, match="BatchMatMul.*broadcast"):
            ok.ops.batch_mat_mul(ok.tensor(np.ones((4, 2, 64, 64), np.float32)), ok.tensor(np.ones((3, 64, 64), np.float32)))
    assert calls == []


def test_batch_matmul_takes_attentions_strided_views_where_they_lie(monkeypatch):
    """Queries and keys are views of one projection ([3, b, h, t, d] transposed): the
    native call gets them as they are, not reshaped into copies."""
    rng = np.random.default_rng(13)
    qkv = rng.standard_normal((32, 64, 3, 4, 16)).astype(np.float32)
    calls = []
    real = native.matmul
    monkeypatch.setattr(native, "matmul", lambda *a: calls.append([x.flags.c_contiguous for x in a[:2]]) or real(*a))
    with ok.use_backend("cpu"):
        t = ok.ops.transpose(ok.tensor(qkv), [2, 0, 3, 1, 4])
        q, k = t[0], t[1]
        got = ok.ops.batch_mat_mul(q, k, adj_y=True).numpy()
    _assert_matmul_equal(got, qkv[:, :, 0].transpose(0, 2, 1, 3), qkv[:, :, 1].transpose(0, 2, 3, 1))
    assert len(calls) == 1


def test_native_matmul_refuses_what_it_cannot_compute():
    a = np.ones((8, 4, 5), np.float32)
    b = np.ones((8, 5, 3), np.float32)
    out = np.empty((8, 4, 3), np.float32)
    assert native.matmul(a, b, out, 2) == 0 and (out == 5).all()
    assert native.matmul(a, b.astype(np.float64), out, 2) == -2  # mixed types
    assert native.matmul(a.astype(np.int32), b.astype(np.int32), out.astype(np.int32), 2) == -2
    assert native.matmul(a, np.ones((8, 4, 3), np.float32), out, 2) == -2  # inner sizes differ
    assert native.matmul(a, np.ones((3, 5, 3), np.float32), out, 2) == -2  # batch neither 8 nor 1
    assert native.matmul(a[0], b[0], out[0], 2) == -2  # rank 2
    assert native.matmul(a, b[None], out[None], 2) == -2  # ranks differ
    assert native.matmul(a[:1], b, out, 2) == 0 and (out == 5).all()  # a batch of 1 broadcasts
    out.flags.writeable = False
    assert native.matmul(a, b, out, 2) == -2


def test_batch_matmul_keeps_numpys_warnings(monkeypatch):
    x = np.full((64, 32, 32), 3e38, np.float32)
    with ok.use_backend("cpu"), np.errstate(over="warn"):
        with pytest.warns(RuntimeWarning, match="overflow"):
            got = ok.ops.batch_mat_mul(ok.tensor(x), ok.tensor(x)).numpy()
    assert np.isinf(got).all()


@pytest.mark.parametrize("dtype,id_type", [(np.float32, np.int32), (np.float64, np.int64)])
def test_native_segment_sum_is_np_add_at_bit_for_bit(dtype, id_type):
    rng = np.random.default_rng(5)
    data = (rng.standard_normal((3000, 17)) * 1e3).astype(dtype)
    ids = rng.integers(-2, 40, 3000).astype(id_type)
    want = np.zeros((40, 17), dtype)
    keep = ids >= 0
    np.add.at(want, ids[keep], data[keep])
    got = np.zeros((40, 17), dtype)
    assert native.segment_sum(data, ids, got) == 0
    assert np.array_equal(got, want)
    with ok.use_backend("cpu"):
        assert np.array_equal(ok.ops.unsorted_segment_sum(data, ids, id_type(40)).numpy(), want)


def test_native_segment_sum_adds_nothing_where_it_does_not_apply():
    data, out = np.ones((3, 2), np.float32), np.zeros((2, 2), np.float32)
    assert native.segment_sum(data, np.array([0, 2, 1], np.int32), out) == -2  # an id past out's rows
    assert not out.any()
    assert native.segment_sum(data, np.array([0, 1, 1], np.int16), out) == -2  # an id type it does not take
    assert native.segment_sum(data.astype(np.float64), np.array([0, 1, 1], np.int32), out) == -2  # mixed types
    assert native.segment_sum(data[:, :1], np.array([0, 1, 1], np.int32), out) == -2  # widths differ
    assert not out.any()


def test_native_gelu_float32_is_the_composition_bit_for_bit():
    x = (np.random.default_rng(6).standard_normal(100_003) * 4).astype(np.float32)
    x[:4] = [np.nan, np.inf, -np.inf, -0.0]
    with np.errstate(invalid="ignore"):  # -inf * 0
        composed = x * np.float32(0.5) * (native.erf(x * np.float32(0.7071067811865476)) + np.float32(1))
    np.testing.assert_array_equal(native.gelu(x), composed)
    np.testing.assert_array_equal(native.gelu(x[::3]), composed[::3])  # strided: through the buffer, the same bits
    dy = np.ones_like(x)
    g = native.gelu_grad(dy, x)
    assert np.isnan(g[0]) and g[1] == 1 and g[2] == 0  # NaN stays; +-inf give the derivative's limits
    np.testing.assert_array_equal(native.gelu_grad(dy[::3], x[::3]), g[::3])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nesterov", [False, True])
def test_native_adam_is_the_numpy_path_bit_for_bit(dtype, nesterov, monkeypatch):
    # ApplyAdam on cpu: one native pass (vectors, then a scalar tail) against the numpy
    # path's dozen passes, the same operations in the same order; sizes with and without
    # a tail, and values where v is negative (NaN from sqrt, as numpy gives it), huge or 0.
    from opkernel_cpu import state_kernels

    rng = np.random.default_rng(8)
    calls = []
    real = native.adam
    monkeypatch.setattr(native, "adam", lambda *a: calls.append(1) or real(*a))
    for n in (1, 3, 8, 1001):
        var, m, v, grad = (rng.standard_normal(n) * 10).astype(dtype), rng.standard_normal(n).astype(dtype), \
            np.abs(rng.standard_normal(n)).astype(dtype), (rng.standard_normal(n) * 100).astype(dtype)
        v[: n // 3] *= -1  # sqrt of a negative second moment: NaN on both paths
        grad[-1:] = np.finfo(dtype).max / 4
        scalars = [np.asarray(s, dtype) for s in (0.81, 0.998, 1e-3, 0.9, 0.999, 1e-7)]
        results = []
        for use_native in (True, False):
            monkeypatch.setattr(sharding, "_native", native if use_native else None)
            slots = [var.copy(), m.copy(), v.copy()]
            with np.errstate(all="ignore"):
                state_kernels.apply_adam(*slots, *scalars, grad, use_nesterov=nesterov)
            results.append(slots)
        for fast, slow in zip(*results):
            np.testing.assert_array_equal(fast.view(np.uint8), slow.view(np.uint8))
    assert len(calls) == 4  # the native pass ran for every size


def test_native_adam_writes_nothing_where_it_does_not_apply():
    a = [np.ones(8, np.float32) for _ in range(4)]
    scalars = (1e-3, 0.1, 0.001, 0.9, 1e-7, False)
    assert native.adam(a[0], a[1], a[2], a[0], *scalars) == -2  # grad is var: the caller takes the numpy path
    assert native.adam(a[0], a[1], a[2][:4], a[3], *scalars) == -2  # sizes differ
    assert native.adam(a[0], a[1], a[2], a[3].astype(np.float64), *scalars) == -2  # mixed types
    buf = np.ones(12, np.float32)
    assert native.adam(buf[:8], buf[4:], a[2], a[3], *scalars) == -2  # overlapping slots
    ro = np.ones(8, np.float32)
    ro.flags.writeable = False
    assert native.adam(a[0], ro, a[2], a[3], *scalars) == -2  # a slot it cannot write
    assert all((x == 1).all() for x in a) and (buf == 1).all()
    from opkernel_cpu import state_kernels  # the kernel with grad aliasing var: the numpy path's result

    scal = [np.asarray(x, np.float32) for x in (0.5, 0.5, 0.1, 0.9, 0.999, 1e-7)]
    got = [np.arange(5, dtype=np.float32), np.zeros(5, np.float32), np.zeros(5, np.float32)]
    state_kernels.apply_adam(*got, *scal, got[0], use_nesterov=False)
    var = np.arange(5, dtype=np.float32)
    grad = var.copy()
    want = [var, np.zeros(5, np.float32), np.zeros(5, np.float32)]
    state_kernels.apply_adam(*want, *scal, grad, use_nesterov=False)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_register_blocked_matmul_edges_strides_and_non_finite_values():
    # float32 items of up to 512 columns of b and 512 steps of k take sgemm_small: rows
    # past whole blocks of 6 and columns past whole blocks of 16 (copies of the last row
    # and column), b copied into rows (transposed, a column stride, odd widths) or read in
    # place, negative strides, an out of any strides; and no floating-point flag of the
    # padding's own: inf in a with a width that needs padding warns of nothing numpy's
    # loop would not.
    rng = np.random.default_rng(21)
    for n, k, m in ((1, 1, 1), (7, 3, 17), (6, 16, 16), (13, 64, 33), (64, 512, 512), (5, 2, 48)):
        a = rng.standard_normal((3, n, k)).astype(np.float32)
        b = rng.standard_normal((3, k, m)).astype(np.float32)
        bt = np.swapaxes(np.ascontiguousarray(np.swapaxes(b, 1, 2)), 1, 2)  # b with a column stride
        at = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 1, 2)), 1, 2)
        for x, y in ((a, b), (at, b), (a, bt), (a[:, ::-1], b[:, ::-1]), (a, b[:1])):
            out = np.empty(np.broadcast_shapes(x.shape[:1], y.shape[:1]) + (n, m), np.float32)
            assert native.matmul(x, y, out, 2) == 0
            _assert_matmul_equal(out, x, y)
        out_t = np.empty((3, m, n), np.float32).transpose(0, 2, 1)  # out with a column stride
        assert native.matmul(a, b, out_t, 2) == 0
        _assert_matmul_equal(out_t, a, b)
    a = np.ones((4, 7, 5), np.float32)
    a[1, 3, 2] = np.inf
    b = np.ones((4, 5, 3), np.float32)  # 3 columns: padded to 16 with copies
    out = np.empty((4, 7, 3), np.float32)
    assert native.matmul(a, b, out, 2) == 0  # no flag: inf * 1 only
    assert np.isinf(out[1, 3]).all() and np.isfinite(np.delete(out.reshape(-1, 3), 7 + 3, axis=0)).all()
    b[2, 1, 0] = np.nan
    assert native.matmul(a, b, out, 2) == 0  # NaN propagates as it is, raising nothing
    assert np.isnan(out[2, :, 0]).all() and not np.isnan(out[2, :, 1:]).any()
    b[1, 2, 1] = 0  # inf * 0: invalid, as numpy's loop reports it
    assert native.matmul(a, b, out, 2) != 0 and np.isnan(out[1, 3, 1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_softmax_grad_matches_the_numpy_path_on_any_thread_count(dtype, monkeypatch):
    # SoftmaxGrad on cpu: the native row kernel (its lanes, their tail, rows shared out on
    # the pool) against the numpy composition, with NaN and inf rows as numpy gives them.
    from opkernel_cpu import nn_kernels

    rng = np.random.default_rng(9)
    g = rng.standard_normal((700, 203)).astype(dtype)
    logits = rng.standard_normal((700, 203))
    s = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(dtype)
    g[3, 5], g[4, 0], s[5, 7] = np.nan, np.inf, np.inf
    want = nn_kernels.softmax_grad_values(g, s)
    for threads in (1, 2):
        out = np.empty_like(g)
        assert native.softmax_grad(g, s, out, threads) >= 0
        np.testing.assert_allclose(out, want, rtol={np.float32: 1e-5, np.float64: 1e-12}[dtype],
                                   atol={np.float32: 1e-6, np.float64: 1e-15}[dtype])
        assert np.isnan(out[3]).all() and np.isnan(out[4, 0]) and (out[4, 1:] == -np.inf).all() and np.isfinite(out[6]).all()


def test_native_softmax_grad_computes_nothing_it_cannot():
    g = np.ones((4, 3), np.float32)
    out = np.zeros((4, 3), np.float32)
    assert native.softmax_grad(g, g.astype(np.float64), out, 1) == -2  # mixed types
    assert native.softmax_grad(g, g[:, :2].copy(), out, 1) == -2  # rows differ
    assert native.softmax_grad(g, g, g, 1) == -2  # out overlaps an input
    assert native.softmax_grad(g.T, g.T, out, 1) == -2  # not C-contiguous
    assert native.softmax_grad(np.float32(1) * g[0, :0], g[0, :0], out[0, :0], 1) == -2  # empty rows
    assert not out.any()


def test_native_exp_is_within_one_ulp_and_flushes_like_tensorflow():
    """float32 Exp's native ufunc (Cephes's expf): within 1 ulp of the exact value over the
    whole normal range (numpy's own loop is within 2.5 here), inf from the first float whose
    exp overflows, 0 where the result leaves the normal floats (TensorFlow's CPU threads flush
    such results), NaN kept; the Exp op uses it for float32 and numpy's exp otherwise."""
    x = np.linspace(-110, 95, 1_000_001, dtype=np.float32)
    with np.errstate(over="ignore"):  # numpy's exp raises the overflow flag (the native ufunc does not)
        got = native.exp(x)
        exact = np.exp(x.astype(np.float64))
        rounded = exact.astype(np.float32)
    normal = np.isfinite(rounded) & (rounded >= np.finfo(np.float32).tiny)
    ulps = np.abs(got[normal].astype(np.float64) - exact[normal]) / np.spacing(rounded[normal]).astype(np.float64)
    assert ulps.max() <= 1.01
    assert (got[~normal & (x < 0)] == 0).all() and np.isinf(got[~normal & (x > 0)]).all()
    first_overflow = np.float32(88.7228394)
    below = np.nextafter(first_overflow, np.float32(0))
    with np.errstate(over="ignore"):
        edges = native.exp(np.array([first_overflow, below, np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32))
    assert np.isinf(edges[0]) and np.isfinite(edges[1]) and np.isnan(edges[2])
    assert edges[3] == np.inf and edges[4] == 0 and edges[5] == 1 and edges[6] == 1
    smallest = np.float32(-87.33654)  # the smallest float whose exp is a normal float
    assert native.exp(smallest) >= np.finfo(np.float32).tiny
    assert native.exp(np.nextafter(smallest, np.float32(-100))) == 0
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(ok.ops.exp(x[:1000]).numpy(), got[:1000])
        x64 = x[:1000].astype(np.float64)
        np.testing.assert_array_equal(ok.ops.exp(x64).numpy(), np.exp(x64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_relu_and_rsqrt_give_the_numpy_paths_bits(dtype):
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.standard_normal(70_001).astype(dtype) * 10,
                        np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 4.0], dtype)])
    bits = np.uint32 if dtype == np.float32 else np.uint64
    with np.errstate(all="ignore"):
        rsqrt_ref = np.reciprocal(np.sqrt(x))
    relu_ref = np.maximum(x, dtype(0))
    for arr, relu_want, rsqrt_want in ((x, relu_ref, rsqrt_ref), (x[::3], relu_ref[::3], rsqrt_ref[::3])):
        np.testing.assert_array_equal(native.relu(arr).view(bits), relu_want.view(bits))
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(native.rsqrt(arr).view(bits), rsqrt_want.view(bits))
    assert native.relu(np.array([-0.0], dtype)).view(bits)[0] == 0  # +0.0, TensorFlow's answer
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(ok.ops.relu(x).numpy().view(bits), relu_ref.view(bits))
        np.testing.assert_array_equal(ok.ops.rsqrt(x).numpy().view(bits), rsqrt_ref.view(bits))


_QUIET_INPUTS = [0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 1e-300, 3e38, -3e38, 1e308, -1e308, 100.0, -100.0, 1000.0, -1000.0,
                 np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("name", ["exp", "relu", "rsqrt", "erf", "sigmoid", "elu", "selu", "softplus", "gelu", "gelu_grad"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_ufuncs_are_quiet(name, dtype):
    """The native ufuncs leave no floating-point flag their loops raised (overflow to inf,
    a negative rsqrt's invalid, underflow), contiguous and strided, so their kernels call
    them without np.errstate; a flag raised before the call is left as it was."""
    fn = getattr(native, name)
    with np.errstate(all="ignore"):
        x = np.array(_QUIET_INPUTS * 3, dtype)
    args = (x, x) if fn.nin == 2 else (x,)
    with np.errstate(all="ignore"):
        want = fn(*args)
    with np.errstate(all="raise"):
        got = fn(*args)
        strided = fn(*[a[::2] for a in args])
        sharded = sharding.elementwise(fn)(*[np.tile(a, 20_000) for a in args])  # on the pool, flags gathered
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(strided, want[::2])
    np.testing.assert_array_equal(sharded[: x.size], want)


def test_quiet_native_kernels_warn_about_nothing_at_any_size():
    """Exp, Sigmoid, Rsqrt and Gelu on the cpu backend under np.errstate(all="raise"), small
    (the ufunc called directly) and large (sharded on the pool)."""
    with ok.use_backend("cpu"), np.errstate(all="raise"):
        for n in (7, 1_000_000):
            x = np.resize(np.array([100.0, -100.0, -1.0, 0.0, np.inf, -np.inf, np.nan], np.float32), n)
            assert np.isinf(ok.ops.exp(x).numpy()[0])
            assert np.isnan(ok.ops.rsqrt(x).numpy()[2])
            ok.ops.sigmoid(x)
            ok.ops.gelu(x)


_TWINNED = [np.true_divide, np.mod, np.fmod, np.arctan2, np.exp, np.log, np.log1p, np.sqrt, np.sin, np.cos, np.tanh,
            np.expm1, np.sinh, np.cosh, np.arctan, np.tan, np.arcsin, np.arccos, np.arcsinh, np.arccosh, np.arctanh,
            np.reciprocal]


@pytest.mark.parametrize("ufunc", _TWINNED, ids=lambda u: u.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_quiet_twins_give_numpys_bits_and_no_flags(ufunc, dtype):
    """``_native.quiet_twin(ufunc)``: numpy's own float32/float64 loops, so numpy's bits
    (specials, subnormals, overflow and domain errors included; contiguous, strided and
    broadcast), and no floating-point flag, so no warning under np.errstate(all="raise")."""
    twin = native.quiet_twin(ufunc)
    assert twin is not None and twin.nin == ufunc.nin and twin.types == [f"{c * ufunc.nin}->{c}" for c in "fd"]
    rng = np.random.default_rng(3)
    with np.errstate(all="ignore"):
        special = np.array(_QUIET_INPUTS + [0.5, -0.5, 2.0, -2.0, 1e-40, 7e-310], dtype)
        x = np.concatenate([special, (rng.standard_normal(300) * 30).astype(dtype)])
        y = np.concatenate([special[::-1], (rng.standard_normal(300) * 3).astype(dtype)])
    args = (x,) if ufunc.nin == 1 else (x, y)
    with np.errstate(all="ignore"):
        want = ufunc(*args)
        want_strided = ufunc(*[a[::3] for a in args])
        want_broadcast = ufunc(x[:, None], y[None, :50]) if ufunc.nin == 2 else None
    with np.errstate(all="raise"):
        got = twin(*args)
        strided = twin(*[a[::3] for a in args])
        broadcast = twin(x[:, None], y[None, :50]) if ufunc.nin == 2 else None
    assert got.dtype == want.dtype == dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # the bits, NaN payloads included
    np.testing.assert_array_equal(strided.view(np.uint8), want_strided.view(np.uint8))
    if broadcast is not None:
        np.testing.assert_array_equal(broadcast, want_broadcast)


def test_quiet_twin_declines_what_it_cannot_take():
    assert native.quiet_twin(np.isnan) is None  # a bool output
    assert native.quiet_twin(np.matmul) is None  # a gufunc
    assert native.quiet_twin(np.divmod) is None  # two outputs
    assert native.quiet_twin(len) is None


def test_quiet_numpy_kernels_small_and_large_under_raise():
    """Log, Sqrt, Tanh, RealDiv, FloorMod and Atan2 on the cpu backend raise and warn about
    nothing (small: the quiet twin; float16 and large: np.errstate or the pool), with numpy's values."""
    with ok.use_backend("cpu"):
        for n in (9, 300_000):
            for dtype in (np.float16, np.float32, np.float64):
                with np.errstate(all="ignore"):  # 1e30 is inf in float16
                    x = np.resize(np.array([-1.0, 0.0, 2.0, np.inf, -np.inf, np.nan, 1e30, -1e-30, 0.5], dtype), n)
                    y = np.resize(np.array([0.0, 0.0, 3.0, 2.0, np.inf, 1.0, 1e-30, 0.0, -0.5], dtype), n)
                    want = [np.log(x), np.sqrt(x), np.tanh(x), np.true_divide(x, y), np.arctan2(x, y)]
                with np.errstate(all="raise"):
                    got = [ok.ops.log(x).numpy(), ok.ops.sqrt(x).numpy(), ok.ops.tanh(x).numpy(),
                           ok.ops.real_div(x, y).numpy(), ok.ops.atan2(x, y).numpy()]
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)


def test_quiet_native_ufuncs_through_the_fused_evaluator_report_nothing():
    """A large broadcast of a native binary ufunc runs on the fused evaluator, which calls
    the ufunc's own loop without its flag-clearing trampoline; its flags are not reported
    (the native ufuncs are quiet), and the values are the direct call's."""
    kernel = sharding.elementwise(native.gelu_grad)
    x = np.resize(np.array([100.0, -100.0, np.inf, -np.inf, np.nan, 0.5, -30.0], np.float32), (2000, 300))
    dy = np.resize(np.array([1e38, -1e38, 2.0], np.float32), (300,))
    with np.errstate(all="ignore"):
        want = native.gelu_grad(dy, x)
    with np.errstate(all="raise"):
        got = kernel(dy, x)
    np.testing.assert_array_equal(got, want)


def test_a_quiet_twin_keeps_its_source_alive():
    import gc

    first = native.quiet_twin(np.log)
    second = native.quiet_twin(first)  # its loops' data live in first's tables
    del first
    gc.collect()
    x = np.array([1.0, -1.0, 0.0, 2.0], np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(second(x), np.log(x))
