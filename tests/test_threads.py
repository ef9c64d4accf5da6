"""Concurrency: one kernel called from many threads, and the backend and kernel
labels chosen in one thread or asyncio task staying out of the others.

Threads are lined up with barriers and events, never with sleeps, so the
interleavings these tests rely on happen on every run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import opkernel as ok

THREADS = 8
TIMEOUT = 30  # seconds; only reached if something deadlocks


def _cases(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Inputs of mixed shapes and dtypes, so threads build different signatures at once."""
    rng = np.random.default_rng(seed)
    shapes = [(3,), (2, 3), (4, 1, 2), ()]
    dtypes = ["float32", "float64", "int32", "int64"]
    return [
        (rng.integers(-9, 9, shape).astype(dtype), rng.integers(1, 9, shape).astype(dtype))
        for shape in shapes
        for dtype in dtypes
    ]


def as_matrix(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1] if a.ndim else 1)


def test_one_kernel_from_many_threads(backend: str, fresh_registry: None) -> None:
    ok.register_op("Probe>MulAdd").input("x: T").input("y: T").output("z: T").attr(
        "T: {float, double, int32, int64}"
    ).attr("k: int = 1")
    built: list[tuple[str, int]] = []

    class MulAdd(ok.OpKernel):
        def __init__(self, ctx: ok.OpKernelConstruction) -> None:
            self.k = ctx.get_attr("k")
            built.append((ctx.get_attr("T").name, self.k))

        def compute(self, ctx: ok.OpKernelContext) -> None:
            be = ctx.backend
            x, y = be.to_numpy(ctx.input(0)), be.to_numpy(ctx.input(1))
            ctx.set_output(0, be.from_numpy(x * y + np.asarray(self.k, x.dtype)))

    ok.register_kernel("Probe>MulAdd", backend=backend)(MulAdd)
    start = threading.Barrier(THREADS, timeout=TIMEOUT)

    def work(worker: int) -> int:
        checked = 0
        with ok.use_backend(backend):
            cases = _cases(worker)
            start.wait()
            for i in range(40):
                x, y = cases[(i + worker) % len(cases)]
                k = i % 3
                xs = (x, ok.tensor(x))[i % 2]  # numpy and tensors: the bind path and the cached path
                ys = (ok.tensor(y), y)[i % 2]
                out = ok.ops.probe.mul_add(xs, ys, k=k)
                assert out.dtype.name == x.dtype.name and out.backend == backend
                np.testing.assert_array_equal(out.numpy(), x * y + np.asarray(k, x.dtype))
                mx, my = as_matrix(x), as_matrix(y)
                both = ok.ops.add(ok.ops.mat_mul(mx, my, transpose_b=True), 1)
                np.testing.assert_array_equal(both.numpy(), mx @ my.T + 1)
                total = ok.ops.add_n([x, y, x])
                np.testing.assert_array_equal(total.numpy(), x + y + x)
                checked += 1
        return checked

    with ThreadPoolExecutor(THREADS) as pool:
        assert sum(pool.map(work, range(THREADS), timeout=TIMEOUT)) == THREADS * 40
    signatures = {(dtype, k) for dtype in ("float32", "float64", "int32", "int64") for k in range(3)}
    assert set(built) == signatures
    assert sorted(built) == sorted(signatures)  # each signature's kernel was constructed once


def _in_thread(fn: Any) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # reported by the test thread
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def test_use_backend_in_one_thread_leaves_the_others_alone(twin: str) -> None:
    inside, checked = threading.Event(), threading.Event()

    def in_twin() -> None:
        with ok.use_backend("twin"):
            inside.set()
            assert checked.wait(TIMEOUT)
            assert ok.get_backend() == "twin"
            assert (ok.tensor([1.0]) + 1).backend == "twin"

    default = ok.get_backend()
    thread, errors = _in_thread(in_twin)
    assert inside.wait(TIMEOUT)
    assert ok.get_backend() == default
    assert (ok.tensor([1.0]) + 1).backend == default

    def elsewhere() -> None:
        assert ok.get_backend() == default  # a new thread starts from the default too

    other, other_errors = _in_thread(elsewhere)
    other.join(TIMEOUT)
    checked.set()
    thread.join(TIMEOUT)
    assert not errors and not other_errors, errors + other_errors
    assert ok.get_backend() == default


