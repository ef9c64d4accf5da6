"""The bad-input sweep (issue 28): every op wrapper in ``opkernel.ops``, on every backend,
called with each class of bad input that tests/sweep_cases.py builds from a valid call.

The cases of one (backend, op group) run in one child process (tests/isolated.py), which
writes a JSON line per case.  A crash or hang names the case it stopped in (each case
writes a ``start`` line first); that case is rerun alone to confirm it, and the group
goes on in a fresh child from the next case.  A test fails on:

* a crash (signal) or hang (timeout), naming op, case and backend;
* a raw exception: anything not from ``opkernel.errors``, except what ``ALLOWED`` names;
  an ``InternalError`` or ``PluginError``; an error of the call that does not name the op;
* a mutated input, a half-applied update (a Variable changed by a call that failed), an
  output that still reads a caller's buffer;
* a layout variant (byte-swapped, unaligned, non-contiguous) whose answer differs from
  the base call's, and a base call that fails;
* two backends that disagree: both succeed with values beyond tolerance, or one succeeds
  where the other raises (unless ``ALLOWED`` names it).

At the end of the module a summary (cases, ops, outcomes per backend) is printed; its
figures are the ones docs/reliability.md quotes.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import opkernel as ok
import sweep_cases
from isolated import run_isolated
from opkernel.errors import InvalidArgumentError, OpkernelError

GROUPS = list(sweep_cases.GROUPS)
# A child runs a whole group; past this it is taken for hung.  A case alone gets less.
GROUP_TIMEOUT = 300.0
CASE_TIMEOUT = 60.0

_CHILD = """
import warnings
warnings.simplefilter("ignore")
import sweep_cases
sweep_cases.{fn}({group!r}, {index}, {path!r})
"""


@dataclass(frozen=True)
class Allowance:
    """One reviewed exception to the sweep's rules: what it matches and why it is fine."""

    name: str
    reason: str
    matches: Callable[[dict[str, Any]], bool]


# The one list of excused outcomes.  Each entry needs a reason a reviewer agrees with;
# an outcome no entry matches fails the sweep.
ALLOWED = [
    Allowance(
        "wrong-python-argument",
        "a TypeError for a wrong Python argument (None or a ragged list for a tensor, a missing "
        "or extra positional argument, an unknown keyword) is Python's own answer, as issue 28 defines it",
        lambda r: r["kind"] == "pyarg" and r["outcome"] == "raw" and bool(r.get("type_error")),
    ),
]

# Errors that mean "this backend does not do that", not "that input is bad": a case that
# succeeds on one backend and raises one of these on another is a coverage gap
# (docs/index.md's kernel coverage), not a disagreement.
COVERAGE_ERRORS = {"KernelNotFoundError"}


def _coverage_gap(record: dict[str, Any]) -> bool:
    """A missing kernel, or a backend that holds no tensors of the input's dtype (strings
    on cuda, docs/cuda.md): what a backend covers, not a wrong answer."""
    return record.get("type") in COVERAGE_ERRORS or (
        record.get("type") == "OpTypeError" and "cannot hold arrays of dtype" in record.get("message", "")
    )


# Errors from opkernel.errors that still mean the library broke its word.
BROKEN_PROMISES = {"InternalError", "PluginError"}


def allowance(record: dict[str, Any]) -> Allowance | None:
    return next((a for a in ALLOWED if a.matches(record)), None)


# ---------------------------------------------------------------- running the children

_RESULTS: dict[tuple[str, str], list[dict[str, Any]]] = {}
_SECONDS: dict[str, float] = Counter()
# Children run two at a time (CI machines have two cores): the tests then wait on what
# was started for them when the module's first test asked (see ``_jobs``).
WORKERS = min(2, os.cpu_count() or 1)
_POOL: ThreadPoolExecutor | None = None
_JOBS: dict[tuple[str, str], Future[list[dict[str, Any]]]] = {}
_LOCK = threading.Lock()


