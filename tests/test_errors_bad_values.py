"""Bad values get a clear opkernel error before any work: Python values no tensor can
hold, integers past a dtype's range, ragged lists, outputs sized by input values past
int64 or the host's memory, and a kernel running out of memory."""

from __future__ import annotations

import textwrap
from typing import Any, Callable

import numpy as np
import pytest

import opkernel as ok
from opkernel import _bounds, engine
from opkernel.errors import InvalidArgumentError, OpkernelError, OpTypeError, ResourceExhaustedError

from isolated import run_isolated


def _generator() -> Any:
    return (v for v in [1, 2])


UNCONVERTIBLE: dict[str, Callable[[], Any]] = {
    "None": lambda: None,
    "set": lambda: {1, 2},
    "dict": lambda: {1: 2},
    "iterator": lambda: iter([1, 2]),
    "generator": _generator,
    "object": object,
    "None in a list": lambda: [1.0, None],
    "int past uint64": lambda: 2**70,
    "int past uint64 in a list": lambda: [1, 2**70],
    "ints no integer dtype holds": lambda: [-1, 2**63],
}


@pytest.mark.parametrize("case", UNCONVERTIBLE)
def test_a_value_no_tensor_can_hold_is_refused_naming_the_op_and_input(backend: str, case: str) -> None:
    with pytest.raises((OpTypeError, InvalidArgumentError)) as info:
        ok.ops.add(UNCONVERTIBLE[case](), 1)
    assert "op 'Add', input 'x'" in str(info.value)
    with pytest.raises((OpTypeError, InvalidArgumentError), match="ok.tensor: cannot convert"):
        ok.tensor(UNCONVERTIBLE[case]())


def test_none_next_to_a_float_tensor_is_not_read_as_nan(backend: str) -> None:
    with pytest.raises(OpTypeError, match=r"op 'Add', input 'y'.*None \(NoneType\)"):
        ok.ops.add(ok.tensor([1.0, 2.0]), None)
    with pytest.raises(OpTypeError, match=r"\[1\]"):  # where in the list
        ok.ops.add(ok.tensor([1.0, 2.0]), [3.0, None])


def test_text_is_not_parsed_into_a_number_and_numbers_are_not_text(backend: str) -> None:
    with pytest.raises(OpTypeError, match=r"op 'Add', input 'y'.*'3'.*string_to_number"):
        ok.ops.add(ok.tensor([1.0]), "3")
    with pytest.raises(OpTypeError, match="str or bytes"):
        ok.tensor(1, dtype="string")
    with pytest.raises(OpTypeError, match=r"\[1\]"):
        ok.tensor(["a", 1])
    if ok.engine.backend_instance(backend).supports_dtype(ok.string):
        assert ok.tensor(["a", b"b"]).dtype is ok.string
    else:  # cuda holds no strings (docs/cuda.md)
        with pytest.raises(OpTypeError, match="cannot hold"):
            ok.tensor(["a", b"b"])


def test_a_ragged_list_is_an_invalid_argument_saying_where(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"op 'Add', input 'x'.*rectangular.*\[1\] has length 1"):
        ok.ops.add([[1, 2], [3]], 1)
    with pytest.raises(InvalidArgumentError, match="mixes lists and scalars"):
        ok.tensor([[1, 2], 3])


def test_an_integer_past_the_dtype_names_the_input_and_the_range(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"op 'OneHot', input 'depth'.*out of range for int32"):
        ok.ops.one_hot(np.array([0, 1], np.int64), 10**12, 1.0, 0.0)
    with pytest.raises(InvalidArgumentError, match=r"op 'Add', input 'y'.*out of range for int32"):
        ok.ops.add(ok.tensor([1], dtype="int32"), 2**40)
    with pytest.raises(InvalidArgumentError, match="out of range for uint8"):
        ok.tensor(-1, dtype="uint8")


def test_integer_literals_past_int32_become_int64_as_in_tensorflow(backend: str) -> None:
    assert ok.tensor(2**40).dtype is ok.int64 and ok.tensor([1, -(2**40)]).dtype is ok.int64
    assert ok.tensor(2**31 - 1).dtype is ok.int32 and ok.tensor(2**63).dtype is ok.uint64
    assert ok.ops.add(2**40, 1).numpy().item() == 2**40 + 1
    # A defaulted index attr (Range's Tidx = int32) widens when a literal needs it.
    r = ok.ops.range(2**40, 2**40 + 3, 1)
    assert r.dtype is ok.int64 and r.numpy().tolist() == [2**40, 2**40 + 1, 2**40 + 2]


# ---------------------------------------------------------------- bounds before work

