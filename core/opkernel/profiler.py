"""``ok.profile()`` and ``ok.explain()``: what ran, how long it took, and why that kernel."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from . import engine, kernels
from .kernels import GENERIC, KernelDef

__all__ = ["Profile", "profile", "Explanation", "explain"]


@dataclass
class OpStats:
    count: int = 0
    seconds: float = 0.0
    bytes_allocated: int = 0


@dataclass
class Profile:
    """Per (backend, op): calls, kernel time and bytes of outputs allocated.

    With ``synchronize=True`` (the default) the device is synchronised around
    every op, so times on asynchronous backends are kernel times, not enqueue
    times — and the profiled program runs slower than an unprofiled one.

    ``fallbacks`` counts the calls made in the block that ran on a fallback
    backend (``ok.config.kernel_fallback``), by (op, from backend, to backend);
    their times, in the row of the backend they were called on, include the
    copies to the fallback backend and back.
    """

    synchronize: bool = True
    stats: dict[tuple[str, str], OpStats] = field(default_factory=dict)
    fallbacks: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def add(self, backend: str, op: str, seconds: float, nbytes: int) -> None:
        s = self.stats.setdefault((backend, op), OpStats())
        s.count += 1
        s.seconds += seconds
        s.bytes_allocated += nbytes

    def add_fallback(self, op: str, source: str, target: str) -> None:
        key = (op, source, target)
        self.fallbacks[key] = self.fallbacks.get(key, 0) + 1

    def rows(self) -> list[tuple[str, str, int, float, int]]:
        """(backend, op, calls, seconds, bytes), most time first."""
        return sorted(
            ((b, o, s.count, s.seconds, s.bytes_allocated) for (b, o), s in self.stats.items()),
            key=lambda r: -r[3],
        )

    def __str__(self) -> str:
        rows = self.rows()
        total = sum(r[3] for r in rows) or 1.0
        lines = [f"{'backend':<8} {'op':<32} {'calls':>8} {'time':>10} {'%':>6} {'per call':>10} {'allocated':>12}"]
        for b, o, n, sec, nbytes in rows:
            lines.append(
                f"{b:<8} {o:<32} {n:>8} {sec * 1e3:>8.3f}ms {100 * sec / total:>5.1f}% "
                f"{sec / n * 1e6:>8.1f}µs {nbytes / 2**20:>10.2f}MB"
            )
        if self.fallbacks:
            lines.append("kernel fallbacks (no kernel on the backend called; ran on another, inputs and outputs copied):")
            for (op, source, target), n in sorted(self.fallbacks.items(), key=lambda kv: (-kv[1], kv[0])):
                lines.append(f"  {op:<32} {source} -> {target}: {n} calls")
        return "\n".join(lines)


@contextmanager
def profile(synchronize: bool = True) -> Iterator[Profile]:
    """Record every op call made in the block (in any thread): ``print(p)`` shows the table."""
    prof = Profile(synchronize=synchronize)
    with engine.profiling(prof):
        yield prof


@dataclass
class Explanation:
    """Which kernel a call would run on the active backend, and why the others would not."""

    op: str
    backend: str
    attrs: dict[str, Any]
    label: str | None
    chosen: KernelDef | None
    considered: list[tuple[KernelDef, str]]
    error: str | None = None
    #: Where the call runs instead when no kernel of the backend matches and a
    #: kernel fallback is in effect (``ok.config.kernel_fallback``): (backend, kernel).
    fallback: tuple[str, KernelDef] | None = None

    def __str__(self) -> str:
        types = ", ".join(f"{k}={engine.format_attr(v)}" for k, v in sorted(self.attrs.items()))
        lines = [f"op {self.op!r} on backend {self.backend!r} with {types or 'no attrs'}"
                 + (f", kernel label {self.label!r}" if self.label else "")]
        for k, verdict in self.considered:
            where = "generic (*)" if k.is_generic else k.backend
            lines.append(f"  {'->' if k is self.chosen else '  '} {where:<12} priority {k.priority:<3} "
                         f"{k.describe_constraints():<40} from {k.provider}: {verdict}")
        if self.fallback is not None:
            name, k = self.fallback
            lines.append(f"  falls back to {name!r} (ok.config.kernel_fallback): its kernel from {k.provider} "
                         f"runs there, the inputs copied there and the outputs back")
        elif self.chosen is None:
            lines.append(f"  no kernel runs: {self.error}")
        return "\n".join(lines)


def _verdict(k: KernelDef, attrs: dict[str, Any], label: str | None, chosen: KernelDef | None) -> str:
    if k.label != label:
        return f"skipped: label {k.label!r}, call asks for {label!r}"
    if not k.matches(attrs):
        return "skipped: type constraints do not match"
    if chosen is k:
        return "runs" + (" (no kernel of the backend's own matches)" if k.is_generic else "")
    return "matches, but a kernel above it wins" if chosen is not None else "matches"


def explain(op_name: str, *inputs: Any, _kernel: str | None = None, **attrs: Any) -> Explanation:
    """Say which kernel ``ok.execute(op_name, *inputs, **attrs)`` would run on the
    active backend and why: backend, type constraints, label, priority, generic
    fallback.  Nothing runs."""
    handle = engine.op_handle(op_name)
    be = engine.active_backend()
    label = _kernel
    if label is None:
        label = engine.label_for(op_name)
    _, bound = engine.bind(handle.op_def, inputs, attrs, be)
    type_attrs = {k: v for k, v in bound.items() if handle.op_def.attr(k).type in ("type", "list(type)")}
    candidates = kernels.kernels_for(op_name, be.name) + kernels.kernels_for(op_name, GENERIC)
    chosen: KernelDef | None = None
    error = None
    try:
        chosen = engine.select_kernel(handle.op_def, be.name, bound, label)
    except LookupError as e:
        error = str(e)
    considered = [(k, _verdict(k, bound, label, chosen)) for k in candidates]
    fallback = None
    if chosen is None:
        for name in engine.config.kernel_fallback:
            if name != be.name:
                try:
                    engine.backend_instance(name)  # the call skips a backend unavailable here
                    fallback = (name, engine.select_kernel(handle.op_def, name, bound, label))
                    break
                except LookupError:
                    continue
    return Explanation(op_name, be.name, type_attrs, label, chosen, considered, error, fallback)
