"""The ``opkernel`` command (also ``python -m opkernel``).

    opkernel info [--reprobe]             version, plugins, backends, devices and their probes, overrides, plugin errors
    opkernel kernels [--op N] [--backend B]  op x backend x type constraints, gradients, providers
    opkernel kernels --backend B --gradients  can each gradient run on B, which kernels does it lack
    opkernel compat OLD.json NEW.json      is the new OpDef compatible? (exit status 1 when breaking,
                                          2 when a file is unreadable or not well-formed op definitions)
    opkernel compat --check-snapshot F     compare a plugin's ops (--plugin, default builtin) with a snapshot;
    opkernel compat --update-snapshot F    record them (compatible changes only, unless --force)
    opkernel inspect PATH                 a saved graph's ops and packages: installed? compatible?
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import engine, gradients, hookspecs, kernels, op_registry, plugins
from ._version import __version__


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print a table with rich when it is installed, else as aligned plain text."""
    try:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)] if rows else [len(h) for h in headers]
        print(title)
        for row in [headers, ["-" * w for w in widths], *rows]:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
        print()
        return
    table = Table(title=title, title_justify="left")
    for h in headers:
        table.add_column(h)
    for row in rows:
        table.add_row(*[Text(str(c)) for c in row])  # Text: "[float32]" is data, not rich markup
    Console(width=160).print(table)


def _device_rows() -> list[list[str]]:
    rows = []
    for name, (cls, _) in sorted(plugins.backend_classes().items()):
        try:
            found = cls.devices()
        except Exception as e:  # devices() must not raise; show it if it does
            rows.append([name, "-", "-", "-", "-", f"device report failed: {type(e).__name__}: {e}", ""])
            continue
        for d in found:
            how = "cached" if d.cached else f"probed in {d.seconds:.2f} s"
            probe = f"passed ({how})" if d.reason is None else f"failed ({how}): {d.reason}"
            rows.append([name, d.id, d.name, d.platform, d.kind, probe, "yes" if d.chosen else ""])
    return rows


def cmd_info(args: argparse.Namespace) -> int:
    if args.reprobe:
        from . import probes

        probes.reprobe()
    print(f"opkernel {__version__}  (plugin API {hookspecs.PLUGIN_API_VERSION})\n")
    _table(
        "Plugins",
        ["plugin", "distribution", "version", "module"],
        [[p.name, p.distribution or "-", p.version or "-", p.module] for p in plugins.plugins()],
    )
    rows = []
    active = None
    try:
        active = engine.get_backend()
    except Exception:
        pass
    for name, priority, reason in engine.backend_status():
        details = ""
        if reason is None:
            try:
                details = ", ".join(f"{k}={v}" for k, v in engine.backend_instance(name).describe().items())
            except Exception as e:  # initialisation failure: show it, keep going
                reason = str(e)
        state = "available" + (" (active)" if name == active else "") if reason is None else f"unavailable: {reason}"
        rows.append([name, str(priority), state, details])
    _table("Backends", ["backend", "priority", "status", "details"], rows)
    devices = _device_rows()
    if devices:
        _table("Devices (each proven by a probe: a small program compiled, run and checked there)",
               ["backend", "id", "device", "platform", "kind", "probe", "used"], devices)
    overrides = plugins.overrides()
    if overrides:  # a plugin replacing another distribution's kernel or backend is never silent
        _table(
            "Overrides (override=True)",
            ["replaced", "by", "instead of"],
            [[o.what, str(o.provider), str(o.overridden)] for o in overrides],
        )
    orphans = plugins.unknown_op_kernels()
    if orphans:  # a kernel for an op that does not exist (a misspelt name) is never used
        _table("Kernels for ops that do not exist", ["op", "backend", "provider"], [[k.op, k.backend, str(k.provider)] for k in orphans])
    failures = plugins.plugin_errors()
    if failures:
        _table("Plugin errors", ["plugin", "error"], [[f.plugin, f"{type(f.error).__name__}: {f.error}"] for f in failures])
    return 0


