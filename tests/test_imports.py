"""Every core module imports cleanly on its own, with no backend and warnings as errors.

Each check runs in a fresh interpreter, so nothing this test process has
imported already can hide a missing import or an import-time side effect.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

BACKEND_LIBRARIES = ("cupy", "pyopencl", "opkernel_cpu", "opkernel_opencl", "opkernel_cuda")

WALK_ALL_MODULES = """
import importlib, json, pkgutil, sys
import opkernel
names, errors = [], {}
for info in pkgutil.walk_packages(opkernel.__path__, prefix="opkernel."):
    if info.name == "opkernel.__main__":  # running it is the CLI; cli.py holds the code
        continue
    try:
        importlib.import_module(info.name)
        names.append(info.name)
    except Exception as e:
        errors[info.name] = f"{type(e).__name__}: {e}"
import opkernel.plugins as p
print(json.dumps({"modules": names, "errors": errors, "loaded": p._loaded,
                  "imported": sorted(m for m in sys.modules if m.split(".")[0] in %r)}))
"""


def run_python(code: str, *, autoload: bool = False) -> object:
    """Run ``code`` in a fresh interpreter with ``-W error``; its last stdout line, as JSON."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPKERNEL_", "PYTHONWARNINGS"))}
    if not autoload:
        env["OPKERNEL_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    if out.returncode != 0:
        pytest.fail(f"subprocess failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def walked() -> dict[str, Any]:
    """Import every module of the core, one interpreter, no plugins, ``-W error``."""
    result = run_python(WALK_ALL_MODULES % (BACKEND_LIBRARIES,))
    assert isinstance(result, dict)
    return result


def test_every_core_module_imports_with_warnings_as_errors(walked: dict[str, Any]) -> None:
    assert walked["errors"] == {}
    for expected in ("opkernel.engine", "opkernel.plugins", "opkernel.ops", "opkernel.testing", "opkernel.cli"):
        assert expected in walked["modules"]
    assert walked["imported"] == [], "importing core modules must not import a backend"


def test_importing_core_modules_does_not_discover_plugins(walked: dict[str, Any]) -> None:
    assert walked["loaded"] is False


def test_import_opkernel_imports_no_backend() -> None:
    code = (
        "import json, sys, opkernel\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {BACKEND_LIBRARIES!r})))"
    )
    assert run_python(code, autoload=True) == []  # plugins are installed, but not imported


def test_core_modules_do_not_name_a_plugin() -> None:
    """The core never imports a plugin by name (DESIGN.md): grep its sources."""
    import opkernel

    root = os.path.dirname(opkernel.__file__)
    offenders = []
    for folder, _, files in os.walk(root):
        for filename in files:
            if not filename.endswith(".py"):
                continue
            path = os.path.join(folder, filename)
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    stripped = line.strip()
                    if stripped.startswith(("import ", "from ")) and any(lib in stripped for lib in BACKEND_LIBRARIES):
                        offenders.append(f"{os.path.relpath(path, root)}:{lineno}: {stripped}")
    assert offenders == []
