"""Record TensorFlow's answer to every conformance case (run it in a process of its own).

    .venv/bin/python tests/tf_conformance/record.py --out tests/tf_conformance/recorded [--only math]

Discovers every ``cases_<family>.py`` beside this file, runs each case on
TensorFlow's reference CPU kernels (oneDNN off, one thread) through
``tf.raw_ops.<Op>(**inputs by name, **attrs)`` and writes the outputs, or the
exception TensorFlow raised, plus the gradients of ``grad=True`` cases (with
respect to every floating or complex input), with
``recording.write_family``.  Ops with Ref inputs (Assign*, Apply*) run as their
resource-variable equivalents; their outputs are the values of every Ref input
after the update, in input order.  A family's ``composed_cases()`` are ops TensorFlow
does not expose (opkernel's own, or internal fused ones): its ``COMPOSED[op]``
function computes TensorFlow's answer from TensorFlow ops.

One case that TensorFlow rejects, or that breaks the recorder, never stops the
others: it is recorded as an error (a recorder bug shows up as class
``RecorderError``), and a case module that fails to import is recorded as its
family's ``module_error``.  This process never imports opkernel: TensorFlow and
PoCL both carry LLVM and must not share a process.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"           # the reference kernels, whatever the caller's environment
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import recording  # noqa: E402
from case import Case  # noqa: E402

#: opkernel's Ref-input state ops and TensorFlow's resource-variable equivalents.
RESOURCE_OPS = {"Assign": "AssignVariableOp", "AssignAdd": "AssignAddVariableOp", "AssignSub": "AssignSubVariableOp",
                "RngReadAndSkip": "RngReadAndSkip"}


class RecorderError(Exception):
    """The recorder could not run a case (a bug in the case or the recorder, not TensorFlow's answer)."""


def families(directory: Path = HERE) -> list[str]:
    return sorted(p.stem[len("cases_"):] for p in directory.glob("cases_*.py"))


def load_family(family: str) -> list[tuple[Case, Callable[..., list[Any]] | None]]:
    """The family's cases, each with its COMPOSED function when it is one of ``composed_cases()``."""
    module = importlib.import_module(f"cases_{family}")
    plain: list[tuple[Case, Callable[..., list[Any]] | None]] = [(c, None) for c in module.cases()]
    if not hasattr(module, "composed_cases"):
        return plain
    table = module.COMPOSED
    extra = []
    for c in module.composed_cases():
        if c.op not in table:
            raise RecorderError(f"cases_{family}.py: composed case {c.id!r} has no COMPOSED entry for {c.op!r}")
        extra.append((c, table[c.op]))
    return plain + extra


def _tf() -> Any:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf


def _op_def(tf: Any, name: str) -> Any:
    from tensorflow.python.framework import op_def_registry

    od = op_def_registry.get(name)
    if od is None:
        raise RecorderError(f"TensorFlow has no op named {name!r}")
    return od


def _attr(tf: Any, value: Any) -> Any:
    if isinstance(value, str) and value in recording.DTYPES:
        return tf.as_dtype(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_attr(tf, v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]


def _numpy(t: Any) -> np.ndarray:
    a = np.asarray(t.numpy())
    if t.dtype.name == "string":
        return a.astype(np.bytes_) if a.size else np.zeros(a.shape, np.bytes_)
    return a


def _run_ref_op(tf: Any, case: Case, od: Any, entry: dict[str, Any]) -> list[np.ndarray]:
    """A Ref-input op on tf.Variables; its outputs are the Ref inputs' values afterwards.

    ``entry`` notes the resource op that ran and any attr of the case it has no use for
    (AssignVariableOp has no ``use_locking``), so the recording says what was compared."""
    target = RESOURCE_OPS.get(case.op, "Resource" + case.op)
    tod = _op_def(tf, target)
    if len(case.inputs) != len(od.input_arg):
        raise RecorderError(f"case {case.id!r} gives {len(case.inputs)} inputs; {case.op} takes {len(od.input_arg)}")
    entry["tf_op"] = target
    args: dict[str, Any] = {}
    variables = []
    resource = tf.resource.as_datatype_enum
    for arg, value, tname in zip(od.input_arg, case.inputs, _input_names(tf, tod)):
        if arg.is_ref or arg.type == resource:  # opkernel's Ref input; a resource handle in TensorFlow
            v = tf.Variable(tf.constant(value))
            variables.append(v)
            args[tname] = v.handle
        else:
            args[tname] = tf.constant(value)
    known = {a.name for a in tod.attr}
    args.update({k: _attr(tf, v) for k, v in case.attrs.items() if k in known})
    dropped = sorted(set(case.attrs) - known)
    if dropped:
        entry["dropped_attrs"] = dropped
    getattr(tf.raw_ops, target)(**args)
    return [_numpy(v.read_value()) for v in variables]


def _inputs(tf: Any, case: Case, od: Any) -> dict[str, Any]:
    if len(case.inputs) != len(od.input_arg):
        raise RecorderError(
            f"case {case.id!r} gives {len(case.inputs)} inputs; TensorFlow's {case.op} takes "
            f"{len(od.input_arg)} ({', '.join(a.name for a in od.input_arg)})")
    return {
        name: [tf.constant(v) for v in value] if isinstance(value, list) else tf.constant(value)
        for name, value in zip(_input_names(tf, od), case.inputs)
    }


def _input_names(tf: Any, od: Any) -> list[str]:
    """tf.raw_ops' keyword for each input, in order: the Python API renames some
    (Split's ``split_dim`` is ``axis``), and inputs always come first."""
    params = list(inspect.signature(getattr(tf.raw_ops, od.name)).parameters)
    return params[:len(od.input_arg)]


def _error(e: BaseException) -> dict[str, str]:
    message = getattr(e, "message", None) or str(e)
    # Eager execution wraps the kernel's message in node and device names that say nothing about the call.
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message)
    message = re.sub(r"\s*name:\s*$", "", message)
    # "No OpKernel was registered ... with these attrs: [...]" lists attrs in hash order: sort them,
    # so re-recording gives the same text.
    message = re.sub(r"(with these attrs: \[)([^\]]*)\]",
                     lambda m: m.group(1) + ", ".join(sorted(m.group(2).split(", "))) + "]", message)
    return {"class": type(e).__name__, "message": message.strip()[:2000]}


def record_case(tf: Any, case: Case, arrays: dict[str, tuple[np.ndarray, str]],
                composed: Callable[..., list[Any]] | None = None) -> dict[str, Any]:
    """TensorFlow's answer to ``case``; ``composed`` (a family's COMPOSED entry) computes it
    for an op TensorFlow lacks as ``composed(tf, inputs, attrs)``, a composition of its ops."""
    entry: dict[str, Any] = {"op": case.op}
    try:
        od = None if composed else _op_def(tf, case.op)
        if od is not None and (case.op in RESOURCE_OPS or any(a.is_ref for a in od.input_arg)):
            outs = _run_ref_op(tf, case, od, entry)
            sources: list[tuple[str, Any]] = []
        else:
            if od is None:
                named = {f"input{i}": [tf.constant(x) for x in v] if isinstance(v, list) else tf.constant(v)
                         for i, v in enumerate(case.inputs)}
            else:
                named = _inputs(tf, case, od)
            attrs = {k: _attr(tf, v) for k, v in case.attrs.items()}
            sources = [
                (f"{n}[{i}]" if isinstance(v, list) else n, t)
                for n, v in named.items()
                for i, t in enumerate(v if isinstance(v, list) else [v])
                if t.dtype.name in recording.DIFFERENTIABLE
            ] if case.grad else []
            with tf.GradientTape(persistent=True) as tape:
                for _, t in sources:
                    tape.watch(t)
                if composed is not None:
                    result = composed(tf, tuple(named.values()), attrs)
                else:
                    result = getattr(tf.raw_ops, case.op)(**named, **attrs)
            flat = _flat(result)
            outs = [_numpy(t) for t in flat]
    except Exception as e:  # noqa: BLE001 - TensorFlow's rejection is the answer recorded
        entry["error"] = _error(e)
        return entry
    entry["outputs"] = []
    for j, a in enumerate(outs):
        dtype = recording.dtype_name(a)
        entry["outputs"].append({"dtype": dtype, "shape": list(a.shape)})
        arrays[f"{case.id}#o{j}"] = (a, dtype)
    if case.grad:
        specs = [(tuple(s["shape"]), s["dtype"]) for s in entry["outputs"]]
        ups = recording.upstream(case.seed, specs)
        targets = [(t, u) for t, u in zip(flat, ups) if u is not None]
        try:
            if not sources or not targets:
                raise RecorderError(
                    f"case {case.id!r} asks for gradients but has no floating or complex input or output")
            grads = tape.gradient(
                [t for t, _ in targets], [t for _, t in sources],
                output_gradients=[tf.constant(u) for _, u in targets],
                unconnected_gradients=tf.UnconnectedGradients.ZERO)
            entry["grads"] = []
            for j, ((name, _), g) in enumerate(zip(sources, grads)):
                a = _numpy(tf.convert_to_tensor(g))
                dtype = recording.dtype_name(a)
                entry["grads"].append({"input": name, "dtype": dtype, "shape": list(a.shape)})
                arrays[f"{case.id}#g{j}"] = (a, dtype)
        except Exception as e:  # noqa: BLE001
            entry["grad_error"] = _error(e)
    return entry


def record_family(tf: Any, family: str, out: Path) -> tuple[int, float]:
    start = time.perf_counter()
    doc: dict[str, Any] = {"tensorflow": tf.__version__, "family": family, "module_error": None, "cases": {}}
    arrays: dict[str, tuple[np.ndarray, str]] = {}
    try:
        cases = load_family(family)
    except Exception:  # noqa: BLE001 - reported to the tests, which fail naming the module
        doc["module_error"] = traceback.format_exc(limit=6)
        cases = []
    for case, composed in cases:
        if case.id in doc["cases"]:
            continue                     # a duplicate id is reported by test_tf_coverage
        try:
            doc["cases"][case.id] = record_case(tf, case, arrays, composed)
        except Exception as e:  # noqa: BLE001 - one broken case must not stop the others
            doc["cases"][case.id] = {"op": case.op, "error": {"class": "RecorderError", "message": repr(e)}}
    recording.write_family(out, family, doc, arrays)
    return len(cases), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="directory for values_<family>.json/.npz")
    p.add_argument("--only", action="append", help="record only this family (repeatable)")
    p.add_argument("--cases-dir", type=Path, default=HERE, help="where the cases_<family>.py modules are")
    args = p.parse_args(argv)
    tf = _tf()
    sys.path.insert(0, str(args.cases_dir.resolve()))
    found = families(args.cases_dir)
    chosen = args.only or found
    unknown = sorted(set(chosen) - set(found))
    if unknown:
        p.error(f"no case module for {unknown}; families: {found}")
    for family in chosen:
        n, seconds = record_family(tf, family, args.out)
        print(f"{family}: {n} cases in {seconds:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