def _child(fn: str, group: str, index: int, path: Path, backend: str, timeout: float) -> str | None:
    """Run ``sweep_cases.fn`` in a child; None, or how it died (signal, timeout, exit)."""
    code = _CHILD.format(fn=fn, group=group, index=index, path=str(path))
    try:
        run_isolated(code, backend=backend, timeout=timeout, what=f"sweep {group} on {backend}",
                     env={"OPKERNEL_STRICT_PLUGINS": "1"})
    except pytest.fail.Exception as e:
        return str(e)
    return None


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# Under pytest-xdist every worker collects every test, so each would sweep every group:
# the sweeps are shared through the session's temporary root instead.  A worker claims a
# sweep by creating its lock file; the claimant writes the records there, and another
# worker whose test needs them waits for that file (or, past the deadline, sweeps itself).
_SHARED: Path | None = None


def _shared_file(key: tuple[str, str], suffix: str) -> Path | None:
    return None if _SHARED is None else _SHARED / f"sweep-{key[0]}-{key[1]}.{suffix}"


def _claimed_sweep(backend: str, group: str) -> list[dict[str, Any]] | None:
    """The sweep, if this worker claims it (None: another worker has).  A claimant that
    fails removes its lock, so that a waiting worker claims the sweep in its turn."""
    lock, done = _shared_file((backend, group), "lock"), _shared_file((backend, group), "json")
    if lock is None or done is None:
        return _sweep(backend, group)
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return None
    try:
        records = _sweep(backend, group)
        partial = done.with_suffix(".partial")
        partial.write_text(json.dumps(records), encoding="utf-8")
        partial.replace(done)  # whole or absent to a reader
    except BaseException:
        lock.unlink(missing_ok=True)
        raise
    return records


def _shared_records(key: tuple[str, str]) -> list[dict[str, Any]]:
    """Another worker's sweep of ``key``: read once it is written, or swept here if its
    claimant gave it up (its lock removed) or it never comes (a claimant killed)."""
    done, lock = _shared_file(key, "json"), _shared_file(key, "lock")
    assert done is not None and lock is not None
    deadline = time.monotonic() + 3 * GROUP_TIMEOUT
    while time.monotonic() < deadline:
        if done.exists():
            records: list[dict[str, Any]] = json.loads(done.read_text(encoding="utf-8"))
            _RESULTS[key] = records
            return records
        if not lock.exists():
            mine = _claimed_sweep(*key)
            if mine is not None:
                return mine
        time.sleep(0.2)
    return _sweep(*key)


def start(keys: list[tuple[str, str]]) -> None:
    """Start the sweeps of these (backend, group)s in the background, in this order."""
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="sweep")
        for key in keys:
            if key not in _JOBS:
                _JOBS[key] = _POOL.submit(_claimed_sweep, *key)


def sweep(backend: str, group: str) -> list[dict[str, Any]]:
    """The outcome of every case of ``group`` on ``backend`` (run once per session)."""
    key = (backend, group)
    if key in _RESULTS:  # swept here, or read from another worker's sweep
        return _RESULTS[key]
    start([key])
    records = _JOBS[key].result()
    return records if records is not None else _shared_records(key)


