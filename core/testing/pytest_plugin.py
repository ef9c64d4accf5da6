"""pytest plugin (entry point ``pytest11``): run one test body on every backend.

* ``backend`` fixture: parametrized over every installed backend (ids
  ``test_x[cpu]``, ``test_x[opencl]``); the test runs with that backend active.
  An installed but unavailable backend is a skip with its reason.
* ``--opkernel-backends=cpu,opencl``: these backends are required; if one is
  missing or unavailable, its tests fail instead of skipping.
* ``fresh_registry`` fixture: registrations made by the test are undone after it.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from .. import engine
from . import isolated_registries


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("opkernel")
    group.addoption(
        "--opkernel-backends",
        default="",
        help="comma-separated backends that must be installed and available; their tests fail instead of skipping",
    )


def _required(config: pytest.Config) -> list[str]:
    value = str(config.getoption("--opkernel-backends") or "")
    return [b.strip() for b in value.split(",") if b.strip()]


def _backend_names(config: pytest.Config) -> list[str]:
    installed = [name for name, _, _ in engine.backend_status()]
    return installed + [b for b in _required(config) if b not in installed]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        names = _backend_names(metafunc.config)
        metafunc.parametrize("backend", names, ids=names, indirect=True)


def pytest_report_header(config: pytest.Config) -> str:
    rows = [f"{n} ({'available' if r is None else 'unavailable: ' + r})" for n, _, r in engine.backend_status()]
    return "opkernel backends: " + (", ".join(rows) or "none installed")


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The name of the backend this test instance runs on (it is active during the test)."""
    name: str = request.param
    required = name in _required(request.config)
    status = {n: r for n, _, r in engine.backend_status()}
    if name not in status:
        pytest.fail(f"required backend {name!r} is not installed (installed: {sorted(status)})")
    if status[name] is not None:
        (pytest.fail if required else pytest.skip)(f"backend {name!r} unavailable: {status[name]}")
    with engine.use_backend(name):
        yield name


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """Undo the test's op, kernel, gradient and plugin registrations afterwards."""
    with isolated_registries():
        yield


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "opkernel_backends(*names): restrict a test to these backends")


