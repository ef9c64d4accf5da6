"""The pytest plugin in a project that is not about opkernel: pytest loads it in every run
where opkernel is installed, so it must leave a project's own ``backend`` alone and add
nothing to a run that uses none of its fixtures or options.  Each suite is written to a
temporary directory and run by a child pytest (its own rootdir, no conftest of ours)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

UNRELATED = {
    "conftest.py": """
        import pytest

        @pytest.fixture
        def backend():  # the project's own fixture of that name: not parametrized by opkernel
            return "sqlite"
    """,
    "test_storage.py": """
        import sys
        import pytest

        @pytest.mark.parametrize("backend", ["memory", "disk"])
        def test_own_parametrization(backend):
            assert backend in ("memory", "disk")

        class TestOwnClassParametrization:
            pytestmark = pytest.mark.parametrize("backend", ["s3"])

            def test_it(self, backend):
                assert backend == "s3"

        def test_own_fixture(backend):
            assert backend == "sqlite"

        def test_opkernel_not_imported_by_the_plugin_beyond_its_package():
            assert not [m for m in sys.modules if m.startswith("opkernel_")], "a backend plugin was imported"
    """,
}

USES_IT = {
    "test_ops.py": """
        import numpy as np
        import pytest
        import opkernel as ok

        def test_on_every_backend(backend):
            assert ok.get_backend() == backend
            np.testing.assert_array_equal(ok.ops.neg([1.0]).numpy(), [-1.0])

        @pytest.mark.opkernel_backends("cpu")
        def test_cpu_only(backend):
            assert backend == "cpu"
    """,
}


def _run(
    tmp_path: Path, files: dict[str, str], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "OPKERNEL_BACKEND", "OPKERNEL_TEST_"))},
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path), *args],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )


def test_an_unrelated_suite_with_its_own_backend_passes_untouched(tmp_path: Path) -> None:
    run = _run(tmp_path, UNRELATED)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "5 passed" in run.stdout, run.stdout
    for test_id in ("test_own_parametrization[memory]", "test_own_parametrization[disk]", "test_it[s3]"):
        assert test_id in run.stdout, run.stdout
    assert "test_own_fixture PASSED" in run.stdout, run.stdout  # not test_own_fixture[cpu]
    assert "opkernel backends" not in run.stdout, run.stdout  # no header line, no backends line
    assert "plugins:" in run.stdout and "opkernel-" in run.stdout, run.stdout  # it was loaded all the same


def test_a_suite_using_the_fixture_gets_every_backend_and_the_backends_line(tmp_path: Path) -> None:
    run = _run(tmp_path, USES_IT, "--opkernel-backends=cpu")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "test_on_every_backend[cpu] PASSED" in run.stdout, run.stdout
    assert "test_cpu_only[cpu] PASSED" in run.stdout and "test_cpu_only[opencl]" not in run.stdout, run.stdout
    assert re.search(r"^opkernel backends: .*cpu \(available\)", run.stdout, re.M), run.stdout


CHOOSES = {
    "test_choice.py": """
        import numpy as np
        import opkernel as ok
        from opkernel.testing import check_op

        def test_on_every_backend(backend):
            assert ok.get_backend() == backend

        def test_check_op_follows_the_choice():
            report = check_op("Neg", [np.array([1.0, -2.0], np.float32)], check_gradients=False, threads=1)
            print("CHECKED", sorted({r.backend for r in report.results if r.backend != "-"}))
    """,
}


def test_a_run_can_choose_its_backends(tmp_path: Path) -> None:
    """--opkernel-only / --opkernel-exclude (and the variables they set): the backends left
    out get no test instances, and check_op leaves them out too."""
    only = _run(tmp_path, CHOOSES, "-s", "--opkernel-only=cpu")
    assert only.returncode == 0, only.stdout + only.stderr
    assert "test_on_every_backend[cpu] PASSED" in only.stdout, only.stdout
    assert "test_on_every_backend[opencl]" not in only.stdout and "CHECKED ['cpu']" in only.stdout, only.stdout
    excluded = _run(tmp_path, CHOOSES, "-s", "--opkernel-exclude=cpu")
    assert excluded.returncode == 0, excluded.stdout + excluded.stderr
    assert "test_on_every_backend[cpu]" not in excluded.stdout, excluded.stdout
    assert "test_on_every_backend[opencl] PASSED" in excluded.stdout, excluded.stdout
    assert "CHECKED ['opencl']" in excluded.stdout, excluded.stdout
    by_variable = _run(tmp_path, CHOOSES, "-s", env={"OPKERNEL_TEST_BACKENDS": "cpu"})
    assert "test_on_every_backend[cpu] PASSED" in by_variable.stdout, by_variable.stdout
    assert "test_on_every_backend[opencl]" not in by_variable.stdout, by_variable.stdout


def test_a_backend_cannot_be_required_and_left_out(tmp_path: Path) -> None:
    run = _run(tmp_path, CHOOSES, "--opkernel-backends=cpu", "--opkernel-exclude=cpu")
    assert run.returncode != 0
    assert "backend 'cpu' is required (--opkernel-backends) but OPKERNEL_TEST_EXCLUDE=cpu leaves it out" in (
        run.stdout + run.stderr
    )
    typo = _run(tmp_path, CHOOSES, "--opkernel-only=cpuu")
    assert typo.returncode != 0
    assert "OPKERNEL_TEST_BACKENDS=cpuu names 'cpuu', which is not among the backends here" in typo.stdout + typo.stderr
