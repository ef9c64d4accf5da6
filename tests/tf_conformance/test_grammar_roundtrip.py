"""The REGISTER_OP grammar against TensorFlow's whole op registry.

Every OpDef TensorFlow registers is printed back as REGISTER_OP specs, registered in
an empty, isolated opkernel registry and finalized; the resulting definition must
equal TensorFlow's (inputs and outputs in order, attrs in order with their types,
allowed values, minimums and defaults, statefulness).  Ops that use types opkernel
does not model (variant tensors, func attrs) are counted by type and
listed, not skipped silently.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from opdef_reference import normalize_ok, normalize_tf, reference, to_specs
from opkernel import dtypes, op_registry
from opkernel.testing import isolated_registries

SPEC_NAMES = {dt.enum: dt.spec_name for dt in (*dtypes.ALL_DTYPES, dtypes.resource)}
UNMODELED_ATTR_TYPES = ("func", "list(func)")
# TensorFlow reserves op names with a leading underscore for its runtime ('_Send',
# '_Arg'); opkernel's op names start with a capital letter (see op_registry), so those
# specs are registered under this prefix: their specs still go through the grammar.
INTERNAL_PREFIX = "TfInternal"


def ref_makes_stateful(op: dict[str, Any]) -> bool:
    """The one deliberate difference in a definition: an op with a Ref input is stateful.

    opkernel marks it so at finalization (op_registry), because it mutates its input
    and must never be cached or deduplicated; TensorFlow leaves the flag to the op's
    author (its ApplyAdam, Assign... are not marked).  Counted in the summary.
    """
    return not op["is_stateful"] and any(a["is_ref"] for a in op["inputs"])


def unmodeled_types(op: dict[str, Any]) -> set[str]:
    """The types in ``op`` that opkernel does not model (DataType enum names, or 'func')."""
    found = {a["type"] for a in op["inputs"] + op["outputs"] if a["type"] and a["type"] not in SPEC_NAMES}
    for attr in op["attrs"]:
        if attr["type"] in UNMODELED_ATTR_TYPES:
            found.add("func")
        if attr["type"] in ("type", "list(type)"):
            found |= {t for t in attr["allowed"] or () if t not in SPEC_NAMES}
            default = attr.get("default")
            values = default if isinstance(default, list) else [] if default is None else [default]
            found |= {t for t in values if t not in SPEC_NAMES}
    return found


def comparable(normal: dict[str, Any], attr_order: list[str], is_stateful: bool) -> dict[str, Any]:
    # TensorFlow keeps a dtype listed twice in an allowed set ('Mod' lists half twice);
    # opkernel keeps one of each: the set is the same.
    for attr in normal["attrs"].values():
        if attr["allowed"] is not None:
            attr["allowed"] = list(dict.fromkeys(attr["allowed"]))
    return {**normal, "attr_order": attr_order, "is_stateful": is_stateful}


# The type classes, largest first, as DataType enum names (the same sets as TensorFlow's:
# test_type_classes_are_tensorflows).
CLASSES = {
    name: frozenset(dt.enum for dt in dtypes.TYPE_CLASSES[name])
    for name in sorted((n for n in dtypes.TYPE_CLASSES if n != "type"), key=lambda n: -len(dtypes.TYPE_CLASSES[n]))
}


def round_trip(op: dict[str, Any], *, with_classes: bool = False) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """(opkernel's normal form, TensorFlow's) of ``op`` registered from printed specs, or the error.

    ``with_classes`` prints allowed sets with type classes ({numbertype, bool}); the order of
    the allowed dtypes then follows the class, so the sets are compared sorted."""
    inputs, outputs, attrs = to_specs(op, SPEC_NAMES, CLASSES if with_classes else None)
    name = INTERNAL_PREFIX + op["name"] if op["name"].startswith("_") else op["name"]
    try:
        registration = op_registry.register_op(name)
        for spec in attrs:
            registration.attr(spec)
        for spec in inputs:
            registration.input(spec)
        for spec in outputs:
            registration.output(spec)
        if op["is_stateful"]:
            registration.set_is_stateful()
        op_def = op_registry.get_op_def(name)
    except Exception as error:  # every failure is reported below, by op
        return f"{type(error).__name__}: {error}"
    got = comparable(normalize_ok(op_def), [a.name for a in op_def.attrs], op_def.is_stateful)
    want = comparable(normalize_tf(op), [a["name"] for a in op["attrs"]], op["is_stateful"] or ref_makes_stateful(op))
    if with_classes:
        for form in (got, want):
            for attr in form["attrs"].values():
                attr["allowed"] = None if attr["allowed"] is None else sorted(attr["allowed"])
    return got, want


def test_every_tensorflow_opdef_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    ref = reference()
    ops = ref.data["ops"]
    unmodeled: dict[str, list[str]] = {}
    failures: list[str] = []
    round_tripped = internal = 0
    with isolated_registries():
        op_registry.restore(op_registry.RegistrySnapshot({}, {}))  # empty: TF's names, no clashes
        for op in ops:
            missing = unmodeled_types(op)
            if missing:
                for t in missing:
                    unmodeled.setdefault(t, []).append(op["name"])
                continue
            result = round_trip(op)
            if isinstance(result, str):
                failures.append(f"{op['name']}: {result}")
            elif result[0] != result[1]:
                got, want = result
                diff = [k for k in want if got.get(k) != want.get(k)]
                failures.append(f"{op['name']}: {', '.join(diff)} differ: got {[got[k] for k in diff]}, "
                                f"TensorFlow {[want[k] for k in diff]}")
            else:
                round_tripped += 1
                internal += op["name"].startswith("_")
    skipped = sum(1 for op in ops if unmodeled_types(op))
    ref_stateful = sum(1 for op in ops if ref_makes_stateful(op) and not unmodeled_types(op))
    by_type = Counter({t: len(names) for t, names in unmodeled.items()})
    with capsys.disabled():
        print(f"\ngrammar round trip over TensorFlow {ref.data['tensorflow']}'s registry: {len(ops)} ops, "
              f"{round_tripped} round-tripped ({internal} of them TensorFlow-internal '_' names, "
              f"{ref_stateful} stateful in opkernel for their Ref inputs), "
              f"{skipped} use types opkernel does not model: "
              + ", ".join(f"{t} {n}" for t, n in sorted(by_type.items())))
    assert not failures, f"{len(failures)} TensorFlow ops do not round-trip:\n" + "\n".join(failures)
    assert round_tripped + skipped == len(ops)


def test_round_trip_through_type_classes() -> None:
    # The same registry printed with type classes where an allowed set holds one whole
    # ("T: {numbertype, bool}"), the form most of TensorFlow's own REGISTER_OP calls use.
    failures, with_class = [], 0
    with isolated_registries():
        op_registry.restore(op_registry.RegistrySnapshot({}, {}))
        for op in reference().data["ops"]:
            if unmodeled_types(op):
                continue
            specs = to_specs(op, SPEC_NAMES, CLASSES)[2]
            with_class += any(name in spec for spec in specs for name in CLASSES)
            result = round_trip(op, with_classes=True)
            if isinstance(result, str) or result[0] != result[1]:
                failures.append(f"{op['name']}: {result if isinstance(result, str) else (result[0], result[1])}")
    assert not failures, f"{len(failures)} ops do not round-trip through type classes:\n" + "\n".join(failures[:20])
    assert with_class > 100  # the shorthand was exercised (TensorFlow 2.21: several hundred ops)


def test_type_classes_are_tensorflows() -> None:
    # Each class's dtypes as TensorFlow expands it, read from an op that declares its T with it.
    tf_ops = reference().ops
    for op, cls in (("Sum", "numbertype"), ("Less", "realnumbertype"), ("Dequantize", "quantizedtype")):
        allowed = next(a["allowed"] for a in tf_ops[op]["attrs"] if a["name"] == "T")
        assert set(allowed) == CLASSES[cls], (op, cls)


def test_unmodeled_types_are_only_the_known_ones() -> None:
    # A TensorFlow upgrade that brings a new dtype (a float8, int4) must not shrink the
    # round trip silently: the dtype is either modeled or added here knowingly.
    found: set[str] = set()
    for op in reference().data["ops"]:
        found |= unmodeled_types(op)
    assert found <= {"DT_RESOURCE", "DT_VARIANT", "func"}, sorted(found)


def test_round_trip_compares_what_it_claims() -> None:
    # The comparison is not vacuous: a changed default, allowed set or input is caught.
    op = dict(reference().ops["Conv2D"])
    op["attrs"] = [dict(a) for a in op["attrs"]]
    with isolated_registries():
        op_registry.restore(op_registry.RegistrySnapshot({}, {}))
        result = round_trip(op)
        assert not isinstance(result, str) and result[0] == result[1]
    _, want = result
    changed = {**want, "attrs": {**want["attrs"], "data_format": {**want["attrs"]["data_format"], "default": "NCHW"}}}
    assert changed != result[0]


def test_docs_give_the_current_counts() -> None:
    # docs/conformance.md's round-trip section states the counts by unmodeled type; a new
    # TensorFlow (a fresh dump) that changes them makes the page stale, and this fails.
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "conformance.md").read_text(encoding="utf-8")
    section = page[page.index("## Grammar round trip"):]
    by_type: Counter[str] = Counter()
    for op in reference().data["ops"]:
        by_type.update(unmodeled_types(op))
    stated = dict(re.findall(r"^- (\w+): (\d+) ops$", section, re.M))
    assert stated == {t: str(n) for t, n in by_type.items()}, (stated, dict(by_type))
    assert f"({len(reference().data['ops'])} ops," in section
