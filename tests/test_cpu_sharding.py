"""Intra-op sharding of large elementwise kernels on the CPU backend."""

from __future__ import annotations

import threading

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


@pytest.mark.parametrize("op, dtype", [("add", "float32"), ("mul", "float64"), ("maximum", "int32"),
                                       ("exp", "float32"), ("less", "float32"), ("sqrt", "float64")])
def test_sharded_results_are_bit_identical_to_single_threaded(op, dtype, threads, monkeypatch):
    calls = []
    real = sharding._run_sharded
    monkeypatch.setattr(sharding, "_run_sharded", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(0)
    xs = [ok.tensor((rng.standard_normal(N) * 10).astype(dtype), backend="cpu") for _ in range(2)]
    fn = getattr(ok.ops, op)
    args = xs[:1] if op in ("exp", "sqrt") else xs
    with ok.use_backend("cpu"):
        threads(1)
        single = fn(*args).numpy()
        assert calls == []
        threads(4)
        sharded = fn(*args).numpy()
        assert calls == [1]  # the sharded path really ran
    assert single.dtype == sharded.dtype
    np.testing.assert_array_equal(single, sharded)


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
