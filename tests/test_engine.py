"""The engine: input conversion, dispatch across backends, backend selection, the
Tensor API, shape inference without running, attr errors and the signature cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from twin import Boxed

import opkernel as ok
from opkernel import engine
from opkernel._infer import infer_shapes as infer_with_values
from opkernel.errors import (
    BackendNotFoundError,
    BackendUnavailableError,
    InvalidArgumentError,
    OpSpecError,
    OpTypeError,
    ShapeError,
)
from opkernel.op_registry import OpDef
from opkernel.testing import isolated_registries

S = ok.TensorShape


@pytest.fixture
def default_backend() -> Iterator[str]:
    """The default backend's name; whatever a test sets as default is undone afterwards."""
    name = ok.get_backend()
    yield name
    ok.set_backend(name)


# -------------------------------------------------------------- conversion


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_python_literals_adopt_the_other_inputs_dtype(backend: str, dtype: str) -> None:
    a = np.arange(4, dtype=dtype)
    x = ok.tensor(a)
    for out, want in (
        (x + 1, a + 1), (1 + x, 1 + a), (x * 3, a * 3), (ok.ops.sub(x, [1, 2, 3, 4]), a - [1, 2, 3, 4]),
        (ok.ops.mul(2, x), 2 * a),
    ):
        assert out.dtype.name == dtype and out.backend == backend
        np.testing.assert_array_equal(out.numpy(), want.astype(dtype))
    if dtype.startswith("float"):
        for out, want in ((x + 1.5, a + 1.5), (0.5 * x, 0.5 * a), (x - [0.25] * 4, a - 0.25)):
            assert out.dtype.name == dtype
            np.testing.assert_allclose(out.numpy(), want.astype(dtype))


def test_literal_only_calls_use_the_default_or_the_natural_dtype(backend: str, fresh_registry: None) -> None:
    out = ok.ops.add(1, 2)
    assert out.dtype is ok.int32 and out.numpy() == 3
    out = ok.ops.add(1.5, 2)  # the first literal decides, as in TensorFlow
    assert out.dtype is ok.float32 and out.numpy() == 3.5
    out = ok.ops.mat_mul([[1.0, 2.0]], [[3.0], [4.0]])
    assert out.dtype is ok.float32
    np.testing.assert_array_equal(out.numpy(), [[11.0]])
    assert ok.ops.add(np.float64(1), 2).dtype is ok.float64  # a numpy scalar keeps its dtype

    ok.register_op("Probe>Twice").input("x: T").output("y: T").attr("T: {float, double} = DT_DOUBLE")
    ok.register_kernel("Probe>Twice", backend="*")(lambda x, T: x + x)
    out = ok.ops.probe.twice([1, 2])
    assert out.dtype is ok.float64
    np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
    assert ok.ops.probe.twice(np.ones(1, np.float32)).dtype is ok.float32


def test_generic_kernels_receive_the_attrs_they_name(backend: str, fresh_registry: None) -> None:
    ok.register_op("Probe>Sum").input("xs: N * T").output("y: T").attr("N: int >= 1").attr("T: {float, double}").attr(
        "scale: float = 1.0"
    ).set_shape_fn(ok.shape_fns.merge_all_inputs)
    ok.register_kernel("Probe>Sum", backend="*")(lambda xs: ok.ops.add_n(xs))  # names no attr
    xs = [np.ones(2, np.float32), np.full(2, 2.0, np.float32)]
    np.testing.assert_array_equal(ok.ops.probe.sum(xs).numpy(), [3.0, 3.0])
    ok.register_op("Probe>Scaled").input("xs: N * T").output("y: T").attr("N: int >= 1").attr("T: {float, double}").attr(
        "scale: float = 1.0"
    ).set_shape_fn(ok.shape_fns.merge_all_inputs)
    seen: dict[str, object] = {}

    @ok.register_kernel("Probe>Scaled", backend="*")
    def scaled(xs: list[ok.Tensor], **attrs: object) -> ok.Tensor:  # **kwargs: every attr
        seen.update(attrs)
        return ok.ops.mul(ok.ops.add_n(xs), attrs["scale"])

    np.testing.assert_array_equal(ok.ops.probe.scaled(xs, scale=2.0).numpy(), [6.0, 6.0])
    assert seen == {"N": 2, "T": ok.float32, "scale": 2.0}


def test_float_literal_to_an_integer_input_is_a_type_error(backend: str) -> None:
    x = ok.tensor([1, 2], dtype="int32")
    with pytest.raises(TypeError, match=r"op 'Add', input 'y': cannot convert 1\.5 \(floating point\) to int32") as info:
        x + 1.5
    assert isinstance(info.value, OpTypeError) and info.value.op == "Add"
    with pytest.raises(OpTypeError, match="cannot convert"):
        ok.ops.mul([1.0, 2.0], x)
    with pytest.raises(OpTypeError, match="op 'Add': input 'y' has T=float64 but input 'x' has T=int32"):
        ok.ops.add(x, np.ones(2))
    with pytest.raises(OpTypeError, match="op 'Add': attr 'T' was given as float64 but the inputs have T=int32"):
        ok.execute("Add", x, x, T=ok.float64)
    with pytest.raises(InvalidArgumentError, match="op 'AddN': attr 'N' was given as 3 but the inputs have N=2"):
        ok.execute("AddN", [x, x], N=3)
    np.testing.assert_array_equal(ok.execute("AddN", [x, x], N=2, T="int32").numpy(), [2, 4])
    with pytest.raises(OpTypeError, match="op 'Add': input 'y' has T=float32 but input 'x' has T=int32"):
        ok.ops.add(x, ok.tensor([1.0, 2.0]))
    with pytest.raises(OpTypeError, match="op 'Add', input 'y': cannot convert 2.5"):
        ok.ops.add(2, 2.5)


