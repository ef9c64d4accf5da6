"""Values are values: a tensor never changes after it is made.

An op's output never aliases a Variable that is later updated in place, nor a
caller's numpy array; ``.numpy()`` never lets the caller write a tensor; an upload
never reads the caller's array after returning; tensors pickle and deep-copy.
"""

from __future__ import annotations

import array
import copy
import pickle
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from isolated import run_isolated
from opkernel.ops import state_ops
from opkernel.plugins import unregister_plugin

F32 = np.float32
INIT = np.arange(6, dtype=F32).reshape(2, 3)

#: Ops that may return their input or a view of it: (id, call, numpy reference).
VIEWS: list[tuple[str, Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]] = [
    ("identity", ok.ops.identity, lambda a: a),
    ("stop_gradient", ok.ops.stop_gradient, lambda a: a),
    ("reshape", lambda x: ok.ops.reshape(x, [3, 2]), lambda a: a.reshape(3, 2)),
    ("reshape_same", lambda x: ok.ops.reshape(x, [2, 3]), lambda a: a),
    ("expand_dims", lambda x: ok.ops.expand_dims(x, 0), lambda a: a[None]),
    ("squeeze", lambda x: ok.ops.squeeze(ok.ops.expand_dims(x, 1), [1]), lambda a: a),
    ("transpose_identity", lambda x: ok.ops.transpose(x, [0, 1]), lambda a: a),
    ("transpose", lambda x: ok.ops.transpose(x, [1, 0]), lambda a: a.T),
    ("slice_full", lambda x: ok.ops.slice(x, [0, 0], [-1, -1]), lambda a: a),
    ("slice_row", lambda x: ok.ops.slice(x, [1, 0], [1, 3]), lambda a: a[1:]),
    ("strided_slice_full", lambda x: ok.ops.strided_slice(x, [0, 0], [2, 3], [1, 1]), lambda a: a),
    ("split_one", lambda x: ok.ops.split(0, x, num_split=1)[0], lambda a: a),
    ("unpack_row", lambda x: ok.ops.unpack(x, num=2)[1], lambda a: a[1]),
    ("read_value", lambda x: x.read_value() if isinstance(x, ok.Variable) else x, lambda a: a),
]

DELTA = np.full((2, 3), 10, F32)

#: In-place updates of ``w`` through each kind of Ref kernel.
UPDATES: list[tuple[str, Callable[[ok.Variable], Any]]] = [
    ("assign", lambda w: w.assign(DELTA)),
    ("assign_add", lambda w: w.assign_add(DELTA)),
    ("assign_sub", lambda w: ok.ops.assign_sub(w, DELTA)),
    ("apply_gradient_descent", lambda w: ok.ops.apply_gradient_descent(w, F32(1), DELTA)),
    ("apply_momentum", lambda w: ok.ops.apply_momentum(w, ok.Variable(np.zeros((2, 3), F32)), F32(1), DELTA, F32(0.9))),
]


@pytest.mark.parametrize("update", [u for _, u in UPDATES], ids=[n for n, _ in UPDATES])
@pytest.mark.parametrize("view,reference", [(v, r) for _, v, r in VIEWS], ids=[n for n, _, _ in VIEWS])
def test_an_output_keeps_its_value_when_its_variable_is_updated(
    backend: str, view: Callable[[Any], Any], reference: Callable[[np.ndarray], np.ndarray],
    update: Callable[[ok.Variable], Any],
) -> None:
    w = ok.Variable(INIT)
    old = view(w)
    update(w)
    np.testing.assert_array_equal(old.numpy(), reference(INIT))
    assert not np.array_equal(w.numpy(), INIT)  # the variable itself was updated
    after = view(w)  # and a new read sees the update
    np.testing.assert_array_equal(after.numpy(), reference(w.numpy()))


def test_a_variables_numpy_array_is_a_snapshot(backend: str) -> None:
    w = ok.Variable(INIT)
    before = w.numpy()
    w.assign_add(DELTA)
    np.testing.assert_array_equal(before, INIT)
    np.testing.assert_array_equal(w.numpy(), INIT + DELTA)