def _sweep(backend: str, group: str, group_timeout: float = GROUP_TIMEOUT, case_timeout: float = CASE_TIMEOUT) -> list[dict[str, Any]]:
    key = (backend, group)
    cases = sweep_cases.group_cases(group)
    records: dict[int, dict[str, Any]] = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opkernel-sweep-") as tmp:
        start = 0
        while start < len(cases):
            path = Path(tmp) / f"{group}-{start}.jsonl"
            died = _child("run_cases", group, start, path, backend, group_timeout)
            lines = _read(path)
            started = [r["start"] for r in lines if "start" in r]
            for r in lines:
                if "outcome" in r:
                    records[r["index"]] = r
            if died is None:
                break
            in_flight = next((i for i in reversed(started) if i not in records), None)
            if in_flight is None:
                # Died outside any case (at start-up, or after the last one).
                at = max(started, default=start - 1) + 1
                if at >= len(cases):
                    break
                in_flight = at
            case = cases[in_flight]
            alone_path = Path(tmp) / f"alone-{in_flight}.jsonl"
            alone = _child("run_one", group, in_flight, alone_path, backend, case_timeout)
            outcome = "hang" if " hung" in died else "crash"
            records[in_flight] = {
                "op": case.op, "case": case.name, "kind": case.kind, "index": in_flight, "outcome": outcome,
                "message": died.splitlines()[0][:300],
                "alone": "also alone: " + alone.splitlines()[0][:200] if alone else "not alone (an earlier case may have corrupted the process)",
            }
            start = in_flight + 1
    _SECONDS[backend] += time.perf_counter() - t0
    out = []
    for i, case in enumerate(cases):
        r = records.get(i) or {"op": case.op, "case": case.name, "kind": case.kind, "index": i, "outcome": "missing"}
        if (r["op"], r["case"]) != (case.op, case.name):
            r = {**r, "outcome": "mismatch", "message": f"child ran {r['op']}/{r['case']} as case {i}, parent expects {case.id}"}
        r["same_as_base"] = case.same_as_base
        out.append(r)
    _RESULTS[key] = out
    return out


# ---------------------------------------------------------------- classification


def _close(a: dict[str, Any], b: dict[str, Any], cross_backend: bool) -> str | None:
    """None if two digests agree, else what differs."""
    if a["dtype"] != b["dtype"] or a["shape"] != b["shape"]:
        return f"{a['dtype']}{a['shape']} vs {b['dtype']}{b['shape']}"
    x, y = np.asarray(a["values"]), np.asarray(b["values"])
    if a["dtype"] in ("float32", "complex64", "float16", "bfloat16"):
        rtol, atol = (1e-4, 1e-5) if cross_backend else (1e-5, 1e-6)
    elif a["dtype"] in ("float64", "complex128"):
        rtol, atol = (1e-9, 1e-12)
    else:
        rtol = atol = 0.0
    if x.dtype.kind not in "fciub":
        return None if np.array_equal(x, y) else "values differ"
    if not np.allclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
        bad = ~np.isclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        return f"values differ at {int(bad.sum())} of {bad.size} (first: {x[bad].reshape(-1)[:3].tolist()} vs {y[bad].reshape(-1)[:3].tolist()})"
    return None


def _outputs_differ(a: dict[str, Any], b: dict[str, Any], cross_backend: bool) -> str | None:
    if len(a["outputs"]) != len(b["outputs"]):
        return f"{len(a['outputs'])} outputs vs {len(b['outputs'])}"
    for k, (x, y) in enumerate(zip(a["outputs"], b["outputs"])):
        diff = _close(x, y, cross_backend)
        if diff:
            return f"output {k}: {diff}"
    return None


def _describe(r: dict[str, Any]) -> str:
    if r["outcome"] == "ok":
        return "ok"
    return f"{r['outcome']} {r.get('type', '')}: {r.get('message', '')}".strip()


def _variant(record: dict[str, Any]) -> str:
    """Which valid call of the op a case perturbs: "" (the first) or its dtype ("int32")."""
    return str(record["case"]).rpartition("|")[0]