def test_numpy_inputs_reach_a_cpu_kernel_without_a_copy(fresh_registry: None) -> None:
    caller = np.arange(12, dtype=np.float32).reshape(3, 4)
    shared: list[bool] = []
    ok.register_op("Probe>Peek").input("x: T").output("y: T").attr("T: type")

    @ok.register_kernel("Probe>Peek", backend="cpu")
    def peek(x: np.ndarray, T: ok.DType) -> np.ndarray:
        shared.append(np.shares_memory(x, caller))
        return x.copy()

    with ok.use_backend("cpu"):
        ok.ops.probe.peek(caller)
        ok.ops.probe.peek(caller[:, ::2])  # a strided view too
        t = ok.tensor(caller)  # a tensor is a value: ok.tensor copies the caller's array
        assert not np.shares_memory(t.numpy(), caller)
        ok.ops.probe.peek(t)
        ok.ops.probe.peek(t)  # the cached path as well
    assert shared == [True, True, False, False]


def test_inputs_are_never_mutated(backend: str) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3)).astype(np.float32)
    b = rng.standard_normal((3, 3)).astype(np.float32) + 4
    i = np.arange(9, dtype=np.int32).reshape(3, 3)
    saved = [a.copy(), b.copy(), i.copy()]
    ta, tb = ok.tensor(a.copy()), ok.tensor(b.copy())
    calls = [
        lambda x, y: ok.ops.add(x, y), lambda x, y: ok.ops.sub(x, y), lambda x, y: ok.ops.mul(x, y),
        lambda x, y: ok.ops.real_div(x, y), lambda x, y: ok.ops.neg(x),
        lambda x, y: ok.ops.mat_mul(x, y, transpose_a=True), lambda x, y: ok.ops.add_n([x, y, x]),
        lambda x, y: ok.ops.add_n([x]), lambda x, y: ok.ops.reshape(x, [9]),
        lambda x, y: ok.ops.pad(x, [[1, 1], [0, 2]]), lambda x, y: ok.ops.cast(x, DstT=ok.float64),
        lambda x, y: ok.ops.identity(x), lambda x, y: ok.ops.zeros_like(x), lambda x, y: ok.ops.ones_like(x),
    ]
    for call in calls:
        call(a, b)
        call(ta, tb)
    ok.ops.add_n([i, i])
    ok.ops.real_div(i, i + 1)
    for got, want in zip([a, b, i], saved):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ta.numpy(), saved[0])
    np.testing.assert_array_equal(tb.numpy(), saved[1])


# ------------------------------------------------------------ two backends


def test_a_tensor_on_another_backend_is_an_error_naming_both(twin: str) -> None:
    on_twin = ok.tensor([1.0, 2.0], backend="twin")
    assert on_twin.backend == "twin" and isinstance(on_twin.value, Boxed)
    with ok.use_backend("cpu"):
        on_cpu = ok.tensor([10.0, 20.0])
        ok.ops.add(on_cpu, on_cpu)  # a cached signature for float32 on cpu must not serve the twin tensor
        with pytest.raises(InvalidArgumentError) as info:
            ok.ops.add(on_cpu, on_twin)
        assert str(info.value) == (
            "op 'Add', input 'y': tensor lives on backend 'twin' but the op runs on 'cpu'. "
            "Move it with x.to('cpu'), or set ok.config.transfer_policy = 'copy'."
        )
        with pytest.raises(InvalidArgumentError, match="input 'x': tensor lives on backend 'twin'"):
            ok.ops.add(on_twin, on_twin)
        out = ok.ops.add(on_cpu, on_twin.to("cpu"))
        assert out.backend == "cpu" and isinstance(out.value, np.ndarray)
        np.testing.assert_array_equal(out.numpy(), [11.0, 22.0])
    with ok.use_backend("twin"):
        out = on_twin + on_twin
        assert out.backend == "twin" and isinstance(out.value, Boxed)
        np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
        with pytest.raises(InvalidArgumentError, match=r"lives on backend 'cpu' but the op runs on 'twin'\. Move it with x\.to\('twin'\)"):
            ok.ops.mul(on_twin, on_cpu)
    assert on_twin.to("twin") is on_twin


def test_copy_transfer_policy_moves_and_counts(twin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ok.config, "transfer_policy", "copy")
    on_twin = ok.tensor([1.0, 2.0], backend="twin")
    before = ok.config.transfers
    with ok.use_backend("cpu"):
        out = ok.ops.add(on_twin, on_twin)
        assert out.backend == "cpu"
        np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
        out = ok.ops.mul(on_twin, [3.0, 3.0])
        np.testing.assert_array_equal(out.numpy(), [3.0, 6.0])
    assert ok.config.transfers - before == 3
    assert on_twin.backend == "twin"
    np.testing.assert_array_equal(on_twin.numpy(), [1.0, 2.0])


