"""Intra-op sharding of large elementwise kernels on the CPU backend (its native and Python
thread pools), its output pool, and the malloc setting."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import warnings

import numpy as np
import pytest

import opkernel as ok

pytest.importorskip("opkernel_cpu")
from opkernel_cpu import sharding  # noqa: E402

N = 4 * sharding.MIN_ELEMENTS_PER_SHARD + 123  # not a multiple of the shard count


@pytest.fixture
def threads():
    old = ok.config.intra_op_parallelism_threads
    yield lambda n: setattr(ok.config, "intra_op_parallelism_threads", n)
    ok.config.intra_op_parallelism_threads = old


@pytest.fixture(params=["native", "python"])
def pool(request, monkeypatch):
    """Each sharding test runs on both pools: the native one (skipped where it was not
    built; see test_the_native_pool_is_built_where_a_compiler_is) and the Python one."""
    if request.param == "native":
        if sharding._native is None:
            pytest.skip("opkernel_cpu._native was not built")
    else:
        monkeypatch.setattr(sharding, "_native", None)
    return request.param


@pytest.fixture
def python_pool(monkeypatch):
    monkeypatch.setattr(sharding, "_native", None)


def test_the_native_pool_is_built_where_a_compiler_is():
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if platform.system() != "Linux" or shutil.which(compiler) is None:
        pytest.skip("no C compiler: the CPU backend shards with Python threads")
    assert sharding._native is not None, "opkernel_cpu._native did not build: reinstall plugins/cpu and read the compiler's errors"


@pytest.mark.parametrize("op, dtype", [("add", "float32"), ("mul", "float64"), ("maximum", "int32"),
                                       ("exp", "float32"), ("less", "float32"), ("sqrt", "float64"),
                                       ("tanh", "float32"), ("floor_div", "int64"), ("sub", "float16")])
def test_sharded_results_are_bit_identical_to_single_threaded(op, dtype, threads, monkeypatch, pool):
    calls = []
    real = sharding._run_sharded
    monkeypatch.setattr(sharding, "_run_sharded", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(0)
    xs = [ok.tensor((rng.standard_normal(N) * 10).astype(dtype), backend="cpu") for _ in range(2)]
    fn = getattr(ok.ops, op)
    args = xs[:1] if op in ("exp", "sqrt", "tanh") else xs
    if op == "floor_div":
        args = [xs[0], ok.tensor(np.where(xs[1].numpy() == 0, 3, xs[1].numpy()), backend="cpu")]
    blocks = sharding._native.pool_blocks() if pool == "native" else 0
    monkeypatch.setattr(sharding, "_not_native", set())
    with ok.use_backend("cpu"):
        threads(1)
        single = fn(*args).numpy()
        assert calls == []
        threads(4)
        sharded = fn(*args).numpy()
        assert calls == [1]  # the sharded path really ran
        # The pool threads take part: they may wake too late for any one op, and on a
        # loaded machine for many in a row, so the ops repeat for up to 5 s.
        deadline = time.monotonic() + 5
        while pool == "native" and sharding._native.pool_blocks() == blocks and time.monotonic() < deadline:
            np.testing.assert_array_equal(fn(*args).numpy(), single)
    assert single.dtype == sharded.dtype
    np.testing.assert_array_equal(single, sharded)
    if pool == "native":
        assert sharding._native.pool_blocks() > blocks
        assert sharding._not_native == set()  # numpy's own inner loop ran, not the Python pool


def test_large_inputs_use_the_pool_and_small_ones_do_not(threads, monkeypatch):
    seen: list[str] = []
    real = sharding._run_sharded

    def spy(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(sharding, "_run_sharded", spy)
    threads(2)
    with ok.use_backend("cpu"):
        small = ok.tensor(np.ones(1000, np.float32))
        ok.ops.add(small, small)
        assert seen == []
        big = ok.tensor(np.ones(N, np.float32))
        np.testing.assert_array_equal(ok.ops.add(big, big).numpy(), np.full(N, 2, np.float32))
        assert len(seen) == 1
        threads(1)
        ok.ops.add(big, big)
        assert len(seen) == 1  # one thread: no sharding


def test_broadcasting_inputs_are_not_sharded_and_stay_correct(threads):
    threads(2)
    with ok.use_backend("cpu"):
        x = ok.tensor(np.arange(N, dtype=np.float32))
        y = ok.tensor(np.float32(1.5))
        np.testing.assert_array_equal(ok.ops.add(x, y).numpy(), np.arange(N, dtype=np.float32) + np.float32(1.5))


def test_large_outputs_reuse_only_arrays_nobody_holds(threads, monkeypatch, pool):
    monkeypatch.setattr(sharding, "MIN_POOLED_BYTES", 1 << 20)
    sharding.release_buffers()
    x = ok.tensor(np.arange(N, dtype=np.float32), backend="cpu")
    address = lambda t: t.numpy().__array_interface__["data"][0]  # noqa: E731
    with ok.use_backend("cpu"):
        threads(2)
        first = ok.ops.add(x, x)
        kept = address(first)
        second = ok.ops.add(x, x)  # ``first`` is still held: a different array
        assert address(second) != kept
        view = first.numpy()[::2]
        del first
        third = ok.ops.mul(x, x)  # a view keeps the array alive too
        assert address(third) not in (kept, address(second))
        del view
        fourth = ok.ops.sub(x, x)  # now the first output is free again
        assert address(fourth) == kept
        np.testing.assert_array_equal(fourth.numpy(), np.zeros(N, np.float32))
        np.testing.assert_array_equal(second.numpy(), 2 * np.arange(N, dtype=np.float32))
        np.testing.assert_array_equal(third.numpy(), np.arange(N, dtype=np.float32) ** 2)
    assert sharding.release_buffers() <= sharding.POOLED_PER_SHAPE * N * 4


def test_the_cpu_backend_reports_its_malloc_setting():
    code = "import opkernel as ok; from opkernel import engine; print(engine.backend_instance('cpu').describe()['malloc'])"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    tuned = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    default = subprocess.run([sys.executable, "-c", code], env={**env, "OPKERNEL_CPU_MALLOC": "default"},
                             capture_output=True, text=True, check=True).stdout
    assert default.strip() == "system default (OPKERNEL_CPU_MALLOC=default)"
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert "mmap_threshold=32 MiB, trim_threshold=256 MiB" in tuned


def test_the_shard_size_follows_the_ufuncs_cost(threads, monkeypatch):
    """Transcendental ufuncs shard from 32 K elements, cheap arithmetic only from 512 K."""
    calls: list[int] = []
    real = sharding._run_sharded
    monkeypatch.setattr(sharding, "_run_sharded", lambda *a, **k: calls.append(a[4]) or real(*a, **k))
    threads(2)
    x = ok.tensor(np.linspace(-3, 3, 4 * sharding._TRANSCENDENTAL_PER_SHARD, dtype=np.float32), backend="cpu")
    with ok.use_backend("cpu"):
        # float32 Exp is the native module's ufunc where it is built: its unsharded bits
        exp = sharding.native_module().exp if sharding.native_module() is not None else np.exp
        np.testing.assert_array_equal(ok.ops.exp(x).numpy(), exp(x.numpy()))
        assert calls == [sharding._TRANSCENDENTAL_PER_SHARD]
        np.testing.assert_array_equal(ok.ops.add(x, x).numpy(), x.numpy() + x.numpy())
        assert calls == [sharding._TRANSCENDENTAL_PER_SHARD]  # too small for a cheap op
    assert sharding.min_per_shard(np.add) == sharding.MIN_ELEMENTS_PER_SHARD
    assert sharding.min_per_shard(np.sqrt) < sharding.MIN_ELEMENTS_PER_SHARD


def test_an_error_in_a_pool_thread_reaches_the_caller_and_the_pool_recovers(pool):
    """(On the native pool: a Python function is not a ufunc, so the Python pool runs it.)"""
    x = np.arange(N, dtype=np.float64)

    def fails_past_the_first_chunk(a, out=None):
        if a.size and a[0] > 0:  # only the pool threads' chunks start past element 0
            raise FloatingPointError("chunk failed")
        return np.negative(a, out=out)

    with pytest.raises(FloatingPointError, match="chunk failed"):
        sharding._run_sharded(fails_past_the_first_chunk, (x,), 4, False, N // 4, ("fails", x.dtype))
    assert not sharding._busy.locked()
    np.testing.assert_array_equal(sharding._run_sharded(np.negative, (x,), 4, False, N // 4, (np.negative, x.dtype)), -x)


def test_ops_from_several_threads_at_once_stay_correct(threads, pool):
    """One op holds the pool at a time; the others run unsharded on their own thread."""
    threads(2)
    xs = [np.full(N, i, np.float32) for i in range(4)]
    results: dict[int, np.ndarray] = {}

    def work(i):
        with ok.use_backend("cpu"):
            for _ in range(5):
                results[i] = ok.ops.add(ok.tensor(xs[i]), ok.tensor(xs[i])).numpy()

    workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for i in range(4):
        np.testing.assert_array_equal(results[i], np.full(N, 2 * i, np.float32))


def test_changing_the_thread_count_resizes_the_pool(threads, python_pool):
    x = ok.tensor(np.ones(N, np.float32), backend="cpu")
    with ok.use_backend("cpu"):
        threads(4)
        ok.ops.add(x, x)
        assert len(sharding._workers) == 3
        threads(2)
        np.testing.assert_array_equal(ok.ops.add(x, x).numpy(), np.full(N, 2, np.float32))
        assert len(sharding._workers) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_pool_threads(threads, pool):
    import multiprocessing

    threads(2)
    x = ok.tensor(np.ones(N, np.float32), backend="cpu")
    with ok.use_backend("cpu"):
        ok.ops.add(x, x)  # the parent's pool thread exists
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as processes:
        total, started = processes.apply(_sharded_sum_in_child)
    assert total == 2.0 * N
    if pool == "native":
        assert started == 1  # the child's own, not the parent's (which it does not have)


def _sharded_sum_in_child() -> tuple[float, int | None]:
    with ok.use_backend("cpu"):
        x = ok.tensor(np.ones(N, np.float32))
        total = float(ok.ops.add(x, x).numpy().sum(dtype=np.float64))
    return total, sharding._native.threads_started() if sharding._native is not None else None


def test_the_native_pool_starts_threads_as_the_thread_count_grows(threads):
    if sharding._native is None:
        pytest.skip("opkernel_cpu._native was not built")
    x = ok.tensor(np.ones(N, np.float32), backend="cpu")
    with ok.use_backend("cpu"):
        threads(4)
        np.testing.assert_array_equal(ok.ops.add(x, x).numpy(), np.full(N, 2, np.float32))
        assert sharding._native.threads_started() >= 3
        threads(2)
        np.testing.assert_array_equal(ok.ops.add(x, x).numpy(), np.full(N, 2, np.float32))


@pytest.mark.parametrize("state, expect", [("raise", FloatingPointError), ("warn", RuntimeWarning), ("ignore", None)])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_floating_point_errors_in_pool_threads_are_reported_as_numpy_would(state, expect, dtype, pool):
    """Each thread has its own floating-point flags: a division by zero in any block must
    reach the caller as numpy's warning or error, and nothing when it ignores them."""
    x = np.ones(N, dtype)
    zero = np.zeros(N, dtype)
    fn = np.floor_divide if dtype == "int64" else np.true_divide
    key = (fn, x.dtype, zero.dtype)
    with np.errstate(divide=state), warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning raises: none may go unseen, none may be extra
        if expect is None:
            out = sharding._run_sharded(fn, (x, zero), 2, False, sharding.MIN_ELEMENTS_PER_SHARD, key)
        else:
            with pytest.raises(expect, match="divide by zero"):
                sharding._run_sharded(fn, (x, zero), 2, False, sharding.MIN_ELEMENTS_PER_SHARD, key)
        quiet = sharding._run_sharded(fn, (x, zero), 2, True, sharding.MIN_ELEMENTS_PER_SHARD, key)
    with np.errstate(all="ignore"):
        expected = fn(x, zero)
    np.testing.assert_array_equal(quiet, expected)
    if expect is None:
        np.testing.assert_array_equal(out, expected)


