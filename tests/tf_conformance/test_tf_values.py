"""Every conformance case on every backend, against TensorFlow's answer.

Per case: the outputs' dtypes, shapes and values (ints, bools and strings exactly;
floats with NaN in the same places, the same infinities and signed zeros, and
within a per-dtype tolerance that a case may override), the gradients of
``grad=True`` cases, and for a call TensorFlow rejects, an ``opkernel.errors``
error that names the op.  A case listed in a family's DIFFERENCES still runs (it
must not crash or raise anything but an opkernel error) and is reported as a
deliberate difference; a listed case that now agrees with TensorFlow fails, so the
list cannot go stale.  A backend without a kernel for the case's dtypes is a skip
that says so and is counted in the summary.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opkernel as ok
from opkernel import errors
from opkernel.ops._gen import API_NAMES

import recording
from case import Case
from compare import mismatch as _mismatch
from tf_suite import OUTCOMES, Reference, suite

def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]



def _is_ref_op(op: str) -> bool:
    return any(a.is_ref for a in ok.op_def(op).inputs)


def _attrs(case: Case) -> dict[str, Any]:
    """The case's attrs for ``ok.execute``: dtypes by name made DTypes, and tf.raw_ops'
    Python names (Squeeze's ``axis``) turned back into the OpDef's (``squeeze_dims``)."""
    opdef_name = {py: name for name, py in API_NAMES.get(case.op, {}).items()}
    return {
        opdef_name.get(k, k): ok.as_dtype(v) if isinstance(v, str) and v in recording.DTYPES else v
        for k, v in case.attrs.items()
    }


def _run(case: Case) -> tuple[list[ok.Tensor], list[Any]]:
    """Run the case's op; the outputs, and the inputs as passed (tensors, lists of tensors)."""
    attrs = _attrs(case)
    if _is_ref_op(case.op):
        refs = [a.is_ref for a in ok.op_def(case.op).inputs]
        args = [ok.Variable(v) if r else v for v, r in zip(case.inputs, refs)]
        result = ok.execute(case.op, *args, **attrs)
        variables = [a for a, r in zip(args, refs) if r]
        returned = _flat(result)
        # An op whose output is a Ref returns its variable's new value; RngReadAndSkip returns the old state.
        if returned and ok.op_def(case.op).outputs[0].is_ref and not np.array_equal(returned[0].numpy(), variables[0].numpy(), equal_nan=True):
            pytest.fail(f"{case.op} returned a value that is not its Ref input's new value")
        return variables, args
    args = [[ok.tensor(x) for x in v] if isinstance(v, list) else v for v in case.inputs]
    return _flat(ok.execute(case.op, *args, **attrs)), args


def _expect_rejection(case: Case, want: dict[str, str]) -> list[str]:
    """Nothing when opkernel rejects the call too; the difference when it runs it.
    Rejecting it with anything but a specific opkernel error naming the op fails."""
    try:
        outs, _ = _run(case)
    except errors.InternalError as e:
        pytest.fail(f"TensorFlow rejects {case.op} ({want['class']}: {want['message'][:200]}); "
                    f"opkernel raised an internal error instead of a specific one: {e}")
    except errors.KernelNotFoundError as e:
        if suite().difference(case) is not None:
            # opkernel means to run this call (a listed difference): this backend just lacks the kernel.
            raise _MissingKernel(str(e)) from e
        if case.op not in str(e):
            pytest.fail(f"KernelNotFoundError for a call TensorFlow rejects does not name the op {case.op!r}: {e}")
        return []
    except errors.OpkernelError as e:
        if case.op not in str(e):
            pytest.fail(f"{type(e).__name__} for a call TensorFlow rejects does not name the op {case.op!r}: {e}")
        return []
    except Exception as e:  # noqa: BLE001 - anything else is the failure reported
        pytest.fail(f"TensorFlow rejects {case.op} ({want['class']}: {want['message'][:200]}); opkernel raised "
                    f"{type(e).__name__} (not an opkernel.errors error): {e}")
    return [f"TensorFlow rejects this call ({want['class']}: {want['message'][:200]}); opkernel returned "
            f"{[(o.dtype.name, tuple(o.shape)) for o in outs]}"]


def _gradients(case: Case, ref: dict[str, Any], tol: tuple[float, float] | None) -> list[str]:
    specs = [(tuple(s["shape"]), s["dtype"]) for s in ref["outputs"]]
    ups = recording.upstream(case.seed, specs)
    floating = [
        (x if isinstance(x, ok.Tensor) else ok.tensor(x))
        for v in case.inputs for x in (v if isinstance(v, list) else [v])
    ]
    sources = [t for t in floating if t.dtype.name in recording.DIFFERENTIABLE]
    attrs = _attrs(case)
    it = iter(floating)
    args = [[next(it) for _ in v] if isinstance(v, list) else next(it) for v in case.inputs]
    if ref.get("grad_error", {}).get("class") == "RecorderError":
        return [f"the recorder could not take this case's gradient: {ref['grad_error']['message']}"]
    if "grad_error" in ref:
        try:
            with ok.GradientTape() as tape:
                tape.watch(sources)
                outs = _flat(ok.execute(case.op, *args, **attrs))
            targets = [(o, u) for o, u in zip(outs, ups) if u is not None]
            tape.gradient([o for o, _ in targets], sources, output_gradients=[u for _, u in targets],
                          unconnected_gradients="zero")
        except errors.OpkernelError:
            return []
        return [f"TensorFlow cannot take this gradient ({ref['grad_error']['class']}: "
                f"{ref['grad_error']['message'][:200]}); opkernel can: list the case in DIFFERENCES if intended"]
    with ok.GradientTape() as tape:
        tape.watch(sources)
        outs = _flat(ok.execute(case.op, *args, **attrs))
    targets = [(o, u) for o, u in zip(outs, ups) if u is not None]
    try:
        grads = tape.gradient([o for o, _ in targets], sources, output_gradients=[u for _, u in targets],
                              unconnected_gradients="zero")
    except errors.InternalError:
        raise
    except errors.OpkernelError as e:
        return [f"TensorFlow takes this gradient; opkernel cannot: {type(e).__name__}: {e}"]
    if len(grads) != len(ref["grads"]):
        return [f"{len(grads)} gradients, TensorFlow {len(ref['grads'])} ({[s['input'] for s in ref['grads']]})"]
    problems = []
    for spec, g in zip(ref["grads"], grads):
        got = g.numpy()
        if g.dtype.name != spec["dtype"]:
            problems.append(f"gradient of {spec['input']}: dtype {g.dtype.name}, TensorFlow {spec['dtype']}")
            continue
        why = _mismatch(got, spec["value"], spec["dtype"], tol)
        if why:
            problems.append(f"gradient of {spec['input']}: {why}")
    return problems


def _compare(case: Case, ref: dict[str, Any]) -> list[str]:
    if "error" in ref:
        return _expect_rejection(case, ref["error"])
    try:
        outs, _ = _run(case)
    except errors.KernelNotFoundError as e:
        raise _MissingKernel(str(e)) from e
    except errors.InternalError:
        raise
    except errors.OpkernelError as e:
        return [f"TensorFlow runs this call; opkernel rejects it: {type(e).__name__}: {e}"]
    problems = []
    if len(outs) != len(ref["outputs"]):
        return [f"{len(outs)} outputs, TensorFlow {len(ref['outputs'])}"]
    for j, (o, spec) in enumerate(zip(outs, ref["outputs"])):
        if o.dtype.name != spec["dtype"]:
            problems.append(f"output {j}: dtype {o.dtype.name}, TensorFlow {spec['dtype']}")
            continue
        why = _mismatch(o.numpy(), spec["value"], spec["dtype"], case.tol)
        if why:
            problems.append(f"output {j}: {why}")
    if case.grad and not problems:
        problems += _gradients(case, ref, case.tol)
    return problems


class _MissingKernel(Exception):
    pass


def test_values(backend: str, tf_case: tuple[str, Case], reference: Reference,
                record_property: Any) -> None:
    family, case = tf_case
    key = (backend, case.id)
    record_property("tf_outcome_key", key)
    ref = reference.entry(case.id)
    if ref is None:
        pytest.fail(f"case {case.id!r} is not in the reference ({reference.source}): re-record with "
                    f"`.venv/bin/python tests/tf_conformance/record.py --out tests/tf_conformance/recorded`")
    if ref.get("error", {}).get("class") == "RecorderError":
        pytest.fail(f"the recorder could not run case {case.id!r}: {ref['error']['message']}")
    reason = suite().difference(case)
    try:
        problems = _compare(case, ref)
    except _MissingKernel as e:
        if backend == "cpu":  # the reference backend runs every dtype TensorFlow's CPU does
            pytest.fail(f"missing kernel on cpu: {e}")
        OUTCOMES[key] = "missing kernel"
        pytest.skip(f"missing kernel on {backend}: {e}")
    if reason is not None:
        if not problems and case.id in suite().differences:
            pytest.fail(f"case {case.id!r} is listed as a deliberate difference ({reason}) but now agrees with "
                        f"TensorFlow on {backend}: remove it from DIFFERENCES in cases_{family}.py")
        OUTCOMES[key] = "difference"
        return
    if problems:
        pytest.fail(f"{case.id} on {backend} disagrees with TensorFlow:\n  " + "\n  ".join(problems))
    OUTCOMES[key] = "agrees"
