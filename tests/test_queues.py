"""FIFO queues (TensorFlow's FIFOQueueV2 and its ops) under threads, on every backend:
every value enqueued is dequeued once and in order, a dequeue from an empty queue and an
enqueue into a full one wait without holding a thread, closing ends the waits as
TensorFlow does, and traced functions wait too.  (The ops' answers and errors for calls
that do not wait are compared with TensorFlow's in tests/test_resource_variables.py.)
Each scenario runs in a child process: a deadlock fails one named test."""

from __future__ import annotations

import textwrap

from isolated import run_isolated

HEAD = """
import threading, time
import numpy as np
import opkernel as ok
o = ok.ops
FI = [ok.float32, ok.int32]
"""


def child(code: str, backend: str, what: str) -> list[str]:
    out = run_isolated(HEAD + f"ok.set_backend({backend!r})\n" + textwrap.dedent(code), backend=backend, what=what,
                       timeout=90).stdout
    return out.split()


def test_producers_and_consumers_exchange_every_value_once_in_order(backend: str) -> None:
    out = child("""
        q = o.fifo_queue_v2(component_types=FI, shapes=[[2], []], capacity=5)
        got, lock = [], threading.Lock()
        def produce(p):
            for k in range(50):
                o.queue_enqueue_v2(q, [np.full(2, p, np.float32), np.int32(k)])
        def consume():
            for _ in range(50):
                x, k = o.queue_dequeue_v2(q, component_types=FI)
                with lock:
                    got.append((int(x.numpy()[0]), int(k.numpy())))
        threads = [threading.Thread(target=produce, args=(p,)) for p in range(4)] + \\
                  [threading.Thread(target=consume) for _ in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        per = {p: [k for q_, k in got if q_ == p] for p in range(4)}
        print(len(got), all(sorted(ks) == list(range(50)) for ks in per.values()), int(o.queue_size_v2(q).numpy()))
    """, backend, "queue producers and consumers")
    assert out[-3:] == ["200", "True", "0"]


def test_waits_hold_no_thread_and_end_in_order(backend: str) -> None:
    """A dequeue from an empty queue returns its thread to nobody: the enqueue that comes
    later (on another thread) finishes it; an enqueue into a full queue waits for a
    dequeue; FIFO order holds across the waits."""
    out = child("""
        q = o.fifo_queue_v2(component_types=[ok.int64], shapes=[[]], capacity=1)
        result = []
        waiter = threading.Thread(target=lambda: result.append(int(o.queue_dequeue_v2(q, component_types=[ok.int64])[0].numpy())))
        waiter.start()
        time.sleep(0.3)
        waiting = waiter.is_alive() and not result
        o.queue_enqueue_v2(q, [np.int64(1)])
        waiter.join(10)
        o.queue_enqueue_v2(q, [np.int64(2)])  # fills the queue
        blocked = threading.Thread(target=lambda: o.queue_enqueue_v2(q, [np.int64(3)]))
        blocked.start()
        time.sleep(0.3)
        full = blocked.is_alive() and int(o.queue_size_v2(q).numpy()) == 1
        second = int(o.queue_dequeue_v2(q, component_types=[ok.int64])[0].numpy())
        blocked.join(10)
        third = int(o.queue_dequeue_v2(q, component_types=[ok.int64])[0].numpy())
        print(waiting, result, full, second, third, blocked.is_alive())
    """, backend, "queue waits")
    assert out[-6:] == ["True", "[1]", "True", "2", "3", "False"]


def test_close_ends_waiting_dequeues_and_cancels_pending_enqueues(backend: str) -> None:
    out = child("""
        q = o.fifo_queue_v2(component_types=[ok.int32], shapes=[[]], capacity=1)
        errors = []
        def take(n):
            try:
                o.queue_dequeue_many_v2(q, np.int32(n), component_types=[ok.int32])
            except ok.errors.OpkernelError as e:
                errors.append(type(e).__name__)
        takers = [threading.Thread(target=take, args=(3,)) for _ in range(2)]
        for t in takers: t.start()
        time.sleep(0.3)
        o.queue_close_v2(q)
        for t in takers: t.join(10)
        p = o.fifo_queue_v2(component_types=[ok.int32], shapes=[[]], capacity=1)
        o.queue_enqueue_v2(p, [np.int32(1)])
        def put():
            try:
                o.queue_enqueue_v2(p, [np.int32(2)])
            except ok.errors.OpkernelError as e:
                errors.append(type(e).__name__)
        putter = threading.Thread(target=put)
        putter.start()
        time.sleep(0.3)
        o.queue_close_v2(p, cancel_pending_enqueues=True)
        putter.join(10)
        left = int(o.queue_dequeue_v2(p, component_types=[ok.int32])[0].numpy())  # what was in stays
        print(",".join(sorted(errors)), left, any(t.is_alive() for t in takers), putter.is_alive())
    """, backend, "closing a queue")
    assert out[-4:] == ["CancelledError,OutOfRangeError,OutOfRangeError", "1", "False", "False"]