def test_host_memory_inputs_reach_a_kernel_as_numpy(twin: str) -> None:
    ok.register_op("Probe>Scale").input("x: float").input("factor: float").output("y: float")
    seen: dict[str, type] = {}

    @ok.register_kernel("Probe>Scale", backend="twin", host_memory=["factor"])
    def scale(x: Boxed, factor: np.ndarray) -> Boxed:
        seen.update(x=type(x), factor=type(factor))
        return Boxed(x.array * factor)

    with ok.use_backend("twin"):
        out = ok.ops.probe.scale([1.0, 2.0], 3.0)
        assert out.backend == "twin"
        np.testing.assert_array_equal(out.numpy(), [3.0, 6.0])
    assert seen == {"x": Boxed, "factor": np.ndarray}

    ok.register_op("Probe>Misnamed").input("x: float").output("y: float")
    with pytest.raises(OpSpecError, match="host_memory names 'factor', which is not an input"):
        ok.register_kernel("Probe>Misnamed", backend="twin", host_memory="factor")(lambda x: x)  # refused at once
    assert ok.kernels.kernels_for("Probe>Misnamed", "twin") == []


# --------------------------------------------------------- choosing backends


def test_use_backend_nests_and_restores(twin: str) -> None:
    outer = ok.get_backend()
    with ok.use_backend("twin") as be:
        assert isinstance(be, ok.Backend) and be.name == "twin"
        assert ok.get_backend() == "twin" and ok.tensor([1.0]).backend == "twin"
        with ok.use_backend("cpu"):
            assert ok.get_backend() == "cpu" and (ok.tensor([1.0]) + 1).backend == "cpu"
        assert ok.get_backend() == "twin"
    assert ok.get_backend() == outer
    with pytest.raises(RuntimeError, match="boom"), ok.use_backend("twin"):
        raise RuntimeError("boom")
    assert ok.get_backend() == outer


def test_set_backend_changes_the_default_that_use_backend_overrides(twin: str, default_backend: str) -> None:
    ok.set_backend("twin")
    assert ok.get_backend() == "twin" and ok.tensor([1.0]).backend == "twin"
    assert (ok.tensor([1.0]) + 1).backend == "twin"
    with ok.use_backend("cpu"):
        assert ok.get_backend() == "cpu"
    assert ok.get_backend() == "twin"
    with pytest.raises(BackendNotFoundError):
        ok.set_backend("nowhere")
    assert ok.get_backend() == "twin"  # a failed set_backend changes nothing
    ok.set_backend("cpu")
    assert ok.get_backend() == "cpu"


def test_unknown_backend_suggests_and_lists_the_installed_ones() -> None:
    installed = [name for name, _, _ in engine.backend_status()]
    with pytest.raises(BackendNotFoundError) as info, ok.use_backend("cpuu"):
        pass
    assert str(info.value) == (
        f"unknown backend 'cpuu'; installed backends: {installed}. Did you mean 'cpu'? "
        "Backends come from plugins (pip install opkernel-cpuu)."
    )
    assert isinstance(info.value, LookupError) and info.value.backend == "cpuu"
    with pytest.raises(BackendNotFoundError) as info:
        ok.set_backend("quantum")
    assert "Did you mean" not in str(info.value) and f"installed backends: {installed}" in str(info.value)
    with pytest.raises(BackendNotFoundError, match="unknown backend 'cpuu'"):
        ok.tensor([1.0], backend="cpuu")


class NoDevice(ok.Backend):
    name = "nodevice"
    priority = -20

    @classmethod
    def availability(cls) -> str | None:
        return "no frobnicator found (driver 1.2 or newer is needed)"


class BrokenDriver(ok.Backend):
    name = "brokendriver"
    priority = -20

    def __init__(self) -> None:
        raise RuntimeError("device lost")


class UnusablePlugin:
    @ok.hookimpl
    def opkernel_register_backends(self) -> list[type[ok.Backend]]:
        return [NoDevice, BrokenDriver]


def test_an_unavailable_backend_says_why(fresh_registry: None) -> None:
    ok.register_plugin(UnusablePlugin(), name="unusable")
    reason = "no frobnicator found (driver 1.2 or newer is needed)"
    assert ("nodevice", -20, reason) in engine.backend_status()
    assert "nodevice" not in ok.available_backends()
    with pytest.raises(BackendUnavailableError) as info, ok.use_backend("nodevice"):
        pass
    assert str(info.value).startswith(f"backend 'nodevice' is installed but not available: {reason}. Available backends: [")
    assert info.value.backend == "nodevice"

    for _ in range(2):  # the failure is remembered, and stays the reason
        with pytest.raises(BackendUnavailableError, match=r"'brokendriver' is installed but not available: "
                           r"initialisation failed: RuntimeError: device lost"):
            ok.set_backend("brokendriver")
    assert "brokendriver" not in ok.available_backends()


class FixedDriver(ok.Backend):
    """What a fixed release of BrokenDriver's plugin provides, under the same name."""

    name = "brokendriver"
    priority = -20

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_numpy(self, value: np.ndarray) -> np.ndarray:
        return value