HUGE: dict[str, Callable[[], Any]] = {
    "Fill dims": lambda: ok.ops.fill([2**40], 1.0),
    "Fill dims 2-D": lambda: ok.ops.fill([2**20, 2**20], 1.0),
    "Pad paddings": lambda: ok.ops.pad([1.0], [[10**12, 0]]),
    "Tile multiples": lambda: ok.ops.tile([1.0], [2**40]),
    "Range limit": lambda: ok.ops.range(0, 2**40, 1),
    "Range of floats": lambda: ok.ops.range(0.0, 1.0, 1e-13),
    "BroadcastTo shape": lambda: ok.ops.broadcast_to([1.0], [2**40]),
    "OneHot depth": lambda: ok.ops.one_hot(np.zeros(2**12, np.int64), 2**31 - 1, 1.0, 0.0),
    "UnsortedSegmentSum num_segments": lambda: ok.ops.unsorted_segment_sum([1.0], [0], 2**40),
}
_NAMED = {
    "Fill dims": ("Fill", "dims"), "Fill dims 2-D": ("Fill", "dims"), "Pad paddings": ("Pad", "paddings"),
    "Tile multiples": ("Tile", "multiples"), "Range limit": ("Range", "limit"), "Range of floats": ("Range", "delta"),
    "BroadcastTo shape": ("BroadcastTo", "shape"), "OneHot depth": ("OneHot", "depth"),
    "UnsortedSegmentSum num_segments": ("UnsortedSegmentSum", "num_segments"),
}


@pytest.mark.parametrize("case", HUGE)
def test_an_output_sized_past_memory_by_an_input_value_is_refused(backend: str, case: str) -> None:
    """Terabytes asked for through an input's value: on a host backend a
    ResourceExhaustedError naming the op and that input, before allocating;
    a device backend may refuse it itself (its largest allocation)."""
    with pytest.raises((ResourceExhaustedError, InvalidArgumentError)) as info:
        HUGE[case]()
    if engine.backend_instance(backend).host_memory_is_native:
        op, arg = _NAMED[case]
        assert isinstance(info.value, ResourceExhaustedError)
        assert info.value.op == op and f"op {op!r}" in str(info.value) and f"input {arg!r}" in str(info.value)
        assert info.value.requested_bytes > 2**40


def test_an_output_past_int64_is_an_invalid_argument_on_every_backend(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"op 'Tile'.*more than a tensor can hold.*input 'multiples'"):
        ok.ops.tile(ok.tensor([1.0]), np.array([2**62], np.int64))
    with pytest.raises(InvalidArgumentError, match=r"op 'Fill'.*more than a tensor can hold"):
        ok.ops.fill(np.array([2**40, 2**40], np.int64), 1.0)


