"""The ``opkernel`` command (also ``python -m opkernel``).

    opkernel info                         version, plugins, backends, overrides, plugin errors
    opkernel kernels [--op N] [--backend B]  op x backend x type constraints, gradients, providers
    opkernel compat OLD.json NEW.json      is the new OpDef compatible? (exit status 1 when breaking,
                                          2 when a file is unreadable or not well-formed op definitions)
    opkernel inspect PATH                 a saved graph's ops and packages: installed? compatible?
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import __version__, engine, gradients, hookspecs, kernels, op_registry, plugins


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


def cmd_info(args: argparse.Namespace) -> int:
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
    overrides = plugins.overrides()
    if overrides:  # a plugin replacing another distribution's kernel or backend is never silent
        _table(
            "Overrides (override=True)",
            ["replaced", "by", "instead of"],
            [[o.what, str(o.provider), str(o.overridden)] for o in overrides],
        )
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
    rows = []
    for k in sorted(kernels.all_kernels(), key=lambda k: (k.op, k.backend, -k.priority)):
        if args.op and k.op != args.op:
            continue
        if args.backend and k.backend not in (args.backend, kernels.GENERIC):
            continue
        grad = "yes" if gradients.has_gradient(k.op) else ("none (not differentiable)" if gradients.is_not_differentiable(k.op) else "-")
        rows.append([k.op, k.backend, k.describe_constraints(), k.label or "", str(k.priority), grad, str(k.provider)])
    if args.op and not rows:
        if not op_registry.is_registered(args.op):
            print(f"unknown op {args.op!r}", file=sys.stderr)
            return 1
        rows.append([args.op, "-", "no kernels", "", "", "", ""])
    _table("Kernels", ["op", "backend", "types", "label", "priority", "gradient", "provider"], rows)
    return 0


def cmd_compat(args: argparse.Namespace) -> int:
    from . import compat

    try:
        reports = compat.compare(compat.load_ops(args.old), compat.load_ops(args.new))
    except (OSError, ValueError) as e:  # OpSpecError: not JSON, or not well-formed op definitions
        print(f"opkernel compat: cannot read the OpDefs: {e}", file=sys.stderr)
        return compat.EXIT_BAD_INPUT
    compat.print_reports(reports, quiet_unchanged=False)
    return compat.EXIT_COMPATIBLE if all(r.compatible for r in reports) else compat.EXIT_BREAKING


def cmd_inspect(args: argparse.Namespace) -> int:
    from . import saving

    return saving.inspect_main(args.path, _table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="opkernel", description="Inspect installed opkernel plugins, backends and kernels.")
    parser.add_argument("--version", action="version", version=f"opkernel {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, plugins, backends and their availability, plugin errors").set_defaults(fn=cmd_info)
    k = sub.add_parser("kernels", help="table of registered kernels: op x backend x type constraints")
    k.add_argument("--op", help="only this op")
    k.add_argument("--backend", help="only this backend (generic kernels are always shown)")
    k.set_defaults(fn=cmd_kernels)
    c = sub.add_parser(
        "compat",
        help="compare two versions of op definitions with TensorFlow's compatibility rules; exit status 1 when a change breaks",
        description="Each file holds one OpDef (OpDef.to_dict() as JSON), a list of them, or a snapshot written by "
        "'python -m opkernel.compat --update-snapshot'.",
        # The exit statuses, as in compat.EXIT_STATUS_HELP (not imported here: the CLI starts without compat).
        epilog="exit status: 0 every change is compatible; 1 a change breaks existing callers; 2 a file cannot be "
        "read, is not JSON or does not hold well-formed op definitions (or the command line is wrong)",
    )
    c.add_argument("old", help="the released definitions (JSON)")
    c.add_argument("new", help="the new definitions (JSON)")
    c.set_defaults(fn=cmd_compat)
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