class FixedPlugin:
    @ok.hookimpl
    def opkernel_register_backends(self) -> list[type[ok.Backend]]:
        return [FixedDriver]


def test_a_failed_backend_is_forgotten_with_its_plugin(fresh_registry: None) -> None:
    with isolated_registries():
        ok.register_plugin(UnusablePlugin(), name="unusable")
        with pytest.raises(BackendUnavailableError, match="device lost"):
            ok.set_backend("brokendriver")
    with pytest.raises(BackendNotFoundError, match="unknown backend 'brokendriver'"):
        ok.set_backend("brokendriver")
    ok.register_plugin(FixedPlugin(), name="fixed")
    with ok.use_backend("brokendriver") as be:
        assert isinstance(be, FixedDriver)


def test_a_removed_backend_is_no_longer_usable(fresh_registry: None) -> None:
    from twin import TwinPlugin

    with isolated_registries():
        ok.register_plugin(TwinPlugin(), name="twin-plugin")
        with ok.use_backend("twin"):
            assert ok.get_backend() == "twin"
    assert "twin" not in ok.available_backends()
    with pytest.raises(BackendNotFoundError, match="unknown backend 'twin'"), ok.use_backend("twin"):
        pass


TESTS = Path(__file__).parent


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPKERNEL_")}
    return subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, cwd=TESTS, capture_output=True, text=True, timeout=60
    )


def test_opkernel_backend_environment_variable_picks_the_default() -> None:
    code = (
        "import os\n"
        "import opkernel as ok\n"
        "add = ok.ops.add  # the first thing a fresh process touches\n"
        "from twin import TwinPlugin\n"
        "ok.register_plugin(TwinPlugin(), name='twin-plugin')\n"
        "print(ok.get_backend(), add([1.0], 1.0).backend, ok.available_backends()[0])\n"
        "os.environ['OPKERNEL_BACKEND'] = 'nosuch'\n"
        "ok.engine._reset_backends_for_tests()  # as if the process started with nosuch\n"
        "try:\n"
        "    ok.get_backend()\n"
        "except ok.errors.BackendNotFoundError as e:\n"
        "    print(e)\n"
    )
    done = _python(code, OPKERNEL_BACKEND="twin")
    assert done.returncode == 0, done.stderr
    chosen, unknown = done.stdout.splitlines()
    assert chosen.split()[:2] == ["twin", "twin"]
    assert chosen.split()[2] != "twin"  # chosen over the backend of highest priority
    assert unknown.startswith("unknown backend 'nosuch'; installed backends: [")


# -------------------------------------------------------------- Tensor API


def test_tensor_attributes_and_conversions(backend: str) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ok.tensor(a)
    assert (t.shape, t.dtype, t.backend, t.ndim, t.size, len(t)) == ((2, 3), ok.float32, backend, 2, 6, 2)
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(np.asarray(t), a)
    assert np.array(t, dtype=np.float64).dtype == np.float64
    copy = np.array(t)
    copy[0, 0] = 99
    assert t.numpy()[0, 0] == 0  # np.array(t) is a copy
    assert repr(t) == (
        "ok.Tensor([[0., 1., 2.],\n           [3., 4., 5.]], dtype=float32, backend=" + repr(backend) + ")"
    )
    assert repr(ok.Variable([1, 2])) == f"ok.Variable([1, 2], dtype=int32, backend={backend!r})"
    s = ok.tensor(2.5)
    assert (float(s), int(s), bool(s), s.item(), s.shape) == (2.5, 2, True, 2.5, ())
    with pytest.raises(TypeError, match="len"):
        len(s)

    assert ok.tensor(t) is t
    assert ok.tensor(a, dtype="float64").dtype is ok.float64
    assert ok.tensor([True]).dtype is ok.bool_
    if ok.engine.backend_instance(backend).supports_dtype(ok.string):
        assert ok.tensor(["x"]).dtype is ok.string
    else:  # cuda holds no strings (docs/cuda.md)
        with pytest.raises(OpTypeError, match="cannot hold"):
            ok.tensor(["x"])
    with pytest.raises(OpTypeError, match="tensor has dtype float32, asked for float64; use ok.ops.cast"):
        ok.tensor(t, dtype="float64")
    with pytest.raises(OpTypeError, match="ok.tensor: cannot convert"):
        ok.tensor([1.5], dtype="int32")


def test_tensor_operators_with_tensors_arrays_and_scalars(backend: str) -> None:
    a = np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)
    b = np.array([[2.0, 5.0], [-1.0, 0.5]], np.float32)
    x, y = ok.tensor(a), ok.tensor(b)
    cases = [
        (x + y, a + b), (x + b, a + b), (a + y, a + b), (x + 2, a + 2), (2 + x, 2 + a),
        (x - y, a - b), (b - x, b - a), (x - 1.5, a - 1.5), (1.5 - x, 1.5 - a),
        (x * y, a * b), (a * y, a * b), (3 * x, 3 * a), (x * 0.5, a * 0.5),
        (x / y, a / b), (a / y, a / b), (x / 2, a / 2), (2 / y, 2 / b),
        (x @ y, a @ b), (a @ y, a @ b), (x @ b, a @ b), (-x, -a), (-(x @ y) + 1, -(a @ b) + 1),
    ]
    for got, want in cases:
        assert isinstance(got, ok.Tensor) and got.dtype is ok.float32 and got.backend == backend
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)

    i = ok.tensor([7, -7, 6], dtype="int32")
    np.testing.assert_array_equal((i / 2).numpy(), [3, -3, 3])  # integer division truncates toward zero
    assert (i / 2).dtype is ok.int32 and (i * 2 - 1).dtype is ok.int32