def test_the_adam_update_copies_each_shared_ref_input(backend: str) -> None:
    w, m, v = (ok.Variable(INIT) for _ in range(3))
    seen = [ok.ops.identity(x) for x in (w, m, v)]
    ok.ops.apply_adam(w, m, v, F32(0.5), F32(0.5), F32(0.1), F32(0.9), F32(0.999), F32(1e-7), DELTA)
    for before, now in zip(seen, (w, m, v)):
        np.testing.assert_array_equal(before.numpy(), INIT)
        assert not np.array_equal(now.numpy(), INIT)


def test_an_update_with_nothing_holding_the_variable_copies_nothing(backend: str) -> None:
    """Copy-on-write copies only while something holds the memory: a training loop
    that reads its weights through ops pays no copy per step."""
    w = ok.Variable(INIT)
    x = ok.tensor(np.ones((3, 2), F32))
    buffer = weakref.ref(w.value)
    for _ in range(3):
        ok.ops.mat_mul(w, x)
        ok.ops.apply_gradient_descent(w, F32(0.1), DELTA)
    assert buffer() is w.value
    held = ok.ops.identity(w)
    w.assign_add(DELTA)
    assert buffer() is held.value and w.value is not held.value


def test_a_composed_update_writes_the_variable_while_a_view_of_it_is_alive(backend: str, fresh_registry: None) -> None:
    """Generic kernels update a Variable through ops on a stand-in for it; the copy is
    made once, before the call, so the stand-in's updates reach the variable."""
    ok.register_kernel("ApplyGradientDescent", backend="*", label="composed")(state_ops._apply_gradient_descent)
    w = ok.Variable(INIT)
    old = ok.ops.reshape(w, [6])
    ok.ops.apply_gradient_descent(w, F32(1), DELTA, _kernel="composed")
    np.testing.assert_array_equal(w.numpy(), INIT - DELTA)
    np.testing.assert_array_equal(old.numpy(), INIT.reshape(6))


@pytest.mark.parametrize("view,reference", [(v, r) for _, v, r in VIEWS[:-1]], ids=[n for n, _, _ in VIEWS[:-1]])
def test_an_output_never_shares_a_callers_array(
    backend: str, view: Callable[[Any], Any], reference: Callable[[np.ndarray], np.ndarray]
) -> None:
    for _ in range(2):  # the first call and the cached one
        caller = INIT.copy()
        outs = [view(caller), view(ok.tensor(caller))]
        caller[...] = -1
        for out in outs:
            np.testing.assert_array_equal(out.numpy(), reference(INIT))


class ArrayLike:
    """Host data that hands numpy its own array (as a torch tensor or a memmap wrapper does)."""

    def __init__(self) -> None:
        self.array = INIT.copy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self.array


def test_an_output_never_shares_memory_behind_an_array_like(backend: str) -> None:
    holder = ArrayLike()
    buffer = array.array("f", INIT.reshape(-1).tolist())
    outs = [ok.tensor(holder), ok.ops.identity(holder), ok.ops.reshape(holder, [3, 2]), ok.tensor(buffer),
            ok.ops.identity(buffer)]
    holder.array[...] = -1
    buffer[0] = -1
    for out in outs:
        np.testing.assert_array_equal(out.numpy().reshape(-1), INIT.reshape(-1))


def test_numpy_never_lets_the_caller_write_a_tensor(backend: str) -> None:
    for t in (ok.tensor(INIT.copy()), ok.ops.identity(ok.tensor(INIT.copy())), ok.Variable(INIT)):
        for a in (t.numpy(), np.asarray(t)):
            try:
                a[0, 0] = 100
            except ValueError as e:  # host backends hand out a read-only view, devices a copy
                assert "read-only" in str(e)
            assert t.numpy().tolist() == [[0, 1, 2], [3, 4, 5]]