def test_a_traced_dequeue_waits_for_its_enqueue(backend: str) -> None:
    out = child("""
        q = o.fifo_queue_v2(component_types=[ok.float32], shapes=[[3]])

        @ok.function
        def take_and_scale(s):
            (x,) = o.queue_dequeue_v2(q, component_types=[ok.float32])
            return x * s

        two = ok.tensor(2.0)
        res = []
        t = threading.Thread(target=lambda: res.append(take_and_scale(two).numpy().tolist()))
        t.start()
        time.sleep(0.3)
        o.queue_enqueue_many_v2(q, [np.arange(6, dtype=np.float32).reshape(2, 3)])
        t.join(10)
        res.append(take_and_scale(two).numpy().tolist())  # the second element, at the second call
        print(res == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]])
    """, backend, "a traced dequeue")
    assert out[-1] == "True"


def test_an_enqueue_copies_its_values(backend: str) -> None:
    """A Ref Variable enqueued and then updated in place does not change the element."""
    out = child("""
        q = o.fifo_queue_v2(component_types=[ok.float32])
        v = ok.Variable(np.zeros(3, np.float32))
        o.queue_enqueue_v2(q, [v])
        v.assign_add(np.ones(3, np.float32))
        print(o.queue_dequeue_v2(q, component_types=[ok.float32])[0].numpy().tolist() == [0.0, 0.0, 0.0])
    """, backend, "enqueue copies")
    assert out[-1] == "True"


def test_a_dequeue_many_larger_than_the_capacity_is_served(backend: str) -> None:
    """The waiting DequeueMany gathers elements as they come, so enqueues into a full queue
    go on (TensorFlow's); closed short of them, it puts what it gathered back."""
    out = child("""
        q = o.fifo_queue_v2(component_types=[ok.int32], shapes=[[]], capacity=2)
        res = []
        t = threading.Thread(target=lambda: res.append(o.queue_dequeue_many_v2(q, np.int32(5), component_types=[ok.int32])[0].numpy().tolist()))
        t.start()
        for k in range(5):
            o.queue_enqueue_v2(q, [np.int32(k)])
        t.join(10)
        p = o.fifo_queue_v2(component_types=[ok.int32], shapes=[[]], capacity=2)
        errors = []
        def short():
            try:
                o.queue_dequeue_many_v2(p, np.int32(3), component_types=[ok.int32])
            except ok.errors.OutOfRangeError:
                errors.append("OutOfRange")
        u = threading.Thread(target=short)
        u.start()
        o.queue_enqueue_v2(p, [np.int32(7)])
        o.queue_enqueue_v2(p, [np.int32(8)])
        time.sleep(0.3)
        o.queue_close_v2(p)
        u.join(10)
        back = o.queue_dequeue_many_v2(p, np.int32(2), component_types=[ok.int32])[0].numpy().tolist()
        print(res == [[0, 1, 2, 3, 4]], errors == ["OutOfRange"], back == [7, 8], t.is_alive() or u.is_alive())
    """, backend, "dequeue many past the capacity")
    assert out[-4:] == ["True", "True", "True", "False"]


def test_an_abandoned_wait_takes_nothing(backend: str) -> None:
    """A dequeue whose caller stops waiting (an exception in its thread: here a signal
    handler's) is withdrawn: the next element stays in the queue."""
    out = child("""
        import signal
        q = o.fifo_queue_v2(component_types=[ok.int32], shapes=[[]])
        class Stop(Exception): pass
        def on_alarm(*_): raise Stop()
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        try:
            o.queue_dequeue_v2(q, component_types=[ok.int32])
        except Stop:
            pass
        o.queue_enqueue_v2(q, [np.int32(42)])
        print(int(o.queue_size_v2(q).numpy()), int(o.queue_dequeue_v2(q, component_types=[ok.int32])[0].numpy()))
    """, backend, "an abandoned dequeue")
    assert out[-2:] == ["1", "42"]
