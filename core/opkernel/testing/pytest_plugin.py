"""pytest plugin (entry point ``pytest11``): run one test body on every backend.

* ``backend`` fixture: parametrized over every installed backend (ids
  ``test_x[cpu]``, ``test_x[opencl]``); the test runs with that backend active.
  An installed but unavailable backend is a skip with its reason.
* ``--opkernel-backends=cpu,opencl``: these backends are required; if one is
  missing or unavailable, its tests fail instead of skipping.
* ``--opkernel-only=cpu,opencl`` / ``--opkernel-exclude=name`` (or the environment
  variables ``OPKERNEL_TEST_BACKENDS`` / ``OPKERNEL_TEST_EXCLUDE``, which the options
  set): the backends this run uses; the others get no test instances at all, and
  ``check_op`` leaves them out too.
* ``@pytest.mark.opkernel_backends("cpu", ...)``: run a test on these backends only.
* ``fresh_registry`` fixture: registrations made by the test are undone after it.

Manners, since pytest loads this plugin in every run where opkernel is installed:
it parametrizes ``backend`` only where the name means this plugin's fixture (a
project's own ``backend`` fixture, or a test's own ``parametrize("backend", ...)``,
is left alone), and a run that uses none of its fixtures or options sees nothing
of it: no backend is imported, no line is added to the report header (the
backends line follows "collected N items" only when a collected test uses
``backend``).
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("opkernel")
    group.addoption(
        "--opkernel-backends",
        default="",
        help="comma-separated backends that must be installed and available; their tests fail instead of skipping",
    )
    group.addoption(
        "--opkernel-only",
        default=None,
        help="comma-separated backends this run uses, the others left out (sets OPKERNEL_TEST_BACKENDS)",
    )
    group.addoption(
        "--opkernel-exclude",
        default=None,
        help="comma-separated backends this run leaves out (sets OPKERNEL_TEST_EXCLUDE)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "opkernel_backends(*names): run this test on these opkernel backends only")
    import os

    from ._backend_choice import ENV_EXCLUDE, ENV_ONLY, left_out

    for option, variable in (("--opkernel-only", ENV_ONLY), ("--opkernel-exclude", ENV_EXCLUDE)):
        value = config.getoption(option, default=None)
        if value is not None:
            os.environ[variable] = str(value)  # check_op and the test's child processes follow it too
    clash = [(b, why) for b in _required(config) if (why := left_out(b)) is not None]
    if clash:
        raise pytest.UsageError(
            "; ".join(f"backend {b!r} is required (--opkernel-backends) but {why}" for b, why in clash)
        )


def _required(config: pytest.Config) -> list[str]:
    value = str(config.getoption("--opkernel-backends", default="") or "")
    return [b.strip() for b in value.split(",") if b.strip()]


def _status() -> list[tuple[str, int, str | None]]:
    from .. import engine  # imported only once a test asks for a backend

    return engine.backend_status()


def _backend_names(config: pytest.Config) -> list[str]:
    """The backends a test runs on: the installed ones this run uses, and the required ones."""
    from ._backend_choice import chosen_backends

    installed = [name for name, _, _ in _status()]
    try:
        used = chosen_backends(installed)
    except Exception as e:  # a name the choice gives that is not installed here
        raise pytest.UsageError(str(e)) from None
    return used + [b for b in _required(config) if b not in used]


def _uses_our_backend(definition: Any) -> bool:
    """Whether the test's ``backend`` argument resolves to this plugin's fixture (the
    last definition is the one pytest uses: a conftest's or a module's own wins)."""
    name2defs = getattr(getattr(definition, "_fixtureinfo", None), "name2fixturedefs", None)
    if not isinstance(name2defs, dict):  # a pytest that no longer has this: behave as before manners
        return True
    defs = name2defs.get("backend")
    func = getattr(defs[-1], "func", None) if defs else None
    return getattr(func, "__module__", None) == __name__


def _parametrized_by_test(metafunc: pytest.Metafunc) -> bool:
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if "backend" in names:
            return True
    return False


@pytest.hookimpl(trylast=True)  # after the test's own parametrize marks and conftest hooks
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames or not _uses_our_backend(metafunc.definition):
        return
    if _parametrized_by_test(metafunc):
        return
    names = _backend_names(metafunc.config)
    marker = metafunc.definition.get_closest_marker("opkernel_backends")
    if marker is not None:
        names = [n for n in names if n in marker.args]
    try:
        metafunc.parametrize("backend", names, ids=names, indirect=True)
    except ValueError as e:  # a conftest's pytest_generate_tests parametrized it already: theirs stands
        if "duplicate" not in str(e):
            raise


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> str | list[str]:
    if not any("backend" in getattr(item, "fixturenames", ()) and _uses_our_backend(item) for item in items):
        return []
    rows = [f"{n} ({'available' + _device_of(n) if r is None else 'unavailable: ' + r})" for n, _, r in _status()]
    return "opkernel backends: " + (", ".join(rows) or "none installed")


def _device_of(name: str) -> str:
    """``" on device 0:0 'name' (platform)"``: the device a backend that reports devices uses."""
    from .. import plugins

    cls = plugins.backend_classes()[name][0]
    chosen = [d for d in cls.devices() if d.chosen]
    return f" on device {chosen[0].id} {chosen[0].name!r} ({chosen[0].platform})" if chosen else ""


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The name of the backend this test instance runs on (it is active during the test)."""
    from .. import engine

    from ._backend_choice import left_out

    name: str | None = getattr(request, "param", None)
    if name is None:  # not parametrized by this plugin (e.g. requested through getfixturevalue)
        name = engine.get_backend()
        why = left_out(name)
        if why is not None:
            pytest.skip(f"backend {name!r} is left out of this run: {why}")
    required = name in _required(request.config)
    status = {n: r for n, _, r in _status()}
    if name not in status:
        pytest.fail(f"required backend {name!r} is not installed (installed: {sorted(status)})")
    if status[name] is not None:
        (pytest.fail if required else pytest.skip)(f"backend {name!r} unavailable: {status[name]}")
    with engine.use_backend(name):
        yield name


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """Undo the test's op, kernel, gradient and plugin registrations afterwards."""
    from . import isolated_registries

    with isolated_registries():
        yield