def test_unaligned_or_byte_swapped_arrays_are_computed_single_threaded(pool):
    raw = np.zeros(N * 4 + 1, np.uint8)
    unaligned = np.frombuffer(raw.data, np.float32, N, offset=1)
    swapped = np.arange(N, dtype=">f4")
    for arrays in [(unaligned, swapped.astype(np.float32)), (swapped, swapped)]:
        key = (np.add, arrays[0].dtype, arrays[1].dtype)
        out = sharding._run_sharded(np.add, arrays, 2, False, sharding.MIN_ELEMENTS_PER_SHARD, key)
        np.testing.assert_array_equal(out, np.add(*arrays))


def test_ufuncs_without_a_plain_inner_loop_run_on_the_python_pool(monkeypatch):
    if sharding._native is None:
        pytest.skip("opkernel_cpu._native was not built")
    monkeypatch.setattr(sharding, "_not_native", set())
    x = np.arange(N, dtype=np.float32)
    key = (np.ldexp, x.dtype, np.dtype(np.int16))  # numpy converts int16 exponents: no exact loop
    out = sharding._run_sharded(np.ldexp, (x, np.ones(N, np.int16)), 2, False, sharding.MIN_ELEMENTS_PER_SHARD, key)
    np.testing.assert_array_equal(out, 2 * x)
    assert key in sharding._not_native