def cmd_kernels(args: argparse.Namespace) -> int:
    plugins.ensure_loaded()
    known = {name for name, _, _ in engine.backend_status()} | {k.backend for k in kernels.all_kernels()}
    if args.backend and args.backend not in known:
        print(f"unknown backend {args.backend!r}; known: {', '.join(sorted(known))}", file=sys.stderr)
        return 1
    if args.gradients:
        return _gradient_coverage(args)
    rows = []
    for k in sorted(kernels.all_kernels(), key=lambda k: (k.op, k.backend, -k.priority)):
        if args.op and k.op != args.op:
            continue
        if args.backend and k.backend not in (args.backend, kernels.GENERIC):
            continue
        grad = "yes" if gradients.has_gradient(k.op) else ("none (not differentiable)" if gradients.is_not_differentiable(k.op) else "-")
        op = k.op if op_registry.is_registered(k.op) else f"{k.op} (no such op: never used)"
        rows.append([op, k.backend, k.describe_constraints(), k.label or "", str(k.priority), grad, str(k.provider)])
    if args.op and not rows:
        if not op_registry.is_registered(args.op):
            print(f"unknown op {args.op!r}", file=sys.stderr)
            return 1
        rows.append([args.op, "-", "no kernels", "", "", "", ""])
    _table("Kernels", ["op", "backend", "types", "label", "priority", "gradient", "provider"], rows)
    return 0


def _gradient_coverage(args: argparse.Namespace) -> int:
    """``kernels --backend B --gradients``: one row per op with a kernel on B; exit status 1
    when a gradient lacks kernels or could not be run."""
    from .testing import gradient_coverage  # runs every gradient once: only on request
    from .testing._coverage import STATUSES

    if not args.backend:
        print("opkernel kernels --gradients: name the backend with --backend NAME", file=sys.stderr)
        return 2
    try:
        report = gradient_coverage(args.backend, [args.op] if args.op else None)
    except ValueError as e:  # InvalidArgumentError: no cpu backend to compute with, unknown op
        print(f"opkernel kernels --gradients: {e}", file=sys.stderr)
        return 2
    rows = [[c.op, c.status, ", ".join(c.missing) or "-", ", ".join(c.transitive) or "-", c.error or ""] for c in report]
    _table(f"Gradient coverage on backend {args.backend!r}", ["op", "gradient", "missing kernels", "needs", "error"], rows)
    lacking = sorted({op for c in report for op in c.missing})
    n = {status: sum(c.status == status for c in report) for status in STATUSES}
    print(f"{len(report)} ops: {n['ok']} gradients run on {args.backend!r}, {n['missing-kernels']} lack kernels, "
          f"{n['error']} could not be run, {n['not-differentiable']} not differentiable, {n['no-gradient']} without a "
          f"gradient; kernels missing: {', '.join(lacking) or 'none'}")
    return 1 if any(c.status in ("missing-kernels", "error") for c in report) else 0


def cmd_compat(argv: Sequence[str]) -> int:
    """``opkernel compat ...``: the arguments go to ``opkernel.compat.main`` as they are."""
    from . import compat

    return compat.main(argv, prog="opkernel compat")


def cmd_inspect(args: argparse.Namespace) -> int:
    from . import saving

    return saving.inspect_main(args.path, _table)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compat"]:  # its own parser, in opkernel.compat (python -m opkernel.compat is the same command)
        return cmd_compat(argv[1:])
    parser = argparse.ArgumentParser(prog="opkernel", description="Inspect installed opkernel plugins, backends and kernels.")
    parser.add_argument("--version", action="version", version=f"opkernel {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser(
        "info", help="version, plugins, backends and their availability, every device and its probe, plugin errors"
    )
    info.add_argument(
        "--reprobe", action="store_true",
        help="probe every device again instead of using the verdicts cached per device fingerprint (and cache the new ones)",
    )
    info.set_defaults(fn=cmd_info)
    k = sub.add_parser("kernels", help="table of registered kernels: op x backend x type constraints")
    k.add_argument("--op", help="only this op")
    k.add_argument("--backend", help="only this backend (generic kernels are always shown)")
    k.add_argument(
        "--gradients", action="store_true",
        help="with --backend: for every op with a kernel there, whether its gradient can run there and which kernels "
        "it lacks (found by running each gradient once); exit status 1 when any lacks kernels",
    )
    k.set_defaults(fn=cmd_kernels)
    # Listed here for --help; main() hands "compat ..." to opkernel.compat's own parser (see
    # 'opkernel compat --help'), which the CLI does not import to start.
    sub.add_parser(
        "compat",
        help="op definitions vs. TensorFlow's compatibility rules: compare OLD.json NEW.json, or --check-snapshot / "
        "--update-snapshot FILE for a plugin's ops; exit status 1 when a change breaks",
    )
    i = sub.add_parser(
        "inspect",
        help="a saved graph's ops, the packages it needs, whether each is installed and compatible",
        epilog="exit status: 0 the graph loads here; 1 an op is missing or changed incompatibly; 2 the file cannot be read",
    )
    i.add_argument("path", help="a file written by ok.save (.okg)")
    i.set_defaults(fn=cmd_inspect)
    args = parser.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    raise SystemExit(main())
