"""Asynchronous kernels (``ok.AsyncOpKernel``, TensorFlow's AsyncOpKernel): a take from a
channel waits for a put from another thread without holding a thread of its own; errors
and cancellation reach the caller as opkernel errors; eagerly and under ``ok.function``,
on every backend.  Each scenario runs in a child process: a deadlock fails one named
test by its timeout.  The channel library is tests/channel_ops.py (the example of
docs/kernel-authoring.md)."""

from __future__ import annotations

import textwrap

import pytest
from isolated import run_isolated

import opkernel as ok

HEAD = """
import threading, time
import numpy as np
import opkernel as ok
import channel_ops
channel_ops.register()
put, take, close = ok.ops.vendor.channel_put, ok.ops.vendor.channel_take, ok.ops.vendor.channel_close
"""


def child(code: str, backend: str, what: str) -> str:
    return run_isolated(HEAD + textwrap.dedent(code), backend=backend, what=what, timeout=60).stdout


def test_producers_and_consumers_exchange_every_value_once(backend: str) -> None:
    out = child(
        """
        got, errors = [], []

        def consume(n):
            try:
                for _ in range(n):
                    got.append(float(take(T=ok.float32, channel="jobs").numpy()[0]))
            except Exception as e:
                errors.append(repr(e))

        def produce(first):
            for k in range(first, first + 100):
                put(ok.tensor(np.array([k], np.float32)), channel="jobs")

        consumers = [threading.Thread(target=consume, args=(100,)) for _ in range(2)]
        for t in consumers:
            t.start()
        time.sleep(0.2)  # the takes come first, and wait
        producers = [threading.Thread(target=produce, args=(100 * i,)) for i in range(2)]
        for t in producers:
            t.start()
        for t in producers + consumers:
            t.join()
        print(sorted(got) == [float(k) for k in range(200)], errors)
        """,
        backend,
        "producer/consumer",
    )
    assert out.strip() == "True []", out


def test_a_waiting_take_holds_no_thread(backend: str) -> None:
    """Eight takes wait, each on its caller's thread: the kernels started none of their own."""
    out = child(
        """
        before = threading.active_count()
        results = []
        takers = [threading.Thread(target=lambda: results.append(take(T=ok.float32, channel="q").numpy()[0]))
                  for _ in range(8)]
        for t in takers:
            t.start()
        time.sleep(0.3)
        waiting = threading.active_count() - before
        for k in range(8):
            put(ok.tensor(np.array([k], np.float32)), channel="q")
        for t in takers:
            t.join()
        print(waiting, sorted(results) == list(range(8)), threading.active_count() - before)
        """,
        backend,
        "waiting takes",
    )
    assert out.split() == ["8", "True", "0"], out


def test_a_traced_take_waits_for_its_put(backend: str) -> None:
    out = child(
        """
        f = ok.function(lambda x: take(T=ok.float32, channel="c") * x)
        put(ok.tensor(np.array([3.0], np.float32)), channel="c")
        first = f(ok.tensor(np.array([2.0], np.float32))).numpy().tolist()  # traces, and takes 3
        results = []
        consumer = threading.Thread(target=lambda: results.append(f(ok.tensor(np.array([10.0], np.float32))).numpy().tolist()))
        consumer.start()
        time.sleep(0.2)
        put(ok.tensor(np.array([4.0], np.float32)), channel="c")
        consumer.join()
        print(first, results)
        """,
        backend,
        "traced take",
    )
    assert out.strip() == "[6.0] [[40.0]]", out


def test_close_cancels_waiting_takes_and_ends_the_channel(backend: str) -> None:
    out = child(
        """
        seen = []

        def waiting_take():
            try:
                take(T=ok.float32, channel="d")
            except ok.errors.OpkernelError as e:
                seen.append(f"{type(e).__name__}: {e}")

        takers = [threading.Thread(target=waiting_take) for _ in range(3)]
        for t in takers:
            t.start()
        time.sleep(0.2)
        close(channel="d")
        for t in takers:
            t.join()
        for call in (lambda: take(T=ok.float32, channel="d"), lambda: put(ok.tensor([1.0]), channel="d")):
            try:
                call()
            except ok.errors.OpkernelError as e:
                seen.append(f"{type(e).__name__}: {e}")
        put(ok.tensor(np.array([1.0], np.float64)), channel="e")
        try:
            take(T=ok.float32, channel="e")
        except ok.errors.InvalidArgumentError as e:
            seen.append(f"{type(e).__name__}: {e}")
        print("\\n".join(seen))
        """,
        backend,
        "close",
    )
    lines = out.strip().splitlines()
    assert lines[:3] == ["CancelledError: op 'Vendor>ChannelTake': channel 'd' was closed"] * 3, out
    assert lines[3:] == [
        "OutOfRangeError: op 'Vendor>ChannelTake': channel 'd' is closed and empty",
        "CancelledError: op 'Vendor>ChannelPut': channel 'd' is closed",
        "InvalidArgumentError: op 'Vendor>ChannelTake': the channel holds a float64 value, the take asked for float32",
    ], out


def test_a_kernels_status_and_its_own_errors_reach_the_caller(fresh_registry: None, backend: str) -> None:
    """``ctx.set_status`` fails a call of any class kernel; an error raised by
    ``compute_async`` before ``done`` reaches the caller as from a plain kernel; ``done``
    may come from another thread."""
    ok.register_op("Probe>Later").input("x: float").output("y: float").set_shape_fn(ok.shape_fns.unchanged_shape)
    ok.register_op("Probe>Refuse").input("x: float").output("y: float").attr("how: string")

    @ok.register_kernel("Probe>Later", backend="*")
    class Later(ok.AsyncOpKernel):
        def compute_async(self, ctx: ok.OpKernelContext, done: object) -> None:
            def finish() -> None:
                ctx.set_output(0, ctx.input(0))
                done()  # type: ignore[operator]

            import threading

            threading.Timer(0.05, finish).start()

    @ok.register_kernel("Probe>Refuse", backend="*")
    class Refuse(ok.AsyncOpKernel):
        def compute_async(self, ctx: ok.OpKernelContext, done: object) -> None:
            if ctx.get_attr("how") == "raise":
                raise ok.errors.InvalidArgumentError("op 'Probe>Refuse': refused at once", op=ctx.op_name)
            ctx.set_status(ok.errors.InvalidArgumentError("op 'Probe>Refuse': refused through done", op=ctx.op_name))
            done()  # type: ignore[operator]

    import numpy as np

    x = ok.tensor(np.array([1.5], np.float32))
    assert ok.ops.probe.later(x).numpy().tolist() == [1.5]
    for how, message in (("raise", "refused at once"), ("status", "refused through done")):
        with pytest.raises(ok.errors.InvalidArgumentError, match=message):
            ok.ops.probe.refuse(x, how=how)
