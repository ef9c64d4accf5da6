"""The resource manager (``ok.ResourceMgr``, TensorFlow's ResourceMgr): containers,
names, types, creation once under races, deletion and cleanup closing resources, and one
manager per backend reached from kernels as ``ctx.resource_manager``."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import opkernel as ok
from opkernel.errors import AlreadyExistsError, InvalidArgumentError, ResourceNotFoundError


class Box(ok.ResourceBase):
    made = 0

    def __init__(self) -> None:
        Box.made += 1
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class Other(ok.ResourceBase):
    pass


def test_containers_names_and_types() -> None:
    mgr = ok.ResourceMgr("cpu")
    box = Box()
    mgr.create("", "a", box)
    assert mgr.lookup("", "a", Box) is box and mgr.lookup("localhost", "a", Box) is box
    assert mgr.containers() == ["localhost"] and mgr.names() == ["a"]
    with pytest.raises(AlreadyExistsError, match="resource 'a' in container 'localhost' on backend 'cpu' already exists"):
        mgr.create("", "a", Box())
    with pytest.raises(ResourceNotFoundError, match="resource 'b' in container 'localhost' on backend 'cpu' does not exist"):
        mgr.lookup("", "b", Box)
    with pytest.raises(InvalidArgumentError, match="resource 'a' in container 'localhost' on backend 'cpu' is a Box"):
        mgr.lookup("", "a", Other)
    with pytest.raises(InvalidArgumentError, match="is not a ResourceBase"):
        mgr.create("", "c", object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="the creator made 3, not a ResourceBase"):
        mgr.lookup_or_create("", "d", Box, lambda: 3)  # type: ignore[arg-type,return-value]
    assert "d" not in mgr.names()
    mgr.create("mine", "a", Other())  # another container, the same name
    assert isinstance(mgr.lookup("mine", "a", Other), Other)
    mgr.delete("", "a", Box)
    assert box.closed == 1 and mgr.containers() == ["mine"]
    with pytest.raises(ResourceNotFoundError):
        mgr.delete("", "a")


def test_lookup_or_create_creates_once_under_a_race() -> None:
    mgr = ok.ResourceMgr()
    start = threading.Barrier(8)
    before = Box.made

    def get() -> Box:
        start.wait()
        return mgr.lookup_or_create("", "shared", Box, Box)

    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda _: get(), range(8)))
    assert Box.made - before == 1 and all(f is found[0] for f in found)


def test_cleanup_closes_a_containers_resources_once() -> None:
    mgr = ok.ResourceMgr()
    boxes = [mgr.lookup_or_create("run", f"b{i}", Box, Box) for i in range(3)]
    keep = mgr.lookup_or_create("", "kept", Box, Box)
    mgr.cleanup("run")
    mgr.cleanup("run")  # gone already: nothing happens
    assert [b.closed for b in boxes] == [1, 1, 1] and keep.closed == 0
    assert mgr.containers() == ["localhost"]


def test_kernels_share_their_backends_manager(fresh_registry: None, backend: str) -> None:
    """``ctx.resource_manager`` is the backend's: a counter kept there counts the calls of
    two ops on this backend, and another backend's manager does not hold it."""
    ok.register_op("Probe>Count").input("x: float").output("y: int64").attr("counter: string").set_is_stateful()
    ok.register_op("Probe>Peek").output("y: int64").attr("counter: string").set_is_stateful()

    class Counter(ok.ResourceBase):
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.count = 0

    @ok.register_kernel("Probe>Count", backend="*")
    class Count(ok.OpKernel):
        def compute(self, ctx: ok.OpKernelContext) -> None:
            c = ctx.resource_manager.lookup_or_create("", ctx.get_attr("counter"), Counter, Counter)
            with c.lock:
                c.count += 1
                n = c.count
            ctx.set_output(0, ctx.backend.from_numpy(np.array(n, np.int64)))

    @ok.register_kernel("Probe>Peek", backend="*")
    class Peek(ok.OpKernel):
        def compute(self, ctx: ok.OpKernelContext) -> None:
            c = ctx.resource_manager.lookup("", ctx.get_attr("counter"), Counter)
            ctx.set_output(0, ctx.backend.from_numpy(np.array(c.count, np.int64)))

    name = f"calls-{backend}"
    x = ok.tensor(np.zeros(2, np.float32))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: _count(x, name, backend), range(40)))
    assert int(ok.ops.probe.peek(counter=name)) == 40
    mgr = ok.tensor(0.0)._backend.resource_manager
    assert name in mgr.names()
    for other in ok.available_backends():
        if other != backend:
            with ok.use_backend(other):
                with pytest.raises(ResourceNotFoundError, match=f"resource {name!r}"):
                    ok.ops.probe.peek(counter=name)
    mgr.cleanup("")


def _count(x: ok.Tensor, name: str, backend: str) -> None:
    with ok.use_backend(backend):
        ok.ops.probe.count(x, counter=name)


def test_a_creator_that_runs_finalizers_keeps_what_it_made() -> None:
    """A garbage collection inside the creator may discard resources of anonymous handles
    (their finalizers) and empty the container: the new resource is still kept."""
    import gc

    from opkernel.resources import ResourceHandle

    mgr = ok.ResourceMgr("cpu")
    handle = ResourceHandle("cpu", "", "anonymous", "Box", manager=mgr)
    mgr.create("", handle.name, Box())

    class Cycle:
        pass

    holder = Cycle()
    holder.me = holder  # type: ignore[attr-defined]
    holder.handle = handle  # type: ignore[attr-defined]
    del holder, handle  # the handle now lives only in a reference cycle

    def creator() -> Box:
        gc.collect()  # as an allocation may: the cycle goes, the handle's finalizer discards "anonymous"
        return Box()

    made = mgr.lookup_or_create("", "new", Box, creator)
    assert mgr.lookup("", "new", Box) is made and mgr.names() == ["new"]
