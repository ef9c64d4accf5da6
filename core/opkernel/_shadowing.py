"""Whether an imported module is the one its distribution installed: a file of the same
name earlier on ``sys.path`` (the current directory, which ``python -c`` and the REPL
search first) can shadow an installed plugin or op library, and neither is loaded then."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["shadowed_by"]


def shadowed_by(module_name: str, origin: str, dist: Any) -> str | None:
    """Why ``module_name``, imported from ``origin``, is not ``dist``'s own module, or None."""
    try:
        files = dist.files
    except Exception:  # unreadable RECORD: nothing to compare against
        return None
    rel = module_name.replace(".", "/")
    wanted = {f"{rel}.py", f"{rel}/__init__.py"}
    installed = [Path(str(dist.locate_file(f))) for f in files or () if str(f).replace("\\", "/") in wanted]
    here = Path(origin).resolve()
    if not installed:  # an editable install lists no module file: its project directory must hold it
        root = _editable_root(dist)
        if root is None or here.is_relative_to(root):
            return None
        return (
            f"module {module_name!r} was imported from {str(here)!r}, not from the editable install of "
            f"{dist.name} {dist.version} (project {str(root)!r}): a file of the same name earlier on sys.path "
            "(e.g. in the current directory, which `python -c` and the REPL search first) shadows the installed "
            "package; not loaded. Rename or move that file, or run from another directory"
        )
    if any(path.resolve() == here for path in installed):
        return None
    return (
        f"module {module_name!r} was imported from {str(here)!r}, not from the distribution "
        f"{dist.name} {dist.version} ({str(installed[0])!r}): a file of the same name earlier on sys.path "
        "(e.g. in the current directory, which `python -c` and the REPL search first) shadows the installed "
        "package; not loaded. "
        "Rename or move that file, or run from another directory"
    )


def _editable_root(dist: Any) -> Path | None:
    """The project directory of an editable install (PEP 610's direct_url.json), or None."""
    try:
        text = dist.read_text("direct_url.json")
        if not text:
            return None
        import json
        from urllib.parse import unquote, urlparse

        data = json.loads(text)
        if not (isinstance(data, dict) and isinstance(data.get("dir_info"), dict) and data["dir_info"].get("editable")):
            return None
        url = urlparse(str(data.get("url", "")))
        if url.scheme != "file":
            return None
        return Path(unquote(url.path)).resolve()
    except Exception:  # unreadable metadata: nothing to compare against
        return None
