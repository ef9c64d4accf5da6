"""Issue 28 on the CPU backend: no crash from a racing caller, no hang from a huge pooling
window, a thread setting that is checked where it is set.

Whatever could crash or hang runs in a child process (tests/isolated.py)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import opkernel as ok
from isolated import run_isolated
from opkernel.errors import InvalidArgumentError

pytest.importorskip("opkernel_cpu")
from opkernel_cpu import sharding  # noqa: E402

needs_native = pytest.mark.skipif(sharding.native_module() is None, reason="opkernel_cpu._native was not built")


# ---------------------------------------------------------------- sparse cross-entropy labels


@needs_native
def test_native_xent_checks_labels_itself():
    """The native pass never indexes with a label it has not checked (the Python check
    before it can be outdated by another thread): it reports the first bad row."""
    code = """
import numpy as np
from opkernel_cpu import sharding
native = sharding.native_module()
for dtype in (np.float32, np.float64):
    for ltype in (np.int32, np.int64):
        x = np.zeros((3, 4), dtype)
        loss, grad = np.empty(3, dtype), np.empty((3, 4), dtype)
        for labels, want in (([0, 3, 1], None), ([0, 1 << 30, 2], (1, 1 << 30)), ([2, 1, -1], (2, -1)),
                             ([4, 0, 0], (0, 4))):
            got = native.sparse_xent(x, np.array(labels, ltype), loss, grad)
            assert got == want, (dtype, ltype, labels, got)