# ---------------------------------------------------------------- shapes


def test_infer_shapes_with_partial_shapes() -> None:
    assert ok.infer_shapes("MatMul", [[2, None], [None, 7]]) == [S([2, 7])]
    assert ok.infer_shapes("MatMul", [None, [4, 5]]) == [S([None, 5])]
    assert ok.infer_shapes("MatMul", [[None, 3], [5, None]], {"transpose_a": True, "transpose_b": True}) == [S([3, 5])]
    with pytest.raises(ShapeError, match="Dimensions must be equal, but are 3 and 4"):
        ok.infer_shapes("MatMul", [[2, 3], [4, 5]])
    with pytest.raises(ShapeError, match="Shape must be rank 2 but is rank 3 for input 'a'"):
        ok.infer_shapes("MatMul", [[2, 3, 4], [4, 5]])

    assert ok.infer_shapes("AddN", [[[2, None], [None, 3], None]]) == [S([2, 3])]
    with pytest.raises(ShapeError, match="'AddN'.*must be equal, but are 2 and 3"):
        ok.infer_shapes("AddN", [[[2], [3]]])

    assert ok.infer_shapes("Reshape", [[2, 3], [2]]) == [S([None, None])]
    assert ok.infer_shapes("Reshape", [[2, 3], [None]]) == [S(None)]
    reshape = ok.op_def("Reshape")
    assert infer_with_values(reshape, [[None, 6], [2]], {}, [None, [-1, 3]]) == [S([None, 3])]
    assert infer_with_values(reshape, [[2, 6], [2]], {}, [None, [-1, 3]]) == [S([4, 3])]
    with pytest.raises(ShapeError, match="cannot reshape a tensor of 5 elements"):
        infer_with_values(reshape, [[5], [1]], {}, [None, [3]])

    assert ok.infer_shapes("Pad", [[2, None], [2, 2]]) == [S([None, None])]
    assert ok.infer_shapes("Pad", [None, [3, 2]]) == [S([None, None, None])]
    assert ok.infer_shapes("Pad", [None, None]) == [S(None)]
    assert infer_with_values(ok.op_def("Pad"), [[2, None], [2, 2]], {}, [None, [[1, 1], [0, 2]]]) == [S([4, None])]
    with pytest.raises(ShapeError, match="'Pad'"):
        ok.infer_shapes("Pad", [[2, 3], [3, 2]])


def test_infer_shapes_agrees_with_running(backend: str) -> None:
    a, b = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    [shape] = ok.infer_shapes("MatMul", [a.shape, b.shape], {"transpose_b": True})
    assert ok.ops.mat_mul(a, b, transpose_b=True).shape == tuple(shape.as_list())


@pytest.mark.parametrize("name", ["MatMul", "AddN", "Pad", "Reshape", "StringToNumber", "Cast"])
def test_op_def_round_trips_through_json(name: str) -> None:
    op_def = ok.op_def(name)
    again = OpDef.from_dict(json.loads(json.dumps(op_def.to_dict())))
    assert again == op_def and again.to_dict() == op_def.to_dict()
    assert again.inferred_attrs == op_def.inferred_attrs


def test_op_def_with_every_kind_of_default_round_trips(fresh_registry: None) -> None:
    (
        ok.register_op("Probe>Defaults").input("x: T").output("y: T").attr("T: {float, int32} = DT_INT32")
        .attr("s: string = 'foo'").attr("f: float = -inf").attr("sh: shape = { dim { size: -1 } dim { size: 2 } }")
        .attr("te: tensor = { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1.5 float_val: nan }")
        .attr("l: list(type) = [DT_INT32, DT_BOOL]")
        .doc("Probe defaults.\n\nx: the input.")
    )
    op_def = ok.op_def("Probe>Defaults")
    again = OpDef.from_dict(json.loads(json.dumps(op_def.to_dict())))
    assert again == op_def
    assert again.attr("sh").default == S([None, 2]) and again.attr("l").default == (ok.int32, ok.bool_)
    np.testing.assert_array_equal(again.attr("te").default, [1.5, np.nan])
    assert again.inputs[0].description == "the input."


# ----------------------------------------------------------------- attrs