def test_kernel_label_map_is_local_to_a_thread(backend: str, fresh_registry: None) -> None:
    ok.register_op("Probe>Which").input("x: float").output("y: float")
    for label, offset in ((None, 0.0), ("fast", 100.0)):
        ok.register_kernel("Probe>Which", backend="*", label=label)(lambda x, offset=offset: x + offset)
    inside, checked = threading.Event(), threading.Event()

    def labelled() -> None:
        with ok.use_backend(backend), ok.kernel_label_map({"Probe>Which": "fast"}):
            inside.set()
            assert checked.wait(TIMEOUT)
            assert ok.ops.probe.which([1.0]).numpy()[0] == 101.0

    thread, errors = _in_thread(labelled)
    assert inside.wait(TIMEOUT)
    for _ in range(3):
        assert ok.ops.probe.which([1.0]).numpy()[0] == 1.0
    checked.set()
    thread.join(TIMEOUT)
    assert not errors, errors
    assert ok.ops.probe.which([1.0]).numpy()[0] == 1.0


def test_asyncio_tasks_do_not_share_use_backend(twin: str) -> None:
    default = ok.get_backend()

    async def in_twin(entered: asyncio.Event, release: asyncio.Event) -> str:
        with ok.use_backend("twin"):
            entered.set()
            await release.wait()
            return (ok.tensor([1.0]) * 2).backend

    async def outside(entered: asyncio.Event, release: asyncio.Event) -> str:
        await entered.wait()
        try:
            return (ok.tensor([1.0]) * 2).backend  # while the other task is inside its block
        finally:
            release.set()

    async def main() -> list[str]:
        entered, release = asyncio.Event(), asyncio.Event()
        return list(await asyncio.wait_for(asyncio.gather(in_twin(entered, release), outside(entered, release)), TIMEOUT))

    assert asyncio.run(main()) == ["twin", default]
    assert ok.get_backend() == default


@pytest.mark.parametrize("op", ["add", "mat_mul"])
def test_a_new_kernel_registered_while_threads_call_the_op(backend: str, fresh_registry: None, op: str) -> None:
    """Registering a kernel resets cached signatures; calls in flight must keep giving right answers."""
    ok.register_op("Probe>Twice").input("x: float").output("y: float")
    ok.register_kernel("Probe>Twice", backend="*")(lambda x: x + x)
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    want = x @ x if op == "mat_mul" else x + x
    stop = threading.Event()

    def work() -> int:
        n = 0
        with ok.use_backend(backend):
            while not stop.is_set() or n < 5:
                np.testing.assert_array_equal(ok.ops.probe.twice(x).numpy(), x + x)
                np.testing.assert_array_equal(getattr(ok.ops, op)(x, x).numpy(), want)
                n += 1
        return n

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(work) for _ in range(4)]
        for i in range(20):
            ok.register_kernel("Probe>Twice", backend="*", label=f"l{i}")(lambda x: x)
        stop.set()
        assert all(f.result(TIMEOUT) >= 5 for f in futures)


def test_racing_first_calls_construct_the_kernel_once(backend: str, fresh_registry: None) -> None:
    ok.register_op("Probe>Slow").input("x: float").output("y: float")
    built: list[int] = []

    class Slow(ok.OpKernel):
        def __init__(self, ctx: ok.OpKernelConstruction) -> None:
            built.append(1)
            time.sleep(0.02)  # releases the GIL, as compiling a device program does

        def compute(self, ctx: ok.OpKernelContext) -> None:
            ctx.set_output(0, ctx.input(0))

    ok.register_kernel("Probe>Slow", backend=backend)(Slow)
    start = threading.Barrier(THREADS, timeout=TIMEOUT)
    x = np.array([1.0, 2.0], np.float32)

    def first_call(_: int) -> np.ndarray:
        with ok.use_backend(backend):
            start.wait()
            return ok.ops.probe.slow(x).numpy()

    with ThreadPoolExecutor(THREADS) as pool:
        for out in pool.map(first_call, range(THREADS), timeout=TIMEOUT):
            np.testing.assert_array_equal(out, x)
    assert built == [1]