def test_pool_threads_hold_no_reference_to_an_output_once_done(threads, pool):
    """The output pool reuses an array only when nothing references it: the pool threads
    must let go of the last chunk's arrays as soon as it is done."""
    threads(2)
    x = np.ones(N, np.float32)
    out = sharding._run_sharded(np.add, (x, x), 2, False, sharding.MIN_ELEMENTS_PER_SHARD, (np.add, x.dtype, x.dtype))
    assert sys.getrefcount(out) == 2  # ``out`` and getrefcount's argument
    assert sys.getrefcount(x) == 2


def test_the_split_gives_pool_threads_less_by_their_measured_wake_up(monkeypatch):
    key = ("split-test",)
    monkeypatch.setattr(sharding, "_per_element", {})
    monkeypatch.setattr(sharding, "_wake", [0.0])
    assert sharding._split(1000, 2, key) == [0, 500, 1000]  # nothing measured yet: even
    assert sharding._split(1001, 3, key) == [0, 335, 668, 1001]  # the caller takes the remainder
    # 1000 elements at 100 ns each: 100 us of work; pool threads wake 20 us late
    sharding._per_element[key] = 100e-9
    sharding._wake[0] = 20e-6
    assert sharding._split(1000, 2, key) == [0, 600, 1000]  # both finish at 60 us
    assert sharding._split(1200, 3, key) == [0, 534, 867, 1200]  # (120 + 2 * 20) / 3 = 53.3 us each
    sharding._wake[0] = 1e-3  # wake-ups slower than the work: each pool thread keeps a quarter share
    assert sharding._split(1000, 2, key) == [0, 875, 1000]


def test_sharded_calls_learn_the_wake_up_and_the_rate(threads, monkeypatch, python_pool):
    monkeypatch.setattr(sharding, "_per_element", {})
    monkeypatch.setattr(sharding, "_wake", [0.0])
    x = np.arange(N, dtype=np.float32)
    key = (np.add, x.dtype, x.dtype)
    for _ in range(3):
        out = sharding._run_sharded(np.add, (x, x), 2, False, sharding.MIN_ELEMENTS_PER_SHARD, key)
        np.testing.assert_array_equal(out, x + x)  # uneven chunks, same elements
    assert sharding._per_element[key] > 0 and 0 < sharding._wake[0] <= sharding._MAX_WAKE