print("ok")
"""
    done = run_isolated(code, backend="cpu", timeout=60, what="opkernel_cpu._native.sparse_xent with bad labels")
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("path", ["native", "numpy"])
def test_xent_labels_changed_by_another_thread_never_crash(path):
    """A thread flips the last label between valid and far out of range while the op
    runs (with the GIL released in its native pass and in numpy's loops): every call
    either answers or raises InvalidArgumentError; the process never reads outside the
    logits."""
    if path == "native" and sharding.native_module() is None:
        pytest.skip("opkernel_cpu._native was not built")
    code = """
import threading, time
import numpy as np
import opkernel as ok
from opkernel.errors import InvalidArgumentError
from opkernel_cpu import sharding
if {no_native}:
    sharding._native = None
ok.set_backend("cpu")
features = np.random.default_rng(0).standard_normal((2048, 512)).astype(np.float32)
labels = np.zeros(2048, np.int64)
stop = threading.Event()
def flip():
    while not stop.is_set():
        labels[-1] = 1 << 40
        labels[-1] = 0
thread = threading.Thread(target=flip)
thread.start()
answered = rejected = 0
end = time.monotonic() + 4
try:
    while time.monotonic() < end:
        try:
            loss, _ = ok.ops.sparse_softmax_cross_entropy_with_logits(features, labels)
            answered += 1
        except InvalidArgumentError as e:
            assert "outside the valid range of [0, 512)" in str(e), e
            rejected += 1
finally:
    stop.set()
    thread.join()
print(answered, rejected)
""".format(no_native=path == "numpy")
    done = run_isolated(code, backend="cpu", timeout=120, what=f"sparse xent with racing labels ({path} path)")
    answered, rejected = map(int, done.stdout.split())
    assert answered + rejected > 0


def test_pool_argmax_changed_by_another_thread_is_checked_as_used(backend):
    """MaxPoolGradWithArgmax checks the argmax indices, then scatters with them: a thread
    flipping one index out of range meanwhile gets InvalidArgumentError or a right
    answer, never a raw IndexError or an out-of-bounds write."""
    code = """
import threading, time
import numpy as np
import opkernel as ok
from opkernel.errors import InvalidArgumentError
x = np.random.default_rng(0).standard_normal((16, 64, 64, 16)).astype(np.float32)
attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
_, argmax = ok.ops.max_pool_with_argmax(x, **attrs)
argmax = argmax.numpy().copy()
good = int(argmax[-1, -1, -1, -1])
dy = np.ones(argmax.shape, np.float32)
stop = threading.Event()
def flip():
    while not stop.is_set():
        argmax[-1, -1, -1, -1] = 1 << 40
        argmax[-1, -1, -1, -1] = good
thread = threading.Thread(target=flip)
thread.start()
end = time.monotonic() + 3
try:
    while time.monotonic() < end:
        try:
            ok.ops.max_pool_grad_with_argmax(x, dy, argmax, **attrs)
        except InvalidArgumentError as e:
            assert "is not an index into" in str(e), e
finally:
    stop.set()
    thread.join()
print("ok")
"""
    done = run_isolated(code, backend=backend, timeout=120, what=f"MaxPoolGradWithArgmax with racing argmax on {backend}")
    assert done.stdout.strip() == "ok"


# ---------------------------------------------------------------- huge pooling windows

# A window far larger than the input: its work must be bounded by the input, and the
# answer is TensorFlow's (every window holds the one real value; AvgPool divides by the
# count of real taps).
_HUGE_WINDOWS = """
import json, numpy as np
import opkernel as ok
from opkernel_cpu import sharding
if {no_native}:
    sharding._native = None
x = np.full((1, 1, 1, 1), 3.5, np.float32)
one = [1, 1, 1, 1]
shape = np.array([1, 1, 1, 1], np.int32)
dy = np.full((1, 1, 1, 1), 2.0, np.float32)
out = {{}}
for name, ksize in (("46341^2", [1, 46341, 46341, 1]), ("1e8", [1, 10**8, 1, 1]), ("2^31-1", [1, 1, 2**31 - 1, 1])):
    for padding in ("SAME", "VALID"):
        try:
            y = ok.ops.max_pool(x, ksize=ksize, strides=one, padding=padding)
        except ok.errors.InvalidArgumentError as e:  # VALID: a window larger than the input
            out[name + padding] = type(e).__name__
            continue
        out[name + padding] = [
            float(y.numpy().ravel()[0]),
            float(ok.ops.avg_pool(x, ksize=ksize, strides=one, padding=padding).numpy().ravel()[0]),
            float(ok.ops.max_pool_grad(x, y, dy, ksize=ksize, strides=one, padding=padding).numpy().ravel()[0]),
            float(ok.ops.avg_pool_grad(shape, dy, ksize=ksize, strides=one, padding=padding).numpy().ravel()[0]),
            float(ok.ops.max_pool_grad_grad(x, y, x, ksize=ksize, strides=one, padding=padding).numpy().ravel()[0]),
        ]
        y, argmax = ok.ops.max_pool_with_argmax(x, ksize=ksize, strides=one, padding=padding)
        out[name + padding] += [float(y.numpy().ravel()[0]), int(argmax.numpy().ravel()[0])]
print(json.dumps(out))
"""


def _check_huge_windows(out: dict[str, object]) -> None:
    for name in ("46341^2", "1e8", "2^31-1"):
        assert out[name + "SAME"] == [3.5, 3.5, 2.0, 2.0, 3.5, 3.5, 0], name
        assert out[name + "VALID"] == "InvalidArgumentError", name


def test_huge_pool_window_answers_at_once(backend):
    done = run_isolated(_HUGE_WINDOWS.format(no_native=False), backend=backend, timeout=90,
                        what=f"pools with huge windows on {backend}")
    _check_huge_windows(json.loads(done.stdout))


def test_huge_pool_window_cpu_numpy_path():
    """The CPU backend's numpy paths (no native module, or other dtypes) clamp the window too."""
    done = run_isolated(_HUGE_WINDOWS.format(no_native=True), backend="cpu", timeout=90,
                        what="cpu numpy pools with huge windows")
    _check_huge_windows(json.loads(done.stdout))


def _reference_pool(x, ksize, strides, pads, op):
    """MaxPool / AvgPool by definition: each window's real (non-padding) taps."""
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), ((pt, pb), (pl, pr)) = ksize, strides, pads
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    out = np.empty((n, oh, ow, c), x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            r0, q0 = oy * sh - pt, ox * sw - pl
            taps = x[:, max(r0, 0):max(min(r0 + kh, h), 0), max(q0, 0):max(min(q0 + kw, w), 0)]
            out[:, oy, ox] = taps.max(axis=(1, 2)) if op == "max" else taps.mean(axis=(1, 2))
    return out


@pytest.mark.parametrize("path", ["native", "numpy"])
@pytest.mark.parametrize("h, w, kh, kw, sh, sw, padding", [
    (3, 4, 5, 9, 1, 1, "SAME"), (2, 5, 7, 3, 2, 1, "SAME"), (4, 4, 9, 9, 3, 2, "SAME"), (1, 1, 3000, 1, 1, 1, "SAME"),
    (3, 2, 6, 7, 1, 1, [0, 0, 3, 2, 5, 1, 0, 0]), (2, 3, 8, 4, 2, 3, [0, 0, 6, 1, 2, 3, 0, 0]),
])
def test_windows_larger_than_the_input_pool_their_real_taps(h, w, kh, kw, sh, sw, padding, path, monkeypatch):
    """The clamped windows give each window's maximum and mean over its real taps."""
    if path == "native" and sharding.native_module() is None:
        pytest.skip("opkernel_cpu._native was not built")
    if path == "numpy":
        monkeypatch.setattr(sharding, "_native", None)
    x = np.random.default_rng(0).standard_normal((2, h, w, 3)).astype(np.float32)
    attrs = {"ksize": [1, kh, kw, 1], "strides": [1, sh, sw, 1]}
    if isinstance(padding, list):
        attrs.update(padding="EXPLICIT", explicit_paddings=padding)
        pads = ((padding[2], padding[3]), (padding[4], padding[5]))
    else:
        attrs.update(padding="SAME")
        oh, ow = -(-h // sh), -(-w // sw)
        th, tw = max((oh - 1) * sh + kh - h, 0), max((ow - 1) * sw + kw - w, 0)
        pads = ((th // 2, th - th // 2), (tw // 2, tw - tw // 2))
    with ok.use_backend("cpu"):
        got = ok.ops.max_pool(x, **attrs).numpy()
        np.testing.assert_array_equal(got, _reference_pool(x, (kh, kw), (sh, sw), pads, "max"))
        if padding == "SAME":
            avg = ok.ops.avg_pool(x, **attrs).numpy()
            np.testing.assert_allclose(avg, _reference_pool(x, (kh, kw), (sh, sw), pads, "avg"), rtol=1e-6)


# ---------------------------------------------------------------- the thread setting


@pytest.fixture
def threads_setting():
    old = ok.config.intra_op_parallelism_threads
    yield
    ok.config.intra_op_parallelism_threads = old


def _large_add_still_sharded() -> None:
    """A large add answers right, and its (ufunc, types) is still one the native pool runs."""
    a = np.arange(1 << 20, dtype=np.float32)
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(ok.ops.add(a, a).numpy(), a + a)
    assert (np.add, a.dtype, a.dtype) not in sharding._not_native


@pytest.mark.parametrize("bad", [2.5, "4", None, True, np.float64(3.0)], ids=repr)
def test_thread_setting_of_the_wrong_type_is_refused_where_it_is_set(bad, threads_setting):
    ok.config.intra_op_parallelism_threads = 2
    with pytest.raises(ok.errors.OpTypeError, match="intra_op_parallelism_threads must be an int, got"):
        ok.config.intra_op_parallelism_threads = bad
    assert ok.config.intra_op_parallelism_threads == 2
    _large_add_still_sharded()


@pytest.mark.parametrize("bad", [20000, ok.engine.MAX_INTRA_OP_THREADS + 1, -1])
def test_thread_setting_out_of_range_is_refused(bad, threads_setting, monkeypatch):
    ok.config.intra_op_parallelism_threads = 2
    with pytest.raises(InvalidArgumentError, match=f"between 0 .* and {ok.engine.MAX_INTRA_OP_THREADS}, got {bad}"):
        ok.config.intra_op_parallelism_threads = bad
    assert ok.config.intra_op_parallelism_threads == 2
    monkeypatch.setattr(sharding, "_native", None)  # the Python pool: one OS thread per shard
    before = threading.active_count()
    a = np.ones(1 << 20, np.float32)
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(ok.ops.mul(a, a).numpy(), a)
    assert threading.active_count() <= before + 2


@pytest.mark.parametrize("good", [0, 1, 3, np.int64(4), ok.engine.MAX_INTRA_OP_THREADS])
def test_thread_setting_accepts_counts_up_to_the_maximum(good, threads_setting):
    ok.config.intra_op_parallelism_threads = good
    assert ok.config.intra_op_parallelism_threads == int(good)
    assert type(ok.config.intra_op_parallelism_threads) is int
    _large_add_still_sharded()