def problems(records: list[dict[str, Any]]) -> list[str]:
    """What is wrong in one backend's records of one group (empty: nothing)."""
    base = {(r["op"], _variant(r)): r for r in records if r["case"].rpartition("|")[2] == "base"}
    out = []
    for r in records:
        where = f"{r['op']}/{r['case']}"
        if r["outcome"] in ("crash", "hang"):
            out.append(f"{where}: {r['outcome']}: {r['message']} ({r['alone']})")
        elif r["outcome"] == "sweep_error":
            out.append(f"{where}: the sweep could not build this case: {r['type']}: {r['message']}")
        elif r["outcome"] in ("missing", "mismatch"):
            out.append(f"{where}: {r['outcome']} {r.get('message', '(the child never reported it)')}")
        elif r["outcome"] == "raw" and allowance(r) is None:
            out.append(f"{where}: raw {r['type']}: {r['message']}")
        elif r["outcome"] == "error" and r["type"] in BROKEN_PROMISES:
            out.append(f"{where}: {r['type']} (a promise broken, not an answer to bad input): {r['message']}")
        elif r["outcome"] == "error" and r.get("stage") == "call" and r["op"] not in r["message"]:
            out.append(f"{where}: the error does not name the op: {r['type']}: {r['message']}")
        if r["kind"] == "base" and r["outcome"] != "ok" and not _coverage_gap(r):
            out.append(f"{where}: the valid base call fails: {_describe(r)}")
        for flag, text in (("mutated", "mutated its input(s)"), ("half_applied", "failed but changed Variable(s)")):
            if r.get(flag):
                out.append(f"{where}: {text} {r[flag]}")
        if r.get("aliases_input"):
            out.append(f"{where}: an output changed when the caller's input array was overwritten after the call")
        of = base.get((r["op"], _variant(r)), {})
        if r["same_as_base"] and of.get("outcome") == "ok":
            if r["outcome"] != "ok":
                out.append(f"{where}: same values as the base call in another layout, but {_describe(r)}")
            else:
                diff = _outputs_differ(r, of, cross_backend=False)
                if diff:
                    out.append(f"{where}: same values as the base call in another layout, different answer: {diff}")
    return out