def test_an_upload_never_reads_the_callers_array_after_returning(backend: str) -> None:
    """A device upload is asynchronous: queued behind a long kernel, it must not read
    an array the caller changes as soon as ok.tensor (or an op call) returns."""
    a = ok.tensor(np.random.default_rng(0).random((600, 600), F32))
    caller = np.ones(1 << 18, F32)  # large enough to be uploaded without a host copy before the fix
    zeros = ok.tensor(np.zeros(1 << 18, F32))
    for _ in range(3):
        ok.ops.mat_mul(a, a)  # keeps the queue busy
        t = ok.tensor(caller)
        s = ok.ops.add(caller, zeros)
        caller[...] = -1
        assert (t.numpy() == 1).all() and (s.numpy() == 1).all()
        caller[...] = 1


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "string"])
def test_a_tensor_pickles_to_the_same_value_on_the_same_backend(backend: str, dtype: str) -> None:
    if not ok.engine.backend_instance(backend).supports_dtype(ok.as_dtype(dtype)):
        pytest.skip(f"backend {backend!r} does not hold {dtype} tensors")
    data = [["1", "2.5"], ["-3", "0"]] if dtype == "string" else INIT[:, :2].astype(ok.as_dtype(dtype).np)
    t = ok.tensor(data, dtype)
    back = pickle.loads(pickle.dumps(t))
    assert type(back) is ok.Tensor and (back.dtype, back.backend, back.shape) == (t.dtype, backend, t.shape)
    np.testing.assert_array_equal(back.numpy(), t.numpy())
    use = (lambda x: ok.ops.string_to_number(x)) if dtype == "string" else (lambda x: ok.ops.reshape(x, [-1]))
    np.testing.assert_array_equal(use(back).numpy(), use(t).numpy())  # ops accept it on this backend


def test_a_variable_pickles_to_a_working_variable(backend: str) -> None:
    w = ok.Variable(INIT, trainable=False, name="w")
    back = pickle.loads(pickle.dumps(w))
    assert type(back) is ok.Variable and (back.trainable, back.name, back.backend) == (False, "w", backend)
    back.assign_add(DELTA)
    np.testing.assert_array_equal(back.numpy(), INIT + DELTA)
    np.testing.assert_array_equal(w.numpy(), INIT)


def test_tensors_pickled_here_load_in_another_process(backend: str) -> None:
    """What multiprocessing does: the bytes name the backend, not this process's objects."""
    data = pickle.dumps([ok.tensor(INIT), ok.Variable(INIT, name="w")])
    code = (
        "import pickle, sys; import numpy as np; import opkernel as ok\n"
        "t, w = pickle.loads(bytes.fromhex(sys.stdin.read()))\n"
        "w.assign_add(np.ones((2, 3), np.float32))\n"
        "print(type(t).__name__, t.backend, ok.ops.add(t, t).numpy().tolist(), type(w).__name__, w.name,"
        " w.backend, w.numpy().tolist(), sep='|')"
    )
    out = run_isolated(code, backend=backend, input=data.hex(), what="unpickling tensors").stdout.strip().split("|")
    assert out == ["Tensor", backend, str((INIT * 2).tolist()), "Variable", "w", backend, str((INIT + 1).tolist())]


def test_a_tensor_from_a_missing_backend_unpickles_onto_the_active_one(twin: str) -> None:
    with ok.use_backend(twin):
        data = pickle.dumps(ok.tensor(INIT))
    unregister_plugin("twin-plugin")
    with ok.use_backend("cpu"):
        back = pickle.loads(data)
    assert back.backend == "cpu"
    np.testing.assert_array_equal(back.numpy(), INIT)


def test_deepcopy_gives_an_independent_equal_tensor_and_a_new_variable(backend: str) -> None:
    t = ok.tensor(INIT)
    t2 = copy.deepcopy(t)
    assert type(t2) is ok.Tensor and t2 is not t and t2.backend == backend and t2.dtype == t.dtype
    np.testing.assert_array_equal(t2.numpy(), INIT)
    w = ok.Variable(INIT, name="w")
    pair = copy.deepcopy([w, w])
    w2 = pair[0]
    assert pair[1] is w2 and type(w2) is ok.Variable and w2.name == "w" and w2.trainable
    w2.assign_add(DELTA)
    w.assign_sub(DELTA)
    np.testing.assert_array_equal(w2.numpy(), INIT + DELTA)
    np.testing.assert_array_equal(w.numpy(), INIT - DELTA)