def test_attr_errors_name_the_op_and_the_attr(backend: str) -> None:
    x = ok.tensor(np.eye(2, dtype=np.float32))
    with pytest.raises(InvalidArgumentError, match=r"^op 'Cast': missing required attr 'DstT' of type type$"):
        ok.ops.cast(x)
    with pytest.raises(InvalidArgumentError, match="missing required attr 'DstT'"):
        ok.execute("Cast", x)
    with pytest.raises(InvalidArgumentError, match=r"^op 'MatMul': attr 'transpose_a' must be a bool, got 'yes'$"):
        ok.ops.mat_mul(x, x, transpose_a="yes")
    with pytest.raises(InvalidArgumentError, match=r"attr 'out_type' must be one of \[int32, int64\], got float32"):
        ok.ops.shape(x, out_type=ok.float32)
    with pytest.raises(InvalidArgumentError, match="op 'MatMul' has no attr 'bogus'"):
        ok.execute("MatMul", x, x, bogus=True)
    with pytest.raises(TypeError):
        ok.ops.mat_mul(x, x, bogus=True)  # the generated wrapper has real parameters

    ok.ops.mat_mul(x, x, transpose_a=True)
    for wrong in (1, 1.0, np.int64(1)):  # equal to True, but not a bool: cached calls still check
        with pytest.raises(InvalidArgumentError, match="attr 'transpose_a' must be a bool"):
            ok.ops.mat_mul(x, x, transpose_a=wrong)
    assert ok.ops.mat_mul(x, x, transpose_a=np.bool_(True)).dtype is ok.float32


# ------------------------------------------------------- signature cache


def test_a_class_kernel_is_constructed_once_per_signature(backend: str, fresh_registry: None) -> None:
    ok.register_op("Probe>Scale").input("x: T").output("y: T").attr("T: {float, int32}").attr("factor: int = 2")
    built: list[tuple[str, int]] = []

    class Scale(ok.OpKernel):
        def __init__(self, ctx: ok.OpKernelConstruction) -> None:
            self.factor = ctx.get_attr("factor")
            built.append((ctx.get_attr("T").name, self.factor))

        def compute(self, ctx: ok.OpKernelContext) -> None:
            x = ctx.backend.to_numpy(ctx.input(0))
            ctx.set_output(0, ctx.backend.from_numpy(x * np.asarray(self.factor, x.dtype)))

    ok.register_kernel("Probe>Scale", backend=backend)(Scale)
    xf = ok.tensor([1.0, 2.0])
    xi = ok.tensor([1, 2], dtype="int32")

    for _ in range(5):
        np.testing.assert_array_equal(ok.ops.probe.scale(xf).numpy(), [2.0, 4.0])
    assert built == [("float32", 2)]
    for _ in range(3):
        ok.ops.probe.scale(xf, factor=3)
        ok.ops.probe.scale(np.array([1.0, 2.0], np.float32), factor=3)
        ok.execute("Probe>Scale", xf, factor=3)
        np.testing.assert_array_equal(ok.ops.probe.scale(xi, 3).numpy(), [3, 6])
    assert built == [("float32", 2), ("float32", 3), ("int32", 3)]
    ok.ops.probe.scale(xf, factor=2)
    assert len(built) == 3

    class Faster(Scale):
        pass

    ok.register_kernel("Probe>Scale", backend=backend, priority=1)(Faster)  # a new kernel invalidates the cache
    np.testing.assert_array_equal(ok.ops.probe.scale(xf).numpy(), [2.0, 4.0])
    assert built[3:] == [("float32", 2)]