def test_the_memory_bound_is_checked_before_the_kernel_allocates(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 100 MiB available a 128 MiB Fill is refused; the kernel never runs."""
    if not engine.backend_instance(backend).host_memory_is_native:
        pytest.skip("the host-memory bound applies to host backends; device backends bound their own allocations")
    monkeypatch.setattr(_bounds, "host_available_bytes", lambda: 100 << 20)
    with pytest.raises(ResourceExhaustedError, match=r"op 'Fill'.*\[33554432\].*100\.0 MiB.*input 'dims'"):
        ok.ops.fill([2**25], np.float32(1.0))
    assert ok.ops.fill([2**20], np.float32(1.0)).shape == (2**20,)  # 4 MiB: let through


def test_an_op_marked_output_size_from_never_reaches_its_kernel_when_too_large(
    fresh_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    @ok.shape_fns.output_size_from("n")
    def shape(c: Any) -> None:
        n = c.input_tensor(0)
        c.set_output(0, c.vector(None if n is None else int(n)))

    ok.register_op("Probe>Ones").input("n: int64").output("y: float").set_shape_fn(shape)

    @ok.register_kernel("Probe>Ones", backend="cpu", host_memory=["n"])
    def ones(n: np.ndarray) -> np.ndarray:
        calls.append(int(n))
        return np.ones(int(n), np.float32)

    monkeypatch.setattr(_bounds, "host_available_bytes", lambda: 1 << 30)
    with ok.use_backend("cpu"):
        assert ok.ops.probe.ones(np.int64(3)).numpy().tolist() == [1.0, 1.0, 1.0]
        with pytest.raises(ResourceExhaustedError, match=r"op 'Probe>Ones'.*input 'n' is 536870912") as info:
            ok.ops.probe.ones(np.int64(2**29))  # 2 GiB of float32
    assert calls == [3] and info.value.requested_bytes == 2**31


def test_output_size_from_names_inputs_the_op_has(fresh_registry: None) -> None:
    ok.register_op("Probe>Typo").input("n: int64").output("y: float").set_shape_fn(
        ok.shape_fns.output_size_from("m")(lambda c: None)
    )
    ok.register_kernel("Probe>Typo", backend="cpu")(lambda n: np.ones(1, np.float32))
    with ok.use_backend("cpu"), pytest.raises(InvalidArgumentError, match=r"no input 'm'; its inputs: n"):
        ok.ops.probe.typo(np.int64(1))


def test_a_kernel_out_of_memory_is_a_resource_exhausted_error_naming_the_op() -> None:
    """numpy's MemoryError inside a cpu kernel, under an address-space limit in a child
    (so no machine's overcommit setting matters): a ResourceExhaustedError for MatMul
    that says how much was asked for."""
    code = textwrap.dedent(
        """
        import resource
        import numpy as np
        import opkernel as ok
        from opkernel.errors import ResourceExhaustedError
        a, b = np.ones((2**15, 1), np.float32), np.ones((1, 2**15), np.float32)
        ok.ops.mat_mul(a[:2], b[:, :2])  # warm: every module the call needs is loaded
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        room = used + (1 << 30)
        resource.setrlimit(resource.RLIMIT_AS, (room, room))
        try:
            ok.ops.mat_mul(a, b)  # 4 GiB of output
        except ResourceExhaustedError as e:
            print(type(e).__name__, e.op, e.requested_bytes, isinstance(e, MemoryError))
            print(e)
        """
    )
    out = run_isolated(code, backend="cpu", what="MatMul past an address-space limit", timeout=120)
    first, message = out.stdout.splitlines()[:2]
    assert first == f"ResourceExhaustedError MatMul {2**32} True"
    assert message.startswith("op 'MatMul': out of memory on backend 'cpu' allocating 4294967296 bytes")


@pytest.mark.parametrize("call", ["ok.ops.unpack(x, num=2**40)", "ok.ops.split(0, x, num_split=2**40)"])
def test_an_output_list_too_long_for_memory_is_refused_before_it_is_made(call: str) -> None:
    """2**40 output tensors: refused naming the op and the attr before the engine builds
    its list of output dtypes (8 TiB of pointers). In a child under an address-space
    limit, so that without the check no machine's overcommit setting lets it run."""
    code = textwrap.dedent(
        f"""
        import resource
        import numpy as np
        import opkernel as ok
        from opkernel.errors import ResourceExhaustedError
        x = np.ones((2, 3), np.float32)
        ok.ops.unpack(x, num=2), ok.ops.split(0, x, num_split=2)  # warm
        with open("/proc/self/statm") as f:
            room = int(f.read().split()[0]) * resource.getpagesize() + (1 << 30)
        resource.setrlimit(resource.RLIMIT_AS, (room, room))
        try:
            {call}
        except ResourceExhaustedError as e:
            print(e.op, e.requested_bytes)
            print(e)
        """
    )
    out = run_isolated(code, backend="cpu", what=call, timeout=120)
    first, message = out.stdout.splitlines()[:2]
    op, attr = ("Unpack", "num") if "unpack" in call else ("Split", "num_split")
    assert first == f"{op} {2**40 * _bounds.TENSOR_OVERHEAD}"
    assert message.startswith(f"op {op!r}: attr {attr!r} = {2**40} asks for {2**40} output tensors")


def test_small_calls_of_value_sized_ops_still_work(backend: str) -> None:
    assert ok.ops.fill([2, 3], 1.5).numpy().tolist() == [[1.5] * 3] * 2
    assert ok.ops.pad([1.0], [[1, 2]]).numpy().tolist() == [0.0, 1.0, 0.0, 0.0]
    assert ok.ops.tile([1.0, 2.0], [2]).numpy().tolist() == [1.0, 2.0, 1.0, 2.0]
    assert ok.ops.range(0.0, 1.0, 0.25).numpy().tolist() == [0.0, 0.25, 0.5, 0.75]
    assert ok.ops.broadcast_to([1.0], [3]).numpy().tolist() == [1.0] * 3
    assert isinstance(ResourceExhaustedError("x"), (MemoryError, OpkernelError))


@pytest.mark.parametrize("value", [
    np.array([1, 2], object), np.array([1.5, "x"], object), np.array([[1], None], object), np.array(None, object),
    np.array([b"a", [1]], object),
], ids=["ints", "float-then-str", "list-and-none", "none-0d", "bytes-then-list"])
def test_object_arrays_of_non_strings_are_refused(backend: str, value: np.ndarray) -> None:
    """An object array is a string tensor's host form only when it holds str and bytes
    alone (TensorFlow refuses the rest); it became a "string" tensor of reprs."""
    with pytest.raises(OpTypeError, match=r"ok\.tensor: cannot convert a numpy object array to a tensor: its element .* an object array must hold str or bytes only"):
        ok.tensor(value)
    with pytest.raises(OpTypeError, match=r"op 'Identity', input 'input': cannot convert a numpy object array"):
        ok.ops.identity(value)


def test_object_arrays_of_strings_are_string_tensors() -> None:
    t = ok.tensor(np.array(["a", b"b"], object), backend="cpu")
    assert t.dtype == ok.string and t.numpy().tolist() == ["a", b"b"]
