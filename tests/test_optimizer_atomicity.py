"""Issue 28: an optimizer update is all or nothing.

Every training op in the library (``Apply*`` and ``ResourceApply*``), on every backend,
is called with each input made wrong in turn: a slot or gradient of another shape
(including one that would broadcast), a hyper-parameter that is not a scalar.  Each call
must raise InvalidArgumentError naming the op, and leave the variable and every slot
bit-identical to before.  The roles of the inputs come from the op's definition (Ref
inputs are the variable and its slots, ``grad``/``delta`` the gradient, the rest
scalar hyper-parameters), not from the implementation's own table."""

from __future__ import annotations

import re

import numpy as np
import pytest

import opkernel as ok
from opkernel import op_registry, plugins
from opkernel.errors import InvalidArgumentError
from opkernel.ops import state_ops

GRADIENTS = {"grad", "delta"}
SHAPE = (2, 3)
# A slot or gradient of another shape: another size, the same size, one that broadcasts.
WRONG_SHAPES = [(2, 4), (3, 2), (1, 3)]
# A hyper-parameter that is not a scalar: one element, several, the variable's shape.
NOT_SCALARS = [(1,), (3,), SHAPE]


def _training_ops() -> list[str]:
    plugins.ensure_loaded()
    names = sorted(n for n in op_registry.op_names() if re.match(r"(Resource)?Apply[A-Z]", n))
    assert names, "no training ops registered"
    return names


def _roles(op: str) -> tuple[list[str], list[str], list[str]]:
    """(Ref inputs, gradient inputs, scalar inputs) of ``op``, by its definition."""
    refs, grads, scalars = [], [], []
    for arg in ok.op_def(op).inputs:
        if arg.is_ref or arg.dtype is ok.resource:  # a Ref Variable, or a resource variable's handle
            refs.append(arg.name)
        elif arg.name in GRADIENTS:
            grads.append(arg.name)
        else:
            assert arg.name != "indices", f"{op}: a sparse update; this test needs a case for it"
            scalars.append(arg.name)
    assert refs and grads, f"{op}: cannot tell its variable and gradient apart"
    return refs, grads, scalars


def _call(op: str, inputs: dict[str, object], kernel: str | None = None) -> None:
    names = [arg.name for arg in ok.op_def(op).inputs]
    given = [inputs[n].handle if isinstance(inputs[n], ok.ResourceVariable) else inputs[n] for n in names]  # type: ignore[attr-defined]
    ok.execute(op, *given, _kernel=kernel)


def _cases(op: str) -> list[tuple[str, str, tuple[int, ...]]]:
    refs, grads, scalars = _roles(op)
    cases = [(name, "shape", shape) for name in refs + grads for shape in WRONG_SHAPES]
    return cases + [(name, "scalar", shape) for name in scalars for shape in NOT_SCALARS]


def _inputs(op: str, wrong: str | None, shape: tuple[int, ...]) -> dict[str, object]:
    refs, grads, scalars = _roles(op)
    rng = np.random.default_rng(0)
    out: dict[str, object] = {}
    resource = ok.op_def(op).inputs[0].dtype is ok.resource
    for name in refs:
        value = np.abs(rng.standard_normal(shape if name == wrong else SHAPE)).astype(np.float32) + 0.5
        out[name] = ok.ResourceVariable(value) if resource else ok.Variable(value)
    for name in grads:
        out[name] = rng.standard_normal(shape if name == wrong else SHAPE).astype(np.float32)
    for name in scalars:
        out[name] = np.full(shape, 0.25, np.float32) if name == wrong else np.float32(0.25)
    return out


def _snapshot(op: str, inputs: dict[str, object]) -> dict[str, bytes]:
    refs, _, _ = _roles(op)
    return {name: inputs[name].numpy().tobytes() for name in refs}  # type: ignore[attr-defined]


def _check_rejected(op: str, backend: str, kernel: str | None = None) -> None:
    for name, kind, shape in _cases(op):
        inputs = _inputs(op, name, shape)
        before = _snapshot(op, inputs)
        with pytest.raises(InvalidArgumentError, match=f"^op '{op}': ") as info:
            _call(op, inputs, kernel)
        assert info.value.op == op
        changed = [n for n, b in _snapshot(op, inputs).items() if b != before[n]]
        assert not changed, f"{op} with {name!r} of shape {shape} ({kind}) failed but changed {changed} on {backend}"


@pytest.mark.parametrize("op", _training_ops())
def test_rejected_update_changes_nothing(op, backend):
    _check_rejected(op, backend)


@pytest.mark.parametrize("op", state_ops.TRAINING_OPS)
def test_rejected_update_changes_nothing_in_the_generic_kernel(op, backend, fresh_registry):
    """The generic kernels (written with other ops, for backends without their own)."""
    generic = getattr(state_ops, "_" + re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower())
    ok.register_kernel(op, backend="*", label="generic")(generic)
    _check_rejected(op, backend, "generic")


@pytest.mark.parametrize("op", _training_ops())
def test_valid_update_changes_every_slot(op, backend):
    """The cases above are not vacuous: the same call with every input right updates
    the variable and each of its slots."""
    inputs = _inputs(op, None, SHAPE)
    before = _snapshot(op, inputs)
    _call(op, inputs)
    after = _snapshot(op, inputs)
    assert all(after[n] != before[n] for n in before), op