def test_a_repeated_call_skips_binding(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    x = ok.tensor(np.ones((2, 2), np.float32))
    calls: list[int] = []
    real_bind = engine.bind

    def counting_bind(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real_bind(*args, **kwargs)

    monkeypatch.setattr(engine, "bind", counting_bind)
    for _ in range(5):
        np.testing.assert_array_equal(ok.ops.mat_mul(x, x, transpose_b=True).numpy(), [[2.0, 2.0], [2.0, 2.0]])
    assert len(calls) <= 1


def test_infer_shapes_uses_known_input_values():
    import numpy as np

    shape = ok.infer_shapes("Reshape", [[2, 3], [2]], input_values=[None, np.array([3, -1])])
    assert shape == [ok.TensorShape([3, 2])]
    unknown = ok.infer_shapes("Reshape", [[2, 3], [2]])
    assert unknown[0].rank == 2 and unknown[0].as_list() == [None, None]


def test_ref_inputs_on_the_fast_path_still_need_a_variable(backend):
    import numpy as np

    v = ok.Variable(np.zeros(3, np.float32))
    delta = ok.tensor(np.ones(3, np.float32))
    for _ in range(3):  # the second and third calls take the cached fast path
        ok.ops.assign_add(v, delta)
    assert v.numpy().tolist() == [3.0, 3.0, 3.0]
    plain = ok.tensor(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="'AssignAdd'.*Ref.*Variable"):
        ok.ops.assign_add(plain, delta)
    assert plain.numpy().tolist() == [0.0, 0.0, 0.0]


def test_calls_by_name_never_poison_the_wrappers_fast_table(backend):
    import numpy as np

    a = ok.tensor(np.ones((3, 2), np.float32))
    b = ok.tensor(np.ones((3, 2), np.float32))
    for _ in range(2):  # kwargs in another order than the wrapper's, and attrs left out
        assert ok.execute("MatMul", a, b, transpose_b=True, transpose_a=False).shape == (3, 3)
        assert ok.execute("MatMul", a, b, transpose_a=True).shape == (2, 2)
    for _ in range(2):
        assert ok.ops.mat_mul(a, b, transpose_a=True).shape == (2, 2)
        assert ok.ops.mat_mul(a, b, transpose_b=True).shape == (3, 3)


def test_list_attrs_use_the_fast_path_and_keep_their_element_checks(backend):
    import numpy as np

    x = ok.tensor(np.ones((1, 4, 4, 1), np.float32))
    for strides in ([1, 2, 2, 1], (1, 2, 2, 1), [1, 2, 2, 1]):
        assert ok.ops.max_pool(x, ksize=[1, 2, 2, 1], strides=strides, padding="VALID").shape == (1, 2, 2, 1)
    with pytest.raises(ok.errors.InvalidArgumentError):
        ok.ops.max_pool(x, ksize=[1, 2, 2, 1], strides=(True, 2, 2, 1), padding="VALID")


def test_generated_wrappers_do_not_shadow_parameters(backend, fresh_registry):
    import numpy as np

    ok.register_op("Test>Shadow").input("call: float").output("y: float").attr("be: float = 2.0")
    ok.register_kernel("Test>Shadow", backend="*")(lambda call, be: call * ok.tensor(np.float32(be)))
    x = ok.tensor(np.ones(2, np.float32))
    for _ in range(2):
        assert ok.ops.test.shadow(x, be=3.0).numpy().tolist() == [3.0, 3.0]


def test_calls_with_literals_skip_binding_once_seen(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    x = ok.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    ok.ops.mean(x, [1])
    ok.ops.reshape(x, np.array([3, 2], np.int32))
    calls: list[int] = []
    real_bind = engine.bind
    monkeypatch.setattr(engine, "bind", lambda *a, **k: calls.append(1) or real_bind(*a, **k))
    for _ in range(3):
        np.testing.assert_allclose(ok.ops.mean(x, [1]).numpy(), [1.0, 4.0])
        assert ok.ops.reshape(x, np.array([3, 2], np.int32)).shape == (3, 2)
        np.testing.assert_array_equal(ok.ops.concat_v2([x, x], 0).numpy(), np.concatenate([x.numpy()] * 2))
    assert len(calls) == 1  # the first ConcatV2 call only


def test_literal_calls_key_on_class_value_and_sign(backend: str) -> None:
    x = ok.tensor(np.array([1.0, -2.0], np.float32))
    i = ok.tensor(np.array([3, 4], np.int32))
    for _ in range(2):
        assert np.signbit(ok.ops.mul(x, 0.0).numpy()).tolist() == [False, True]
        assert np.signbit(ok.ops.mul(x, -0.0).numpy()).tolist() == [True, False]
        assert ok.ops.mul(x, 2.0).numpy().tolist() == [2.0, -4.0]
        assert ok.ops.mul(x, 3.0).numpy().tolist() == [3.0, -6.0]
        assert ok.ops.add(i, 1).numpy().tolist() == [4, 5]
        assert ok.ops.add(i, True).numpy().tolist() == [4, 5]
        with pytest.raises(OpTypeError, match="floating point"):
            ok.ops.add(i, 1.0)  # never cached: it fails every time


def test_literal_calls_see_changed_lists_and_arrays(backend: str) -> None:
    x = ok.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    shape = [3, 2]
    assert ok.ops.reshape(x, shape).shape == (3, 2)
    shape[:] = [6, 1]
    assert ok.ops.reshape(x, shape).shape == (6, 1)
    arr = np.array([2, 3], np.int32)
    assert ok.ops.reshape(x, arr).shape == (2, 3)
    arr[:] = [1, 6]
    assert ok.ops.reshape(x, arr).shape == (1, 6)
    y = np.ones(3, np.float32)
    assert ok.ops.add(x, y).numpy()[0].tolist() == [1.0, 2.0, 3.0]
    y[:] = 10
    assert ok.ops.add(x, y).numpy()[0].tolist() == [10.0, 11.0, 12.0]


def test_the_literal_table_stays_bounded(backend: str) -> None:
    x = ok.tensor(np.zeros(2, np.float32))
    for k in range(engine._LITERAL_ENTRIES + 10):
        assert ok.ops.add(x, float(k)).numpy().tolist() == [k, k]
    assert 0 < len(engine.op_handle("Add").literal) <= engine._LITERAL_ENTRIES


def test_literal_calls_are_keyed_per_backend(twin: str) -> None:
    with ok.use_backend("cpu"):
        a = ok.ops.add(ok.tensor(np.ones(2, np.float32)), 1.0)
    with ok.use_backend(twin):
        b = ok.ops.add(ok.tensor(np.ones(2, np.float32)), 1.0)
    assert (a.backend, b.backend) == ("cpu", twin)
    assert a.numpy().tolist() == b.numpy().tolist() == [2.0, 2.0]


def test_a_result_written_through_numpy_never_changes_a_later_literal_call(backend: str) -> None:
    a = ok.ops.identity([1.0, 2.0])
    b = ok.ops.identity([1.0, 2.0])
    try:
        b.numpy()[0] = 100.0
    except ValueError as e:  # read-only on host backends: a tensor is a value
        assert "read-only" in str(e)
    assert a.numpy().tolist() == [1.0, 2.0]
    assert ok.ops.identity([1.0, 2.0]).numpy().tolist() == [1.0, 2.0]


def test_fast_calls_pass_attrs_positionally_by_keyword_and_by_dict(fresh_registry) -> None:
    """A cached call hands attrs to the kernel the way its signature takes them, including
    attrs named like Python keywords (which go through a dict) and ops without inputs."""
    seen: list[tuple[str, Any]] = []
    ok.register_op("Test>Pos").input("a: float").input("b: float").output("y: float").attr("k: float = 1.0").attr("n: int = 2")
    ok.register_kernel("Test>Pos", backend="cpu")(lambda a, b, k, n: seen.append(("pos", (k, n))) or a * k + b * n)
    ok.register_op("Test>KwOnly").input("a: float").input("b: float").input("c: float").output("y: float").attr("k: float = 1.0")
    ok.register_kernel("Test>KwOnly", backend="cpu")(lambda a, b, c, *, k: seen.append(("kwonly", k)) or (a + b + c) * k)
    ok.register_op("Test>Keyword").input("a: float").output("y: float").attr("lambda: float = 1.0").attr("s: string = 'x'")
    ok.register_kernel("Test>Keyword", backend="cpu")(lambda a, **attrs: seen.append(("dict", attrs)) or a * attrs["lambda"])
    ok.register_op("Test>Nullary").output("y: float").attr("v: float = 7.0")
    ok.register_kernel("Test>Nullary", backend="cpu")(lambda v: seen.append(("none", v)) or np.float32(v))
    x = ok.tensor(np.ones(2, np.float32), backend="cpu")
    with ok.use_backend("cpu"):
        for _ in range(3):  # the first call files the signature, the others take the compiled call
            assert ok.ops.test.pos(x, x, k=3.0, n=4).numpy().tolist() == [7.0, 7.0]
            assert ok.ops.test.kw_only(x, x, x, k=2.0).numpy().tolist() == [6.0, 6.0]
            assert ok.ops.test.keyword(x, lambda_=5.0).numpy().tolist() == [5.0, 5.0]
            assert ok.ops.test.nullary(v=2.0).numpy() == np.float32(2.0)
    assert seen[-4:] == [("pos", (3.0, 4)), ("kwonly", 2.0), ("dict", {"lambda": 5.0, "s": "x"}), ("none", 2.0)]
    assert len(seen) == 12
    for op in (ok.ops.test.pos, ok.ops.test.kw_only, ok.ops.test.keyword, ok.ops.test.nullary):
        (call,) = op.__globals__["_fast"].values()  # each op's signature is filed with its compiled call
        assert call.__code__.co_filename.startswith("<opkernel fast call")


def test_wrappers_named_like_builtins_leave_later_lookups_working() -> None:
    # Generated wrappers become globals of opkernel.ops: ``any``, ``all``, ``sum`` and
    # friends then shadow the builtins there; lookups of other ops and namespaces made
    # afterwards must still work.  A fresh interpreter: no wrapper generated yet.
    code = (
        "import numpy as np, opkernel as ok\n"
        "b = np.array([[True, False]])\n"
        "assert ok.ops.any(b, [1]).numpy().tolist() == [True]\n"
        "assert ok.ops.all(b, [1]).numpy().tolist() == [False]\n"
        "assert ok.ops.sum(np.ones(3, np.float32), [0]).numpy() == 3\n"
        "ok.register_op('Builtins>Probe').input('x: float').output('y: float')\n"
        "ok.register_kernel('Builtins>Probe', backend='*')(lambda x: x)\n"
        "assert ok.ops.builtins.probe(np.ones(2, np.float32)).numpy().tolist() == [1.0, 1.0]\n"
        "assert ok.ops.zeros_like(np.ones(2, np.float32)).numpy().tolist() == [0.0, 0.0]\n"
        "assert 'any' in dir(ok.ops) and 'builtins' in dir(ok.ops)\n"
        # ops and namespaces named like the module's own imports and helpers
        "for name in ('Engine', 'Plugins', 'Wrapper', 'Annotations', 'Threading>Probe', 'Pkgutil>Probe'):\n"
        "    ok.register_op(name).input('x: float').output('y: float')\n"
        "    ok.register_kernel(name, backend='*')(lambda x: x + 1)\n"
        "one = np.ones(2, np.float32)\n"
        "for fn in (ok.ops.engine, ok.ops.plugins, ok.ops.wrapper, ok.ops.annotations,\n"
        "           ok.ops.threading.probe, ok.ops.pkgutil.probe):\n"
        "    assert fn(one).numpy().tolist() == [2.0, 2.0], fn\n"
    )
    env = {**os.environ, "OPKERNEL_BACKEND": "cpu"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_backend_refusing_an_input_array_names_the_op(twin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend that cannot hold a host array (cuda and strings) raises from its upload,
    which knows no op: the engine names the op whose input it was."""
    be = ok.engine.backend_instance(twin)

    def refuse(array: np.ndarray) -> object:
        raise ok.errors.OpTypeError(f"backend {twin!r} cannot hold arrays of dtype {array.dtype}")

    monkeypatch.setattr(be, "from_numpy", refuse)
    with ok.use_backend(twin), pytest.raises(ok.errors.OpTypeError, match=r"^op 'Neg': backend .* cannot hold") as info:
        ok.ops.neg(np.array([1.0], np.float32))
    assert info.value.op == "Neg"
