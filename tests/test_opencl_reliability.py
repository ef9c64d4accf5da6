"""Reliability of the OpenCL backend's data path (issue 28): an upload never reads the
caller's buffer after the call; a forked child gets a clear error, never a hang;
window index arithmetic never overflows 32 bits; bad strings raise opkernel errors.

Anything that could hang runs in a child process (tests/isolated.py).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest
from isolated import run_isolated

import opkernel as ok
from opkernel import engine
from opkernel.errors import InvalidArgumentError, OpkernelError

pytest.importorskip("opkernel_opencl", reason="opkernel-opencl is not installed")


@pytest.fixture
def be() -> Iterator[Any]:
    reason = dict((n, r) for n, _, r in engine.backend_status()).get("opencl")
    if reason is not None:
        pytest.skip(f"backend 'opencl' unavailable: {reason}")
    with engine.use_backend("opencl"):
        yield engine.backend_instance("opencl")


# ---------------------------------------------------------------- uploads


def test_refilling_the_callers_buffer_after_a_call_does_not_change_the_result(be: Any) -> None:
    # A data loader's pattern: one buffer refilled for every batch.  A MatMul queued first
    # keeps the device busy, so an upload still reading the buffer later would see the refill.
    busy = ok.tensor(np.ones((256, 256), np.float32))
    buf = np.empty(1 << 18, np.float32)  # 1 MiB: past the small-array host copy
    results = []
    for i in range(20):
        ok.ops.mat_mul(busy, busy)
        buf[:] = i
        results.append(ok.ops.mul(buf, np.float32(2)))
        buf[:] = -1
    wrong = [i for i, y in enumerate(results) if not np.all(y.numpy() == 2 * i)]
    assert wrong == [], f"{len(wrong)} of {len(results)} results computed from the refilled buffer"


@pytest.mark.parametrize("size", [1 << 10, 1 << 20])
def test_a_tensor_made_from_a_buffer_keeps_its_values(be: Any, size: int) -> None:
    ok.ops.mat_mul(ok.tensor(np.ones((256, 256), np.float32)), ok.tensor(np.ones((256, 256), np.float32)))
    buf = np.arange(size, dtype=np.float32)
    t = ok.tensor(buf)
    strided = ok.tensor(buf.reshape(-1, 2)[:, 0])  # not contiguous: uploaded from a private copy
    buf[:] = 7
    np.testing.assert_array_equal(t.numpy(), np.arange(size, dtype=np.float32))
    np.testing.assert_array_equal(strided.numpy(), np.arange(0, size, 2, dtype=np.float32))


# ---------------------------------------------------------------- fork

_CHILD = """
import numpy as np
import opkernel as ok

def child(q):
    try:
        ok.set_backend("opencl")
        q.put(("ran", ok.ops.mul(np.arange(4, dtype=np.float32), np.float32(3)).numpy().tolist()))
    except Exception as e:
        q.put(("raised", type(e).__name__, str(e)))
"""

_PARENT = """
import multiprocessing as mp, sys
sys.path.insert(0, {where!r})
import numpy as np
import opkernel as ok
from opencl_child import child  # importable, so that a spawned child finds it too

if __name__ == "__main__":
    {setup}
    ctx = mp.get_context({method!r})
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    p.join(60)
    if p.is_alive():
        p.kill()
        sys.exit("the child hung")
    print(repr(q.get(timeout=10)))
