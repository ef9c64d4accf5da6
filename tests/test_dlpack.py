"""DLPack exchange: ``Tensor.__dlpack__``/``__dlpack_device__`` and ``ok.from_dlpack``.

A tensor is a value: a consumer sees its memory read-only (DLPack 1.0's flag) or gets a
copy; ``ok.from_dlpack`` shares the exporter's memory where the backend can hold it and
copies otherwise.  torch is exercised where it is installed (it is no test dependency).
"""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok
from opkernel.errors import DLPackError

HOST = {"cpu"}


def _host(backend: str) -> bool:
    return ok.tensor(0.0)._backend.host_memory_is_native


def test_a_tensor_exports_to_numpy_read_only_or_refuses_clearly(backend: str) -> None:
    t = ok.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    if not _host(backend):
        with pytest.raises(DLPackError, match=f"backend {backend!r} cannot be exchanged through DLPack"):
            np.from_dlpack(t)
        with pytest.raises(DLPackError):
            t.__dlpack_device__()
        return
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert np.shares_memory(a, t.numpy()), "a DLPack 1.0 consumer shares the tensor's memory"
    assert not a.flags.writeable, "...but read-only: the tensor is a value"
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 7
    np.testing.assert_array_equal(t.numpy()[0], [0, 1, 2])


def test_a_consumer_of_pre_1_0_capsules_gets_a_copy(backend: str) -> None:
    if not _host(backend):
        pytest.skip("only host tensors export")
    t = ok.tensor([1.0, 2.0, 3.0])
    capsule = t.__dlpack__()  # no max_version: a capsule that cannot be marked read-only
    a = np.from_dlpack(_Capsule(capsule))
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])
    assert not np.shares_memory(a, t.numpy()), "a capsule without the read-only flag holds a copy"
    with pytest.raises(DLPackError, match="copy=False"):
        t.__dlpack__(copy=False)
    b = np.from_dlpack(t, copy=True)
    assert b.flags.writeable and not np.shares_memory(b, t.numpy())


class _Capsule:
    """A legacy exporter handing over a capsule made beforehand."""

    def __init__(self, capsule: object) -> None:
        self.capsule = capsule

    def __dlpack__(self, **_: object) -> object:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_from_dlpack_shares_host_memory_on_cpu_and_copies_elsewhere(backend: str) -> None:
    src = np.arange(5, dtype=np.int32)
    t = ok.from_dlpack(src)
    assert t.backend == "cpu" and t.dtype == ok.int32
    np.testing.assert_array_equal(t.numpy(), src)
    assert np.shares_memory(t.numpy(), src), "zero-copy by default"
    c = ok.from_dlpack(src, copy=True)
    assert not np.shares_memory(c.numpy(), src)
    on = ok.from_dlpack(src, backend=backend)
    assert on.backend == backend
    np.testing.assert_array_equal(on.numpy(), src)
    np.testing.assert_array_equal(ok.ops.add(on, 1).numpy(), src + 1)
    if backend not in HOST:
        with pytest.raises(DLPackError, match="copy=False"):
            ok.from_dlpack(src, backend=backend, copy=False)


def test_round_trip_keeps_dtype_shape_and_values(backend: str) -> None:
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64, np.int8, np.uint16, np.int64, np.bool_, np.complex64):
        a = (rng.standard_normal((3, 4)) * 10).astype(dtype)
        t = ok.tensor(a)
        back = ok.from_dlpack(np.from_dlpack(t) if _host(backend) else a)
        assert back.dtype == ok.as_dtype(dtype)
        np.testing.assert_array_equal(back.numpy(), a)
    scalar = ok.from_dlpack(np.array(2.5, np.float32))
    assert scalar.shape == () and scalar.item() == 2.5


def test_from_dlpack_errors_name_what_is_wrong() -> None:
    with pytest.raises(DLPackError, match="builtins.list is not a DLPack exporter"):
        ok.from_dlpack([1, 2])

    class Vulkan:
        def __dlpack__(self, **_: object) -> object:
            raise AssertionError("not reached")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (7, 0)

    with pytest.raises(DLPackError, match="kDLVulkan.*which no backend holds"):
        ok.from_dlpack(Vulkan())
    t = ok.tensor([1.0])
    assert ok.from_dlpack(t) is t


def test_torch_both_ways_without_copies() -> None:
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32)
    t = ok.from_dlpack(x)
    assert t.backend == "cpu" and t.numpy().ctypes.data == x.data_ptr()
    with ok.use_backend("cpu"):
        np.testing.assert_array_equal(ok.ops.mul(t, 2.0).numpy(), np.arange(6) * 2.0)
    # torch takes the tensor's memory as it is (torch 2.x has no read-only tensors and
    # drops DLPack's flag): writing to it is forbidden, as docs/c-kernels.md says.
    y = torch.from_dlpack(ok.tensor(np.arange(4, dtype=np.int64), backend="cpu"))
    assert y.dtype == torch.int64 and y.tolist() == [0, 1, 2, 3]
    z = ok.tensor([1.0, 2.0], backend="cpu")
    assert torch.from_dlpack(z).data_ptr() == z.numpy().ctypes.data


def test_jax_both_ways() -> None:
    """JAX (0.10) asks for pre-1.0 capsules, so it gets a copy of a tensor; a jax array
    comes in without one."""
    jnp = pytest.importorskip("jax.numpy")
    t = ok.tensor(np.arange(8, dtype=np.float32), backend="cpu")
    j = jnp.from_dlpack(t)
    np.testing.assert_array_equal(np.asarray(j), np.arange(8))
    x = jnp.arange(6, dtype=jnp.float32) * 2
    u = ok.from_dlpack(x)
    assert u.backend == "cpu" and u.numpy().ctypes.data == x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(u.numpy(), np.arange(6) * 2.0)


def test_an_exported_variable_is_a_snapshot(backend: str) -> None:
    """A Variable's export holds its memory, so a later update copies the variable first
    (as ``read_value`` snapshots do): the consumer's array never changes."""
    if not _host(backend):
        pytest.skip("only host tensors export")
    v = ok.Variable(np.zeros(3, np.float32))
    a = np.from_dlpack(v)
    v.assign_add(np.ones(3, np.float32))
    np.testing.assert_array_equal(a, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(v.numpy(), [1.0, 1.0, 1.0])