def test_a_kernel_registered_during_a_first_call_is_not_shadowed(backend: str, fresh_registry: None) -> None:
    """A signature built from the kernels before a registration must not be cached after it."""
    ok.register_op("Probe>Which").input("x: float").output("y: float")
    building, registered = threading.Event(), threading.Event()

    class Old(ok.OpKernel):
        def __init__(self, ctx: ok.OpKernelConstruction) -> None:
            building.set()
            assert registered.wait(TIMEOUT)

        def compute(self, ctx: ok.OpKernelContext) -> None:
            ctx.set_output(0, ctx.input(0))

    class New(ok.OpKernel):
        def compute(self, ctx: ok.OpKernelContext) -> None:
            be = ctx.backend
            ctx.set_output(0, be.from_numpy(be.to_numpy(ctx.input(0)) + np.float32(100)))

    ok.register_kernel("Probe>Which", backend=backend)(Old)
    x = ok.tensor([1.0])

    def first_call() -> None:
        with ok.use_backend(backend):
            ok.ops.probe.which(x)

    thread, errors = _in_thread(first_call)
    assert building.wait(TIMEOUT)
    ok.register_kernel("Probe>Which", backend=backend, priority=10)(New)
    registered.set()
    thread.join(TIMEOUT)
    assert not errors, errors
    for _ in range(2):  # the bind path, then the cached one
        assert ok.ops.probe.which(x).numpy()[0] == 101.0


# ---------------------------------------------------------------- variables under threads

UPDATES, ELEMENTS = 200, 300_000  # large enough that an unlocked read-add-write interleaves


def _hammer(update: Any, backend: str, threads: int = 4) -> None:
    """``update()`` UPDATES times in each of ``threads`` threads started together, each
    thread on ``backend`` (a thread does not inherit its creator's ``use_backend``).
    Daemon threads joined with a timeout: a deadlock fails the test, never hangs the run."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with ok.use_backend(backend):
                start.wait(TIMEOUT)
                for _ in range(UPDATES):
                    update()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(TIMEOUT * 4)
    assert not any(t.is_alive() for t in workers), f"updates still running after {TIMEOUT * 4} s: a deadlock"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("how", ["method", "op", "op-use_locking", "traced"])
def test_concurrent_updates_of_a_variable_lose_nothing(backend: str, how: str) -> None:
    """Every update of a variable is atomic, as TensorFlow's resource variables' are: 4
    threads x 200 increments of 300k elements leave every element at 800 (unlocked, about
    half the increments were lost and the variable tore)."""
    v = ok.Variable(np.zeros(ELEMENTS, np.float32))
    one = ok.tensor(np.ones(ELEMENTS, np.float32))
    update = {
        "method": lambda: v.assign_add(one),
        "op": lambda: ok.ops.assign_add(v, one),
        "op-use_locking": lambda: ok.ops.assign_add(v, one, use_locking=True),
        "traced": ok.function(lambda: ok.ops.assign_add(v, one)),
    }[how]
    _hammer(update, backend)
    got = v.numpy()
    assert got.min() == got.max() == 4 * UPDATES


def test_locks_of_several_variables_are_taken_in_one_order(backend: str) -> None:
    """An op updating several variables (ApplyAdam: var, m, v) takes their locks in one
    order whatever the order of its arguments, so two such updates cannot deadlock."""
    from opkernel.tensor import update_lock

    a, b = ok.Variable(np.zeros(4, np.float32)), ok.Variable(np.zeros(4, np.float32))
    flip = [False]

    def update() -> None:
        flip[0] = not flip[0]
        with update_lock(*((a, b) if flip[0] else (b, a))):
            pass

    _hammer(update, backend)
    assert not a._lock.locked() and not b._lock.locked()


def test_concurrent_updates_through_a_kernel_fallback_lose_nothing(twin: str) -> None:
    """The twin backend has no AssignAdd: each update goes to cpu and comes back, under
    the variable's lock."""
    with ok.use_backend(twin):
        v = ok.Variable(np.zeros(ELEMENTS // 10, np.float32))
    one = np.ones(ELEMENTS // 10, np.float32)

    def update() -> None:
        with ok.kernel_fallback("cpu"):
            v.assign_add(one)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's once-per-op warning
        _hammer(update, twin)
    got = v.numpy()
    assert got.min() == got.max() == 4 * UPDATES