def disagreements(by_backend: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Cases two backends answer differently: values beyond tolerance, or ok vs error."""
    names = sorted(by_backend)
    out = []
    for i, first in enumerate(by_backend[names[0]]):
        rows = {b: by_backend[b][i] for b in names}
        oks = {b: r for b, r in rows.items() if r["outcome"] == "ok"}
        errs = {b: r for b, r in rows.items() if r["outcome"] in ("error", "raw")}
        where = f"{first['op']}/{first['case']}"
        if oks and errs:
            real = {b: r for b, r in errs.items() if not _coverage_gap(r)}
            if real:
                text = "; ".join(f"{b}: {_describe(r)}" for b, r in sorted(rows.items()))
                out.append(f"{where}: one backend succeeds, another raises: {text}")
        ok_names = sorted(oks)
        for b in ok_names[1:]:
            diff = _outputs_differ(oks[ok_names[0]], oks[b], cross_backend=True)
            if diff:
                out.append(f"{where}: {ok_names[0]} and {b} disagree: {diff}")
    return out


def _report(title: str, lines: list[str], limit: int = 60) -> str:
    shown = "\n  ".join(lines[:limit])
    more = f"\n  ... and {len(lines) - limit} more" if len(lines) > limit else ""
    return f"{title}: {len(lines)} finding(s)\n  {shown}{more}"


# ---------------------------------------------------------------- tests


def _available() -> list[str]:
    return [name for name, _, reason in ok.engine.backend_status() if reason is None]


def test_a_crash_or_a_hang_names_its_case() -> None:
    """The runner itself: a case that kills its child or never returns is named, confirmed
    alone, and the cases after it still run."""
    records = _sweep("cpu", sweep_cases.SELFTEST, group_timeout=8.0, case_timeout=8.0)
    assert [(r["case"], r["outcome"]) for r in records] == [
        ("fine_first", "ok"), ("segfault", "crash"), ("fine_between", "ok"), ("hang", "hang"), ("fine_last", "ok"),
    ]
    assert "SIGSEGV" in records[1]["message"] and records[1]["alone"].startswith("also alone")
    assert "no exit within 8 s" in records[3]["message"] and records[3]["alone"].startswith("also alone")
    assert problems(records) == [
        f"Neg/{name}: {r['outcome']}: {r['message']} ({r['alone']})" for name, r in (("segfault", records[1]), ("hang", records[3]))
    ]
    _RESULTS.pop(("cpu", sweep_cases.SELFTEST))


def _record(case: str, kind: str, outcome: str, **more: Any) -> dict[str, Any]:
    return {"op": "Neg", "case": case, "kind": kind, "outcome": outcome, "same_as_base": kind == "layout", **more}


def _out(*values: float, dtype: str = "float32") -> list[dict[str, Any]]:
    return [{"dtype": dtype, "shape": [len(values)], "values": list(values)}]


def test_the_classification_rules() -> None:
    """What fails the sweep and what does not, on records made by hand."""
    records = [
        _record("base", "base", "ok", outputs=_out(1.0, 2.0)),
        _record("same_layout", "layout", "ok", outputs=_out(1.0, 2.0)),
        _record("other_layout", "layout", "ok", outputs=_out(1.0, 2.5)),
        _record("clean", "shape", "error", type="ShapeError", message="op 'Neg': bad", stage="call"),
        _record("unnamed", "shape", "error", type="InvalidArgumentError", message="bad", stage="call"),
        _record("variable", "pyarg", "error", type="InvalidArgumentError", message="ok.tensor: ragged", stage="inputs"),
        _record("internal", "shape", "error", type="InternalError", message="op 'Neg': broke", stage="call"),
        _record("raw", "shape", "raw", type="ValueError", message="numpy", type_error=False),
        _record("python", "pyarg", "raw", type="TypeError", message="neg() takes 1", type_error=True),
        _record("mutating", "dtype", "error", type="OpTypeError", message="op 'Neg': no", stage="call", mutated=["x"]),
    ]
    found = problems(records)
    assert [line.split(":")[0] for line in found] == [
        "Neg/other_layout", "Neg/unnamed", "Neg/internal", "Neg/raw", "Neg/mutating",
    ], found
    cpu = [_record("a", "shape", "ok", outputs=_out(1.0)), _record("b", "shape", "ok", outputs=_out(1.0)),
           _record("c", "dtype", "ok", outputs=_out(1.0)), _record("d", "nonfinite", "ok", outputs=_out(float("nan"), 1.0))]
    other = [_record("a", "shape", "error", type="InvalidArgumentError", message="op 'Neg': no"),
             _record("b", "shape", "ok", outputs=_out(1.001)),
             _record("c", "dtype", "error", type="KernelNotFoundError", message="op 'Neg': none"),
             _record("d", "nonfinite", "ok", outputs=_out(float("nan"), 1.000001))]
    assert [line.split(":")[0] for line in disagreements({"cpu": cpu, "other": other})] == ["Neg/a", "Neg/b"]


def test_every_op_wrapper_has_a_base_call() -> None:
    """A new op needs a valid call (a row in tests/test_ops_*.py or sweep_cases.EXTRA
    bases) before the sweep can perturb it."""
    table = sweep_cases.bases()
    missing = [op for op in sweep_cases.op_names() if op not in table]
    assert not missing, f"ops without a base call for the bad-input sweep: {missing}"


@pytest.mark.parametrize("group", GROUPS)
def test_sweep(group: str, backend: str) -> None:
    records = sweep(backend, group)
    found = problems(records)
    if found:
        pytest.fail(_report(f"bad-input sweep of {group!r} ops on {backend!r}", found), pytrace=False)


@pytest.mark.parametrize("group", GROUPS)
def test_backends_agree(group: str, request: pytest.FixtureRequest) -> None:
    names = _available()
    if len(names) < 2:
        pytest.skip(f"one backend available ({names}): nothing to compare")
    found = disagreements({b: sweep(b, group) for b in names})
    if found:
        pytest.fail(_report(f"backends {names} disagree on {group!r} ops", found), pytrace=False)


def summary() -> list[str]:
    """Per backend: cases, ops, outcomes."""
    lines = []
    for backend in sorted({b for b, _ in _RESULTS}):
        records = [r for (b, _), rs in _RESULTS.items() if b == backend for r in rs]
        outcomes: Counter[str] = Counter()
        for r in records:
            if r["outcome"] == "raw" and allowance(r) is not None:
                outcomes[f"excused ({allowance(r).name})"] += 1  # type: ignore[union-attr]
            else:
                outcomes["clean error" if r["outcome"] == "error" else r["outcome"]] += 1
        kinds = Counter(r["kind"] for r in records)
        no_kernel = sorted(
            f"{r['op']}{'(' + _variant(r) + ')' if _variant(r) else ''}"
            for r in records if r["case"].rpartition("|")[2] == "base" and r.get("type") in COVERAGE_ERRORS
        )
        groups = sorted(g for b, g in _RESULTS if b == backend)
        lines.append(
            f"{backend}: {len(records)} cases, {len({r['op'] for r in records})} ops ({', '.join(groups)}), "
            f"{_SECONDS[backend]:.1f} s; outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        )
        if no_kernel:
            lines.append(f"{backend}: no kernel for the base call (a coverage gap, not a finding): {', '.join(no_kernel)}")
        lines.append(f"{backend}: cases by class: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
        found = [p for (b, g), rs in _RESULTS.items() if b == backend for p in problems(rs)]
        lines.append(f"{backend}: findings: {len(found)}")
    return lines


@pytest.fixture(scope="module", autouse=True)
def _jobs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Start every sweep the selected tests need, slowest backends first, and print the
    summary when the module is done."""
    global _SHARED, _POOL
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' temporary dirs share this session's root
        _SHARED = tmp_path_factory.getbasetemp().parent
    available = _available()
    wanted: list[tuple[str, str]] = []
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        if item.module is not request.module or spec is None or "group" not in spec.params:
            continue
        group = spec.params["group"]
        backends = [spec.params["backend"]] if "backend" in spec.params else available
        wanted += [(b, group) for b in backends if b in available]
    # Device backends compile their kernels in each child: start those first.
    order = sorted(dict.fromkeys(wanted), key=lambda k: (k[0] == "cpu", GROUPS.index(k[1])))
    start(order)
    yield
    if _POOL is not None:
        _POOL.shutdown(wait=True, cancel_futures=True)
        _POOL = None  # the module may come back to this worker later: a new pool then
        for key in [k for k, f in _JOBS.items() if f.cancelled()]:
            del _JOBS[key]
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or not _RESULTS:
        return
    with capture.global_and_fixture_disabled():  # teardown output is captured otherwise
        reporter.write_line("")
        reporter.write_sep("-", "bad-input sweep summary")
        for line in summary():
            reporter.write_line(line)


# ---------------------------------------------------------------- regressions the sweep found


def test_elementwise_kernels_take_0d_tensors(backend: str) -> None:
    """The cpu Rsqrt and ClipByValue wrote their answer into what numpy gives for a 0-d
    input, a scalar, and raised a raw TypeError."""
    x = ok.tensor(np.array(4.0, np.float32))
    root = ok.ops.rsqrt(x)
    assert root.shape == () and root.numpy() == np.float32(0.5)
    low, high = ok.tensor(np.array(0.0, np.float32)), ok.tensor(np.array(3.0, np.float32))
    clipped = ok.ops.clip_by_value(x, low, high)
    assert clipped.shape == () and clipped.numpy() == np.float32(3.0)


CONV = {"strides": [1, 1, 1, 1], "padding": "VALID"}


@pytest.mark.parametrize("f_shape", [(0, 1, 2, 3), (1, 0, 2, 3)], ids=["no_rows", "no_columns"])
def test_conv2d_refuses_a_filter_with_an_empty_window(f_shape: tuple[int, ...], backend: str) -> None:
    """A 0-high or 0-wide filter gave OpenCL a made-up output size (5 rows from 4) and
    cpu an error from inside im2col; now every backend refuses it as TensorFlow does."""
    x = np.ones((1, 4, 4, 2), np.float32)
    w = np.ones(f_shape, np.float32)
    with pytest.raises(InvalidArgumentError, match="filter's spatial size must be > 0, got 0"):
        ok.ops.conv2d(x, w, **CONV)
    with pytest.raises(InvalidArgumentError, match="filter's spatial size must be > 0, got 0"):
        ok.ops.fused_conv2d(x, w, np.ones(3, np.float32), **CONV)
    with pytest.raises(InvalidArgumentError, match="filter's spatial size must be > 0, got 0"):
        ok.ops.conv2d_backprop_input(np.array([1, 4, 4, 2], np.int32), w, np.ones((1, 4, 4, 3), np.float32), **CONV)


def test_no_output_channels_give_empty_results(backend: str) -> None:
    """With an empty channel dimension cpu reshaped by ``(-1, 0)`` and raised a numpy
    message; every backend now gives the empty (or zero) answer."""
    x = np.ones((1, 4, 4, 2), np.float32)
    w = np.ones((1, 1, 2, 0), np.float32)
    dy = np.ones((1, 4, 4, 0), np.float32)
    assert ok.ops.conv2d(x, w, **CONV).shape == (1, 4, 4, 0)
    assert ok.ops.bias_add_grad(np.ones((2, 3, 0), np.float32)).shape == (0,)
    assert ok.ops.conv2d_backprop_filter(x, np.array([1, 1, 2, 0], np.int32), dy, **CONV).shape == (1, 1, 2, 0)
    dx = ok.ops.conv2d_backprop_input(np.array([1, 4, 4, 2], np.int32), w, dy, **CONV)
    np.testing.assert_array_equal(dx.numpy(), np.zeros((1, 4, 4, 2), np.float32))


def test_fused_conv2d_errors_name_fused_conv2d(backend: str) -> None:
    """cpu's FusedConv2D ran Conv2D's kernel, whose errors named 'Conv2D'."""
    x = np.ones((1, 4, 4, 2), np.float32)
    bias = np.ones(3, np.float32)
    with pytest.raises(InvalidArgumentError, match=r"^op 'FusedConv2D': input 'filter' must be 4-D"):
        ok.ops.fused_conv2d(x, np.ones((3, 3, 2, 3, 1), np.float32), bias, **CONV)
    with pytest.raises(InvalidArgumentError, match=r"^op 'FusedConv2D': attr 'strides' must be positive"):
        ok.ops.fused_conv2d(x, np.ones((3, 3, 2, 3), np.float32), bias, strides=[0, 0, 0, 0], padding="VALID")


def test_an_error_from_inside_a_kernel_names_the_op(backend: str) -> None:
    """OpenCL's allocation refused a tensor past 2**31 elements without naming the op
    that asked for it; the engine now names the op of any such error."""
    with pytest.raises(OpkernelError) as caught:
        ok.ops.fill(np.array([10**6, 10**6], np.int32), np.float32(1))
    assert caught.value.op == "Fill" and str(caught.value).startswith("op 'Fill': ")


def test_conv2d_of_an_input_with_no_channels(backend: str) -> None:
    """An input depth of 0 made 0 groups of the filter's in_channels, and the check of the
    output depth divided by them (a raw ZeroDivisionError)."""
    with pytest.raises(InvalidArgumentError, match=r"^op 'Conv2D': input depth 0 must equal the filter's in_channels 2"):
        ok.ops.conv2d(np.ones((1, 4, 4, 0), np.float32), np.ones((1, 1, 2, 3), np.float32), **CONV)