"""


def _in_child(tmp_path: Any, setup: str, method: str) -> Any:
    (tmp_path / "opencl_child.py").write_text(_CHILD)
    code = _PARENT.format(where=str(tmp_path), setup=setup, method=method)
    out = run_isolated(code, timeout=120, what=f"opencl in a child started by {method!r}")
    return eval(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("setup", [
    "ok.set_backend('opencl'); print(ok.ops.mul(np.ones(3, np.float32), np.float32(2)).numpy())",
    "print(ok.engine.available_backends())",  # the platform loaded, no backend made
], ids=["backend-in-use", "platform-probed"])
def test_a_forked_child_gets_an_error_naming_spawn_not_a_hang(be: Any, tmp_path: Any, setup: str) -> None:
    result = _in_child(tmp_path, setup, "fork")
    assert result[0] == "raised" and result[1] == "BackendUnavailableError", result
    assert "fork" in result[2] and "'spawn'" in result[2], result[2]


def test_a_spawned_child_uses_the_backend(be: Any, tmp_path: Any) -> None:
    setup = "ok.set_backend('opencl'); ok.ops.mul(np.ones(3, np.float32), np.float32(2)).numpy()"
    assert _in_child(tmp_path, setup, "spawn") == ("ran", [0.0, 3.0, 6.0, 9.0])


# ---------------------------------------------------------------- window geometry

_X = np.array([1, 3, 5], np.float32)
_F = np.array([1, 10, 100], np.float32)
_BIG = 2**31 - 1


def _conv_reference(stride: int, dilation: int, pad: int, width: int) -> np.ndarray:
    """Conv2D over one row, from the definition: out[o] = sum_j x[o*stride - pad + j*dilation] f[j]."""
    out = np.zeros(width, np.float32)
    for o in range(width):
        for j in range(3):
            at = o * stride - pad + j * dilation
            if 0 <= at < 3:
                out[o] += _X[at] * _F[j]
    return out


def _conv_input_grad_reference(dy: np.ndarray, stride: int, dilation: int, pad: int) -> np.ndarray:
    dx = np.zeros(3, np.float32)
    for o in range(len(dy)):
        for j in range(3):
            at = o * stride - pad + j * dilation
            if 0 <= at < 3:
                dx[at] += dy[o] * _F[j]
    return dx


# (padding before, after): window coordinates such as 2 + 2 * (2**31 - 1) pass 2**31 although
# every attr fits in 32 bits; int arithmetic wrapped them around into the row.
@pytest.mark.parametrize("pads", [(0, 2**32 - 2), (1, 2**32 - 1), (_BIG, _BIG)])
def test_conv2d_windows_past_2_31_match_the_definition(backend: str, pads: tuple[int, int]) -> None:
    attrs: dict[str, Any] = dict(strides=[1, 1, 1, 1], padding="EXPLICIT", dilations=[1, 1, _BIG, 1],
                                 explicit_paddings=[0, 0, 0, 0, *pads, 0, 0])
    y = ok.ops.conv2d(_X.reshape(1, 1, 3, 1), _F.reshape(1, 3, 1, 1), **attrs).numpy().ravel()
    np.testing.assert_array_equal(y, _conv_reference(1, _BIG, pads[0], len(y)))
    dy = np.arange(1, len(y) + 1, dtype=np.float32)
    dx = ok.ops.conv2d_backprop_input(np.array([1, 1, 3, 1], np.int32), _F.reshape(1, 3, 1, 1), dy.reshape(1, 1, -1, 1),
                                      **attrs).numpy().ravel()
    np.testing.assert_array_equal(dx, _conv_input_grad_reference(dy, 1, _BIG, pads[0]))


def test_conv2d_same_with_dilation_2_31_minus_1(backend: str) -> None:
    y = ok.ops.conv2d(_X.reshape(1, 1, 3, 1), _F.reshape(1, 3, 1, 1), strides=[1, 1, 1, 1], padding="SAME",
                      dilations=[1, 1, _BIG, 1]).numpy().ravel()
    np.testing.assert_array_equal(y, _conv_reference(1, _BIG, _BIG, 3))


@pytest.mark.parametrize("op, attrs", [
    ("conv2d", dict(strides=[1, 1, 2**31, 1], padding="SAME")),  # one output: the stride is never used
    ("max_pool", dict(ksize=[1, 1, 2, 1], strides=[1, 1, 2**31, 1], padding="SAME")),
    ("avg_pool", dict(ksize=[1, 1, 2, 1], strides=[1, 1, 2**40, 1], padding="VALID")),
    # a window far larger than the input: only its taps inside the input are kept
    ("max_pool", dict(ksize=[1, 1, 2**31, 1], strides=[1, 1, 1, 1], padding="SAME")),
    ("avg_pool", dict(ksize=[1, 1, 2**40, 1], strides=[1, 1, 1, 1], padding="SAME")),
])
def test_window_attrs_of_2_31_that_are_never_used_match_cpu(be: Any, op: str, attrs: dict[str, Any]) -> None:
    x = _X.reshape(1, 1, 3, 1)
    args = (x, _F.reshape(1, 3, 1, 1)) if op == "conv2d" else (x,)
    got = getattr(ok.ops, op)(*args, **attrs).numpy()
    with ok.use_backend("cpu"):
        want = getattr(ok.ops, op)(*args, **attrs).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op, attrs, attr", [
    ("conv2d", dict(strides=[1, 1, 1, 1], padding="SAME", dilations=[1, 1, 2**31, 1]), "dilations"),
    ("conv2d", dict(strides=[1, 1, 2**32, 1], padding="EXPLICIT", explicit_paddings=[0, 0, 0, 0, 2**31, 2**31, 0, 0]),
     "strides"),
])
def test_opencl_window_geometry_of_2_31_is_an_invalid_argument(be: Any, op: str, attrs: dict[str, Any], attr: str) -> None:
    x = _X.reshape(1, 1, 3, 1)
    args = (x, _F.reshape(1, 3, 1, 1)) if op == "conv2d" else (x,)
    with pytest.raises(InvalidArgumentError, match=rf"op 'Conv2D': {attr}.*2\*\*31"):
        getattr(ok.ops, op)(*args, **attrs)


_HUGE_WINDOW = """
import numpy as np, opkernel as ok
x = np.random.default_rng(0).random((1, 32, 32, 2)).astype(np.float32)
a = dict(ksize=[1, 2**31 - 1, 5, 1], strides=[1, 1, 1, 1], padding="SAME")
def run():
    y = ok.ops.max_pool(x, **a)
    dy = np.ones(y.shape, np.float32)
    return [y.numpy(), ok.ops.avg_pool(x, **a).numpy(), ok.ops.max_pool_grad(x, y, dy, **a).numpy(),
            ok.ops.avg_pool_grad(np.array(x.shape, np.int32), dy, **a).numpy()]
