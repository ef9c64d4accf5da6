"""Queues behind ``resource`` handles (TensorFlow's data_flow_ops): FIFOQueueV2 and the
ops that enqueue, dequeue, close and measure it.

A queue holds tuples of tensors (its ``component_types``, and ``shapes`` when given) up
to ``capacity`` elements (-1: no limit).  Dequeues are asynchronous kernels
(``ok.AsyncOpKernel``): a dequeue from an empty queue leaves its callback with the queue
and holds no thread; the enqueue that brings its elements (on another thread) finishes
it.  An enqueue into a full queue waits the same way for room.  Closing the queue
finishes the waiting dequeues that cannot be served with OutOfRangeError, and cancels
the waiting enqueues when ``cancel_pending_enqueues`` (CancelledError); an enqueue into a
closed queue is cancelled.  ``timeout_ms`` is accepted and not used, as in TensorFlow.

A queue lives in host memory on every backend, as TensorFlow's (its kernels are CPU
kernels there): every component argument is host memory, so on OpenCL an element is read
to the host when enqueued and written back when dequeued.  Enqueued values are copies.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable

import numpy as np

from .. import shape_fns
from ..dtypes import DType
from ..errors import CancelledError, InvalidArgumentError, OutOfRangeError
from ..gradients import not_differentiable
from ..kernels import AsyncOpKernel, OpKernel, OpKernelContext, register_kernel
from ..op_registry import register_op
from ..resources import ResourceBase
from ..shapes import InferenceContext
from .resource_variable_ops import (
    handle_array, handle_of, handle_only_shape, handle_to_scalar_shape, make_handle, resource_from_handle,
)

__all__ = ["QUEUE_OPS", "FIFOQueue", "register_ops", "register_gradients", "register_kernels"]

QUEUE_OPS = (
    "FIFOQueueV2", "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2", "QueueDequeueManyV2", "QueueCloseV2",
    "QueueSizeV2", "QueueIsClosedV2",
)

Element = tuple[np.ndarray, ...]
Done = Callable[[], None]


class FIFOQueue(ResourceBase):
    """A FIFO queue's state, guarded by ``lock``: the elements, the dequeues waiting for
    elements and the enqueues waiting for room (each with its context and ``done``)."""

    def __init__(self, name: str, types: tuple[DType, ...], shapes: tuple[tuple[int, ...], ...] | None,
                 capacity: int) -> None:
        self.name = name
        self.types = types
        self.shapes = shapes
        self.capacity = capacity
        self.lock = threading.Lock()
        self.items: deque[Element] = deque()
        # n (None: one element, no batch dimension), and the elements gathered so far
        self.takers: deque[tuple[int | None, OpKernelContext, Done, list[Element]]] = deque()
        self.putters: deque[tuple[deque[Element], OpKernelContext, Done]] = deque()
        self.closed = False

    def debug_string(self) -> str:
        return (f"FIFOQueue of {', '.join(t.name for t in self.types)}: {len(self.items)} elements, "
                f"{len(self.takers)} dequeues and {len(self.putters)} enqueues waiting{', closed' if self.closed else ''}")

    def close(self) -> None:
        """Leaving its manager: closed, every waiting enqueue cancelled."""
        self.shut(cancel_pending_enqueues=True)

    # ------------------------------------------------------------ with the lock held

    def _settle(self) -> list[Callable[[], None]]:
        """Serve what can be served now; returns the completions to run after the lock is
        released (outputs set, ``done`` called).  The first waiting dequeue gathers its
        elements one by one (its partial batch frees room for waiting enqueues, so a
        DequeueMany may ask for more than the capacity, as in TensorFlow); once the queue
        is closed with no enqueue pending, a dequeue still short of its elements puts
        them back and fails."""
        fired: list[Callable[[], None]] = []
        moved = True
        while moved:
            moved = False
            while self.putters:
                elements, ctx, done = self.putters[0]
                while elements and (self.capacity < 0 or len(self.items) < self.capacity):
                    self.items.append(elements.popleft())
                    moved = True
                if elements:
                    break
                self.putters.popleft()
                fired.append(done)
            while self.takers:
                n, ctx, done, taken = self.takers[0]
                want = 1 if n is None else n
                while len(taken) < want and self.items:
                    taken.append(self.items.popleft())
                    moved = True
                if len(taken) == want:
                    self.takers.popleft()
                    fired.append(_giving(ctx, taken, n, self, done))
                elif self.closed and not self.putters:
                    self.takers.popleft()
                    self.items.extendleft(reversed(taken))  # back at the front, in order
                    fired.append(_failing(ctx, OutOfRangeError(
                        f"op {ctx.op_name!r}: queue {self.name!r} is closed and has too few elements (asked for "
                        f"{want}, it holds {len(self.items)})", op=ctx.op_name), done))
                else:
                    break
        return fired

    def cancel(self, ctx: OpKernelContext) -> None:
        """Forget the waiting enqueue or dequeue of ``ctx``, whose caller stopped waiting
        (an exception in its thread): its elements stay out of the queue, or go back to
        its front, and no later op serves it."""
        with self.lock:
            for k, (_, waiting, _, taken) in enumerate(self.takers):
                if waiting is ctx:
                    del self.takers[k]
                    self.items.extendleft(reversed(taken))
                    break
            else:
                for k, (_, waiting, _) in enumerate(self.putters):
                    if waiting is ctx:
                        del self.putters[k]
                        break
            fired = self._settle()
        for fire in fired:
            fire()

    # ------------------------------------------------------------ the ops

    def put(self, ctx: OpKernelContext, elements: list[Element], done: Done) -> None:
        with self.lock:
            if self.closed:
                fired = [_failing(ctx, CancelledError(f"op {ctx.op_name!r}: queue {self.name!r} is closed",
                                                      op=ctx.op_name), done)]
            else:
                self.putters.append((deque(elements), ctx, done))
                fired = self._settle()
        for fire in fired:
            fire()

    def take(self, ctx: OpKernelContext, n: int | None, done: Done) -> None:
        with self.lock:
            self.takers.append((n, ctx, done, []))
            fired = self._settle()
        for fire in fired:
            fire()

    def shut(self, cancel_pending_enqueues: bool) -> None:
        with self.lock:
            self.closed = True
            fired: list[Callable[[], None]] = []
            if cancel_pending_enqueues:
                for _, ctx, done in self.putters:
                    fired.append(_failing(ctx, CancelledError(
                        f"op {ctx.op_name!r}: queue {self.name!r} was closed with its pending enqueues cancelled",
                        op=ctx.op_name), done))
                self.putters.clear()
            fired += self._settle()
        for fire in fired:
            fire()


def _giving(ctx: OpKernelContext, taken: list[Element], n: int | None, queue: FIFOQueue,
            done: Done) -> Callable[[], None]:
    def fire() -> None:
        for i, dtype in enumerate(queue.types):
            if n is None:
                ctx.set_output(i, taken[0][i])
            elif taken:
                ctx.set_output(i, np.stack([element[i] for element in taken]))
            else:  # n = 0: DequeueMany needs the shapes, so they are known
                ctx.set_output(i, np.zeros((0, *(queue.shapes or ())[i]), dtype.np))
        done()

    return fire


def _failing(ctx: OpKernelContext, error: Exception, done: Done) -> Callable[[], None]:
    def fire() -> None:
        ctx.set_status(error)
        done()

    return fire


# ---------------------------------------------------------------- kernels


def _queue(ctx: OpKernelContext) -> FIFOQueue:
    handle = handle_of(ctx.op_name, ctx.backend, ctx.input(0), "FIFOQueue")
    found: FIFOQueue = resource_from_handle(ctx.op_name, ctx.backend, handle, FIFOQueue)
    return found


def _components(ctx: OpKernelContext, queue: FIFOQueue, many: bool) -> list[Element]:
    """The elements an enqueue brings, checked against the queue (before anything is
    enqueued): host copies, one tuple per element."""
    op = ctx.op_name
    values = [np.array(ctx.input(i)) for i in range(1, ctx.num_inputs())]  # copies of the components
    types = tuple(ctx.get_attr("Tcomponents"))
    if types != queue.types:
        raise InvalidArgumentError(
            f"op {op!r}: queue {queue.name!r} holds ({', '.join(t.name for t in queue.types)}), the enqueue gives "
            f"({', '.join(t.name for t in types)})", op=op,
        )
    if many:
        sizes = {v.shape[0] if v.ndim else None for v in values}
        if None in sizes or len(sizes) != 1:
            raise InvalidArgumentError(
                f"op {op!r}: every component needs the same first dimension (the number of elements), got shapes "
                f"{[list(v.shape) for v in values]}", op=op,
            )
        count = sizes.pop() or 0
        shapes = [v.shape[1:] for v in values]
    else:
        count, shapes = 1, [v.shape for v in values]
    if queue.shapes is not None:
        for i, (got, want) in enumerate(zip(shapes, queue.shapes)):
            if tuple(got) != want:
                raise InvalidArgumentError(
                    f"op {op!r}: component {i} of queue {queue.name!r} has shape {list(want)}, got {list(got)}"
                    f"{' (after the first dimension)' if many else ''}", op=op,
                )
    if many:
        return [tuple(v[k] for v in values) for k in range(count)]
    return [tuple(values)]


class _MakeQueue(OpKernel):
    def compute(self, ctx: OpKernelContext) -> None:
        types = tuple(ctx.get_attr("component_types"))
        shapes_attr = list(ctx.get_attr("shapes"))
        capacity = int(ctx.get_attr("capacity"))
        op = ctx.op_name
        if shapes_attr and len(shapes_attr) != len(types):
            raise InvalidArgumentError(
                f"op {op!r}: shapes must be empty or give one shape per component ({len(types)}), got "
                f"{len(shapes_attr)}", op=op,
            )
        shapes: tuple[tuple[int, ...], ...] | None = None
        if shapes_attr:
            dims = [list(s) if not hasattr(s, "as_list") else s.as_list() for s in shapes_attr]
            if any(d is None or any(x is None or x < 0 for x in d) for d in dims):
                raise InvalidArgumentError(f"op {op!r}: a queue's shapes must be fully defined, got {dims}", op=op)
            shapes = tuple(tuple(int(x) for x in d) for d in dims)
        handle = make_handle(ctx.backend, "FIFOQueue", ctx.get_attr("container"), ctx.get_attr("shared_name"))
        queue = ctx.resource_manager.lookup_or_create(
            handle.container, handle.name, FIFOQueue, lambda: FIFOQueue(handle.name, types, shapes, capacity)
        )
        if (queue.types, queue.shapes, queue.capacity) != (types, shapes, capacity):
            raise InvalidArgumentError(
                f"op {op!r}: {handle.name!r} names a queue of ({', '.join(t.name for t in queue.types)}), shapes "
                f"{queue.shapes}, capacity {queue.capacity}; this op asks for ({', '.join(t.name for t in types)}), "
                f"shapes {shapes}, capacity {capacity}", op=op,
            )
        ctx.set_output(0, handle_array(handle))


class _Enqueue(AsyncOpKernel):
    many = False

    def compute_async(self, ctx: OpKernelContext, done: Done) -> None:
        queue = _queue(ctx)
        queue.put(ctx, _components(ctx, queue, self.many), done)

    def cancel(self, ctx: OpKernelContext) -> None:
        _queue(ctx).cancel(ctx)


class _EnqueueMany(_Enqueue):
    many = True


class _Dequeue(AsyncOpKernel):
    def compute_async(self, ctx: OpKernelContext, done: Done) -> None:
        queue = _queue(ctx)
        _check_types(ctx, queue)
        queue.take(ctx, None, done)

    def cancel(self, ctx: OpKernelContext) -> None:
        _queue(ctx).cancel(ctx)


class _DequeueMany(_Dequeue):
    def compute_async(self, ctx: OpKernelContext, done: Done) -> None:
        queue = _queue(ctx)
        _check_types(ctx, queue)
        n = np.asarray(ctx.input(1))
        op = ctx.op_name
        if n.shape != ():
            raise InvalidArgumentError(f"op {op!r}: n must be a scalar, got shape {list(n.shape)}", op=op)
        if int(n) < 0:
            raise InvalidArgumentError(f"op {op!r}: n must be at least 0, got {int(n)}", op=op)
        if queue.shapes is None:
            raise InvalidArgumentError(
                f"op {op!r}: dequeuing many needs a queue made with the shapes of its components", op=op
            )
        queue.take(ctx, int(n), done)


def _check_types(ctx: OpKernelContext, queue: FIFOQueue) -> None:
    types = tuple(ctx.get_attr("component_types"))
    if types != queue.types:
        raise InvalidArgumentError(
            f"op {ctx.op_name!r}: queue {queue.name!r} holds ({', '.join(t.name for t in queue.types)}), the "
            f"dequeue asks for ({', '.join(t.name for t in types)})", op=ctx.op_name,
        )


class _Close(OpKernel):
    def compute(self, ctx: OpKernelContext) -> None:
        _queue(ctx).shut(bool(ctx.get_attr("cancel_pending_enqueues")))


class _Size(OpKernel):
    def compute(self, ctx: OpKernelContext) -> None:
        queue = _queue(ctx)
        with queue.lock:
            ctx.set_output(0, np.array(len(queue.items), np.int32))


class _IsClosed(OpKernel):
    def compute(self, ctx: OpKernelContext) -> None:
        queue = _queue(ctx)
        with queue.lock:
            ctx.set_output(0, np.array(queue.closed))


# ---------------------------------------------------------------- registration


def _dequeue_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 0)
    for i in range(c.num_outputs()):
        c.set_output(i, c.unknown_shape())


def register_ops() -> None:
    register_op("FIFOQueueV2").output("handle: resource").attr("component_types: list(type) >= 1").attr(
        "shapes: list(shape) >= 0 = []"
    ).attr("capacity: int = -1").attr("container: string = ''").attr("shared_name: string = ''").set_is_stateful(
    ).set_shape_fn(shape_fns.scalar_shape).doc(
        "A handle to the first-in first-out queue shared_name of this backend (an anonymous queue, deleted with "
        "its handle, when shared_name is empty), holding up to capacity elements (-1: no limit)."
    )
    for name, what in (("QueueEnqueueV2", "one element"),
                       ("QueueEnqueueManyV2", "the elements the components hold along their first dimension")):
        register_op(name).input("handle: resource").input("components: Tcomponents").attr(
            "Tcomponents: list(type) >= 1"
        ).attr("timeout_ms: int = -1").set_is_stateful().set_shape_fn(handle_only_shape).doc(
            f"Enqueues {what}, waiting for room in a full queue; CancelledError once the queue is closed."
        )
    register_op("QueueDequeueV2").input("handle: resource").output("components: component_types").attr(
        "component_types: list(type) >= 1"
    ).attr("timeout_ms: int = -1").set_is_stateful().set_shape_fn(_dequeue_shape).doc(
        "Dequeues one element, waiting for one; OutOfRangeError when the queue is closed and empty."
    )
    register_op("QueueDequeueManyV2").input("handle: resource").input("n: int32").output(
        "components: component_types"
    ).attr("component_types: list(type) >= 1").attr("timeout_ms: int = -1").set_is_stateful().set_shape_fn(
        _dequeue_shape
    ).doc("Dequeues n elements stacked along a new first dimension, waiting for them; OutOfRangeError when the "
          "queue is closed with fewer.")
    register_op("QueueCloseV2").input("handle: resource").attr("cancel_pending_enqueues: bool = false").set_is_stateful(
    ).set_shape_fn(handle_only_shape).doc(
        "Closes the queue: no more enqueues; dequeues that cannot be served fail with OutOfRangeError."
    )
    register_op("QueueSizeV2").input("handle: resource").output("size: int32").set_is_stateful().set_shape_fn(
        handle_to_scalar_shape
    ).doc("The number of elements in the queue.")
    register_op("QueueIsClosedV2").input("handle: resource").output("is_closed: bool").set_is_stateful().set_shape_fn(
        handle_to_scalar_shape
    ).doc("Whether the queue is closed.")


def register_gradients() -> None:
    for name in QUEUE_OPS:
        not_differentiable(name)


def register_kernels() -> None:
    """Kernels for every backend, every tensor argument in host memory (the queue is)."""
    for name, kernel, host in (
        ("FIFOQueueV2", _MakeQueue, ("handle",)),
        ("QueueEnqueueV2", _Enqueue, ("handle", "components")),
        ("QueueEnqueueManyV2", _EnqueueMany, ("handle", "components")),
        ("QueueDequeueV2", _Dequeue, ("handle", "components")),
        ("QueueDequeueManyV2", _DequeueMany, ("handle", "n", "components")),
        ("QueueCloseV2", _Close, ("handle",)),
        ("QueueSizeV2", _Size, ("handle", "size")),
        ("QueueIsClosedV2", _IsClosed, ("handle", "is_closed")),
    ):
        register_kernel(name, backend="*", host_memory=host)(kernel)

