"""A channel: values put under a name and taken in order, where a take that comes first
waits for its put without holding a thread (an asynchronous kernel), kept in the
backend's resource manager.  The example of
docs/kernel-authoring.md, "Asynchronous kernels", and the library of
tests/test_async_kernels.py."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable

import opkernel as ok


class Channel(ok.ResourceBase):
    """The values put and not yet taken, or the takes waiting for a put: a resource of
    the backend's resource manager, so every kernel of the backend finds the same one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: deque[Any] = deque()
        self.takers: deque[tuple[ok.OpKernelContext, Callable[[], None]]] = deque()
        self.closed = False

    def debug_string(self) -> str:
        return f"channel: {len(self.values)} values, {len(self.takers)} takes waiting"

    def close(self) -> None:
        """Closed: the takes still waiting are cancelled (also when its container is
        cleaned up)."""
        with self.lock:
            self.closed = True
            takers, self.takers = list(self.takers), deque()
        for taker, done in takers:
            name = taker.get_attr("channel")
            taker.set_status(ok.errors.CancelledError(f"op {taker.op_name!r}: channel {name!r} was closed", op=taker.op_name))
            done()


def channel(ctx: ok.OpKernelConstruction) -> Channel:
    return ctx.resource_manager.lookup_or_create("", ctx.get_attr("channel"), Channel, Channel)


class ChannelPut(ok.OpKernel):
    def compute(self, ctx: ok.OpKernelContext) -> None:
        name, value = ctx.get_attr("channel"), ctx.input(0)
        ch = channel(ctx)
        with ch.lock:
            if ch.closed:
                raise ok.errors.CancelledError(f"op {ctx.op_name!r}: channel {name!r} is closed", op=ctx.op_name)
            if not ch.takers:
                ch.values.append(value)
                return
            taker, done = ch.takers.popleft()
        give(taker, value)  # a take was waiting: it finishes now, on this thread
        done()


class ChannelTake(ok.AsyncOpKernel):
    def compute_async(self, ctx: ok.OpKernelContext, done: Callable[[], None]) -> None:
        name = ctx.get_attr("channel")
        ch = channel(ctx)
        with ch.lock:
            if not ch.values and not ch.closed:
                ch.takers.append((ctx, done))  # no thread waits: the put calls done
                return
            value = ch.values.popleft() if ch.values else None
        if value is None:
            ctx.set_status(ok.errors.OutOfRangeError(f"op {ctx.op_name!r}: channel {name!r} is closed and empty", op=ctx.op_name))
        else:
            give(ctx, value)
        done()


def give(ctx: ok.OpKernelContext, value: Any) -> None:
    """``value`` as the take's output, or the take's failure if it is not of the take's type."""
    want = ctx.output_dtypes[0]
    if value.dtype != want.np:
        ctx.set_status(ok.errors.InvalidArgumentError(
            f"op {ctx.op_name!r}: the channel holds a {value.dtype} value, the take asked for {want.name}",
            op=ctx.op_name,
        ))
    else:
        ctx.set_output(0, value)


class ChannelClose(ok.OpKernel):
    def compute(self, ctx: ok.OpKernelContext) -> None:
        channel(ctx).close()


def register() -> None:
    ok.register_op("Vendor>ChannelPut").input("value: T").attr("T: type").attr("channel: string") \
        .set_is_stateful().set_shape_fn(ok.shape_fns.no_outputs)
    ok.register_op("Vendor>ChannelTake").output("value: T").attr("T: type").attr("channel: string") \
        .set_is_stateful().set_shape_fn(ok.shape_fns.unknown_shape)
    ok.register_op("Vendor>ChannelClose").attr("channel: string").set_is_stateful().set_shape_fn(ok.shape_fns.no_outputs)
    ok.register_kernel("Vendor>ChannelPut", backend="*")(ChannelPut)
    ok.register_kernel("Vendor>ChannelTake", backend="*")(ChannelTake)
    ok.register_kernel("Vendor>ChannelClose", backend="*")(ChannelClose)