with ok.use_backend("opencl"):
    got = run()
with ok.use_backend("cpu"):
    want = run()
for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
print("ok")
"""


def test_a_pooling_window_far_larger_than_the_input_costs_no_more_than_the_input(be: Any) -> None:
    # The kernels looped over every tap of the window, 2**31 per output element: a hang.
    out = run_isolated(_HUGE_WINDOW, timeout=60, what="pools with ksize 2**31 - 1")
    assert out.stdout.strip() == "ok"


_OVER_HOST_MEMORY = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
import numpy as np, opkernel as ok
from opkernel.errors import ResourceExhaustedError
with ok.use_backend("opencl"):
    for name, call in (("Range", lambda: ok.ops.range(np.int32(2), np.int32(2**31 - 1), np.int32(3))),
                       ("Fill", lambda: ok.ops.fill(np.array([700_000_000], np.int64), np.float32(1)))):
        try:
            call().numpy()
        except ResourceExhaustedError as e:
            assert f"op {name!r}" in str(e), e
            print(name, "refused")
        else:
            print(name, "ran")
"""


def test_an_allocation_past_the_hosts_memory_is_refused_on_a_cpu_device(be: Any) -> None:
    # PoCL's buffers are host memory and it does not check every malloc: under a 3 GiB
    # address-space limit a 2.7 GiB Range crashed the process (SIGSEGV) after its buffer
    # was made.
    if not be.is_cpu:
        pytest.skip("the device does not allocate from host memory")
    out = run_isolated(_OVER_HOST_MEMORY, timeout=120, what="allocations past an address-space limit")
    assert out.stdout.split() == ["Range", "refused", "Fill", "refused"]


# ---------------------------------------------------------------- strings


@pytest.mark.parametrize("strings", [[b"\xff1"], np.array([b"12", b"\xc3("], object)], ids=["list", "object-array"])
def test_string_to_number_of_bytes_that_are_not_utf8_names_the_op(backend: str, strings: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="StringToNumber"):
        ok.ops.string_to_number(strings)


# ---------------------------------------------------------------- CUDA pool geometry (no GPU needed)


def test_cuda_pool_geometry_is_64_bit_on_both_sides() -> None:
    """The CUDA pool kernels get their geometry as int64 (np.int32 packing raised OverflowError
    at 2**31), and their signatures take it as i64: a 4-byte parameter given 8 bytes would
    read garbage on the device."""
    import re

    cu = pytest.importorskip("opkernel_cuda.nn_kernels", reason="opkernel-cuda is not installed")
    from opkernel_cpu import nn_kernels as cpu_nn
    from opkernel_cuda import sources

    attrs = dict(ksize=[1, 1, 2, 1], strides=[1, 1, 2**31, 1], padding="SAME", data_format="NHWC")
    win = cpu_nn._pool_geometry("MaxPool", (1, 1, 3, 1), attrs)
    args = cu._pool_args(np.empty((1, 1, 3, 1), np.float32), win)
    assert all(type(a) is np.int64 for a in args) and 2**31 in args
    for name in ("max_pool", "max_pool_grad"):
        signature = re.search(rf"__global__ void {name}\(([^)]*)\)", sources._POOL)
        assert signature is not None, name
        geometry = [p.split()[0] for p in signature.group(1).split(",")][-len(args):]
        assert geometry == ["i64"] * len(args), (name, geometry)
