"""Run code that could crash or hang in a child process, so a segfault or a hang fails
one named test with the signal or the timeout instead of killing the whole run.

    from isolated import run_isolated
    out = run_isolated("import opkernel as ok; print(ok.ops.add(1, 2).numpy())", backend="cpu")
    assert out.stdout.strip() == "3"

``run_isolated`` fails the calling test (``pytest.fail``) when the child is killed by a
signal, runs past ``timeout`` or, with ``check=True`` (the default), exits non-zero; the
message names ``what`` (the op or case under test), the signal and the child's stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


#: Settings a child keeps: which device a backend uses is a fact of the run (the Makefile runs
#: the OpenCL tests once per working OpenCL device), not a setting under test.
KEPT = ("OPKERNEL_OPENCL_DEVICE", "OPKERNEL_CUDA_DEVICE")


def child_env(backend: str | None = None, **env: str) -> dict[str, str]:
    """The environment for a child: this one without any OPKERNEL_* setting but the device
    choices (``KEPT``), plus ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPKERNEL_") or k in KEPT}
    if backend is not None:
        clean["OPKERNEL_BACKEND"] = backend
    clean.update(env)
    return clean


def run_isolated(
    code: str,
    *,
    backend: str | None = None,
    timeout: float = 120,
    check: bool = True,
    what: str = "",
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with ``python -c`` in a fresh process; fail the test on a crash or hang."""
    label = f" ({what})" if what else ""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=child_env(backend, **(env or {})),
            cwd=str(cwd or TESTS),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-2000:]
        pytest.fail(f"child process hung{label}: no exit within {timeout:g} s; stderr tail: {tail!r}")
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        pytest.fail(f"child process crashed{label} with {name}; stderr:\n{done.stderr[-4000:]}")
    if check and done.returncode != 0:
        pytest.fail(f"child process failed{label} (exit {done.returncode}); stderr:\n{done.stderr[-4000:]}")
    return done
