"""The suite's state shared by its conftest and test modules: the cases, the reference,
the outcomes counted for the summary.  (A module of its own: test modules cannot import
``conftest`` by name, which tests/conftest.py also is.)"""

from __future__ import annotations

import importlib
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from case import Case  # noqa: E402

@dataclass
class Suite:
    """Every family's cases, deliberate differences and exemptions, as the modules give them."""

    cases: dict[str, tuple[str, Case]] = field(default_factory=dict)      # id -> (family, case)
    duplicates: list[str] = field(default_factory=list)
    differences: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (family, reason)
    exempt: dict[str, tuple[str, str]] = field(default_factory=dict)       # op -> (family, reason)
    module_errors: dict[str, str] = field(default_factory=dict)            # family -> traceback
    #: Ids of cases from a family's composed_cases(): ops TensorFlow does not expose by
    #: name (EXEMPT from the per-op comparison), compared with a TensorFlow composition.
    composed: set[str] = field(default_factory=set)

    def difference(self, case: Case) -> str | None:
        """The reviewed reason this case deliberately differs from TensorFlow, if listed."""
        hit = self.differences.get(case.id) or self.differences.get(case.op)
        return hit[1] if hit else None


def families() -> list[str]:
    return sorted(p.stem[len("cases_"):] for p in HERE.glob("cases_*.py"))


_SUITE: Suite | None = None


def suite() -> Suite:
    global _SUITE
    if _SUITE is None:
        s = Suite()
        for family in families():
            try:
                module = importlib.import_module(f"cases_{family}")
                cases = list(module.cases())
                composed = list(module.composed_cases()) if hasattr(module, "composed_cases") else []
                differences = dict(getattr(module, "DIFFERENCES"))
                exempt = dict(getattr(module, "EXEMPT"))
            except Exception:  # noqa: BLE001 - test_tf_coverage fails naming the module
                s.module_errors[family] = traceback.format_exc(limit=6)
                continue
            for c in cases + composed:
                if c.id in s.cases:
                    s.duplicates.append(f"{c.id} (cases_{s.cases[c.id][0]}.py and cases_{family}.py)")
                else:
                    s.cases[c.id] = (family, c)
            s.composed.update(c.id for c in composed)
            s.differences.update({k: (family, v) for k, v in differences.items()})
            s.exempt.update({k: (family, v) for k, v in exempt.items()})
        _SUITE = s
    return _SUITE


@dataclass
class Reference:
    source: str                                   # what the summary says about where it came from
    families: dict[str, dict[str, Any]]
    selftest: dict[str, dict[str, Any]] | None = None   # SELFTEST_TABLES' recording, when recorded now

    def entry(self, case_id: str) -> dict[str, Any] | None:
        for doc in self.families.values():
            if case_id in doc["cases"]:
                return doc["cases"][case_id]  # type: ignore[no-any-return]
        return None


#: Case tables the recorder must survive, recorded next to the real ones whenever the
#: reference is recorded afresh (one TensorFlow start for both); test_tf_compare checks
#: that each broken table or case is recorded as such and the others still are.
SELFTEST_TABLES = {
    "broken": "raise RuntimeError('this table is broken')\n",
    "odd": """
import numpy as np
from case import Case
DIFFERENCES = {}
EXEMPT = {}
def cases():
    x = np.ones(3, np.float32)
    return [
        Case("Add/fine", "Add", (x, x), grad=True),
        Case("Add/one_input", "Add", (x,)),
        Case("NoSuchOp/x", "NoSuchOp", (x,)),
        Case("Add/int_grad", "Add", (np.ones(2, np.int32), np.ones(2, np.int32)), grad=True),
        Case("MatMul/rejected", "MatMul", (x, x)),
    ]
""",
}


def record_fresh(out: Path, selftest: Path) -> None:
    """Run record.py in a child process on the suite's tables (into ``out``) and on
    SELFTEST_TABLES (into ``selftest/out``); a crash, hang or failure fails the caller."""
    from isolated import run_isolated

    for family, text in SELFTEST_TABLES.items():
        (selftest / f"cases_{family}.py").write_text(text)
    code = (
        f"import runpy; main = runpy.run_path({str(HERE / 'record.py')!r}, run_name='record')['main']; "
        f"main(['--out', {str(out)!r}]); "
        f"main(['--out', {str(selftest / 'out')!r}, '--cases-dir', {str(selftest)!r}])"
    )
    run_isolated(code, timeout=600, what="record.py (TensorFlow reference)")


#: (backend, case id) -> outcome: "agrees", "difference", "missing kernel", "failed".
OUTCOMES: dict[tuple[str, str], str] = {}


DOC = HERE.parents[1] / "docs" / "conformance.md"
DIFFERENCES_START, DIFFERENCES_END = "<!-- differences:start -->", "<!-- differences:end -->"


def differences_markdown() -> str:
    """The deliberate differences and exemptions, as docs/conformance.md lists them."""
    s = suite()
    lines = ["| case or op | family | why opkernel differs from TensorFlow |", "|---|---|---|"]
    for key, (family, why) in sorted(s.differences.items(), key=lambda kv: (kv[1][0], kv[0])):
        lines.append(f"| `{key}` | {family} | {' '.join(why.split()).replace('|', '/')} |")
    lines += ["", "Ops without a per-op comparison (EXEMPT):", "",
              "| op | family | why |", "|---|---|---|"]
    for key, (family, why) in sorted(s.exempt.items(), key=lambda kv: (kv[1][0], kv[0])):
        lines.append(f"| `{key}` | {family} | {' '.join(why.split()).replace('|', '/')} |")
    return "\n".join(lines)


def documented_section() -> str:
    text = DOC.read_text()
    start, end = text.find(DIFFERENCES_START), text.find(DIFFERENCES_END)
    return text[start + len(DIFFERENCES_START):end] if 0 <= start < end else ""


def write_documented_section() -> None:
    """Replace the list in docs/conformance.md with the families' current one."""
    text = DOC.read_text()
    start, end = text.index(DIFFERENCES_START), text.index(DIFFERENCES_END)
    DOC.write_text(text[:start + len(DIFFERENCES_START)] + "\n" + differences_markdown() + "\n" + text[end:])


SUMMARY_START, SUMMARY_END = "<!-- summary:start -->", "<!-- summary:end -->"


def write_summary(lines: list[str], command: str) -> None:
    """Put a run's summary in docs/conformance.md's "Last run" section, with its date and command."""
    import datetime

    text = DOC.read_text()
    start, end = text.index(SUMMARY_START), text.index(SUMMARY_END)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    block = [f"{when}, `{command}` (OPKERNEL_TF_WRITE_SUMMARY=1 writes this section):", "", "```text", *lines, "```"]
    DOC.write_text(text[:start + len(SUMMARY_START)] + "\n" + "\n".join(block) + "\n" + text[end:])


if __name__ == "__main__":
    # .venv/bin/python tests/tf_conformance/tf_suite.py --write-docs
    if sys.argv[1:] == ["--write-docs"]:
        write_documented_section()
    else:
        print(differences_markdown())
