"""Plugin discovery: one cached scan of the ``opkernel`` entry-point group.

Discovery runs at first use (the first op call, backend query or op lookup),
never at ``import opkernel``.  Each plugin is loaded and its hooks called in
isolation: a plugin that fails to import, or whose hook raises, is rolled back
and reported without affecting the others.

Environment:
  ``OPKERNEL_DISABLE_PLUGIN_AUTOLOAD=1``  load no entry points (built-ins still load)
  ``OPKERNEL_PLUGINS=cpu,opencl``         load only these entry points
  ``OPKERNEL_STRICT_PLUGINS=1``           a failing plugin raises PluginError

A plugin may declare the plugin-API versions it supports with a module (or
object) attribute, ``OPKERNEL_PLUGIN_API = ">=1,<2"``: comma-separated clauses
``>=``, ``>``, ``<=``, ``<``, ``==``, ``!=`` (a bare number means ``==``), or an
int.  A plugin whose range excludes ``PLUGIN_API_VERSION`` is skipped before
any of its hooks run, reported like any failing plugin.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import warnings
from dataclasses import FrozenInstanceError
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from . import gradients, kernels, op_registry
from ._provenance import Provider, providing
from .backend import Backend
from .errors import PluginError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    import pluggy

__all__ = [
    "PluginInfo",
    "PluginFailure",
    "PluginWarning",
    "ensure_loaded",
    "register_plugin",
    "plugin_errors",
    "plugins",
    "backend_classes",
    "api_version_matches",
    "load_entry_point",
    "plugin_manager",
]

ENTRY_POINT_GROUP = "opkernel"
BUILTIN_PLUGINS = ("opkernel.ops._builtin",)
HOOK_ORDER = (
    "opkernel_register_backends",
    "opkernel_register_ops",
    "opkernel_register_kernels",
    "opkernel_register_gradients",
)


class PluginWarning(UserWarning):
    """Warned once for every plugin that failed to load."""


class _Record:
    """An immutable record with value equality, as a frozen dataclass gives, minus
    the ~0.5 ms each dataclass costs to build at import."""

    __slots__: tuple[str, ...] = ()

    def __init__(self, *values: Any) -> None:
        if len(values) != len(self.__slots__):
            raise TypeError(f"{type(self).__name__} takes {len(self.__slots__)} arguments, got {len(values)}")
        for name, value in zip(self.__slots__, values):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:  # pickle and copy through __init__
        return type(self), self._values()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class PluginInfo(_Record):
    """A loaded plugin: its name, distribution and version (None for one registered
    by hand) and module."""

    __slots__ = ("name", "distribution", "version", "module")

    name: str
    distribution: str | None
    version: str | None
    module: str

    def __init__(self, name: str, distribution: str | None, version: str | None, module: str) -> None:
        super().__init__(name, distribution, version, module)

    @property
    def provider(self) -> Provider:
        return Provider(self.name, self.distribution, self.version)


class PluginFailure(_Record):
    """A plugin that failed to load, and the error it raised."""

    __slots__ = ("plugin", "distribution", "version", "error")

    plugin: str
    distribution: str | None
    version: str | None
    error: BaseException

    def __init__(self, plugin: str, distribution: str | None, version: str | None, error: BaseException) -> None:
        super().__init__(plugin, distribution, version, error)

    def __str__(self) -> str:
        where = f" ({self.distribution} {self.version})" if self.distribution else ""
        return f"plugin {self.plugin!r}{where} failed: {type(self.error).__name__}: {self.error}"


_lock = threading.RLock()
_loaded = False
_loading = False  # True while _load_all runs, so hooks may call back into opkernel
_manager: pluggy.PluginManager | None = None
_plugins: dict[str, PluginInfo] = {}
_failures: list[PluginFailure] = []
_backends: dict[str, tuple[type[Backend], Provider]] = {}
_listeners: list[Callable[[], None]] = []


def plugin_manager() -> pluggy.PluginManager:
    """The pluggy plugin manager, made at first use (pluggy is not imported with opkernel)."""
    global _manager
    if _manager is None:
        with _lock:
            if _manager is None:
                import pluggy

                from . import hookspecs

                pm = pluggy.PluginManager(hookspecs.PROJECT)
                pm.add_hookspecs(hookspecs)
                _manager = pm
    return _manager


def __getattr__(name: str) -> Any:
    if name == "_pm":  # the manager's old name, kept for code that reads it
        return plugin_manager()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def entry_points(**selection: str) -> Any:
    """``importlib.metadata.entry_points(**selection)``, imported at the first scan
    (it costs ~20 ms, so ``import opkernel`` leaves it for the first op)."""
    from importlib import metadata

    return metadata.entry_points(**selection)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def on_change(fn: Callable[[], None]) -> None:
    """Call ``fn`` whenever the set of plugins changes (the engine drops its caches)."""
    _listeners.append(fn)


def ensure_loaded() -> None:
    """Discover and load plugins once; cheap after the first call.

    Other threads wait until loading has finished; a hook calling back into
    opkernel (the loading thread itself) sees what is registered so far.
    """
    if _loaded:
        return
    with _lock:
        if not _loaded and not _loading:
            _load_all()


def _load_all() -> None:
    global _loaded, _loading
    _loading = True
    try:
        _load_plugins()
    finally:
        _loading = False
        _loaded = True


def _load_plugins() -> None:
    for module_name in BUILTIN_PLUGINS:
        _activate(importlib.import_module(module_name), PluginInfo("builtin", "opkernel", _own_version(), module_name))
    if _env_flag("OPKERNEL_DISABLE_PLUGIN_AUTOLOAD"):
        return
    allow = {n.strip() for n in os.environ.get("OPKERNEL_PLUGINS", "").split(",") if n.strip()}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if allow and ep.name not in allow:
            continue
        _load_entry_point(ep)


def _own_version() -> str | None:
    from . import __version__

    return __version__


def _info_of(ep: EntryPoint) -> PluginInfo:
    dist = getattr(ep, "dist", None)
    return PluginInfo(ep.name, dist.name if dist else None, dist.version if dist else None, ep.value)


def _load_entry_point(ep: EntryPoint) -> None:
    info = _info_of(ep)
    if info.name in _plugins:
        return
    try:
        plugin = ep.load()
    except Exception as e:  # a broken plugin must not break the others
        _fail(info, e)
        return
    _activate(plugin, info)


def _fail(info: PluginInfo, error: BaseException, *, warn: bool = True) -> None:
    failure = PluginFailure(info.name, info.distribution, info.version, error)
    _failures.append(failure)
    if _env_flag("OPKERNEL_STRICT_PLUGINS"):
        raise PluginError(str(failure), plugin=info.name) from error
    if warn:
        warnings.warn(str(failure), PluginWarning, stacklevel=4)


_API_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)?\s*(\d+)\s*$")
_API_TESTS: dict[str, Callable[[int, int], bool]] = {
    ">=": lambda v, n: v >= n, ">": lambda v, n: v > n, "<=": lambda v, n: v <= n,
    "<": lambda v, n: v < n, "==": lambda v, n: v == n, "!=": lambda v, n: v != n,
}


def api_version_matches(spec: str | int, version: int | None = None) -> bool:
    """Whether plugin-API ``version`` (default: this opkernel's, ``PLUGIN_API_VERSION``)
    satisfies ``spec`` (``">=1,<2"``, ``"1"`` or ``1``); ValueError for a malformed spec."""
    if version is None:
        from .hookspecs import PLUGIN_API_VERSION

        version = PLUGIN_API_VERSION
    if isinstance(spec, int) and not isinstance(spec, bool):
        return version == spec
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"expected a string such as '>=1,<2' or an int, got {spec!r}")
    result = True
    for clause in spec.split(","):
        match = _API_CLAUSE.match(clause)
        if match is None:
            raise ValueError(f"cannot read clause {clause.strip()!r} of {spec!r} (expected e.g. '>=1,<2')")
        result &= _API_TESTS[match.group(1) or "=="](version, int(match.group(2)))
    return result


def _api_problem(plugin: Any, info: PluginInfo) -> str | None:
    """Why ``plugin`` cannot run on this plugin API (its ``OPKERNEL_PLUGIN_API``), or None."""
    spec = getattr(plugin, "OPKERNEL_PLUGIN_API", None)
    if spec is None:
        return None
    from .hookspecs import PLUGIN_API_VERSION

    where = f" ({info.distribution} {info.version})" if info.distribution else ""
    try:
        if api_version_matches(spec):
            return None
    except ValueError as e:
        return f"plugin {info.name!r}{where} declares a malformed OPKERNEL_PLUGIN_API {spec!r}: {e}"
    return (
        f"plugin {info.name!r}{where} supports opkernel plugin API {spec}, but this opkernel "
        f"({_own_version()}) has plugin API {PLUGIN_API_VERSION}; skipped. Install a release of "
        f"{info.distribution or info.name} made for plugin API {PLUGIN_API_VERSION}, or an opkernel "
        f"whose plugin API is in {spec}"
    )


def _activate(plugin: Any, info: PluginInfo, *, warn: bool = True) -> bool:
    """Register ``plugin`` with pluggy and run its hooks as one transaction."""
    provider = info.provider
    pm = plugin_manager()
    if pm.is_registered(plugin):  # the same module behind a second entry point: its hooks already ran
        warnings.warn(
            f"plugin {info.name!r} is the module already loaded as {pm.get_name(plugin)!r}; not loaded twice",
            PluginWarning,
            stacklevel=3,
        )
        return False
    problem = _api_problem(plugin, info)
    if problem is not None:  # skipped before any hook runs
        _fail(info, PluginError(problem, plugin=info.name), warn=warn)
        return False
    try:
        pm.register(plugin, name=info.name)
        with providing(provider):
            for hook_name in HOOK_ORDER:
                for impl in getattr(pm.hook, hook_name).get_hookimpls():
                    if impl.plugin is plugin:
                        result = impl.function()
                        if hook_name == "opkernel_register_backends":
                            _add_backends(result or [], provider)
    except Exception as e:
        _rollback(plugin, provider)
        _fail(info, e, warn=warn)
        return False
    _plugins[info.name] = info
    for listener in _listeners:
        listener()
    return True


def _add_backends(classes: list[type[Backend]], provider: Provider) -> None:
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, Backend) and cls.name):
            raise PluginError(f"opkernel_register_backends returned {cls!r}, not a named Backend subclass")
        if cls.name in _backends and _backends[cls.name][0] is not cls:
            raise PluginError(
                f"backend {cls.name!r} is already provided by {_backends[cls.name][1]}", plugin=provider.plugin
            )
        _backends[cls.name] = (cls, provider)


def _rollback(plugin: Any, provider: Provider) -> None:
    pm = plugin_manager()
    if pm.is_registered(plugin):
        pm.unregister(plugin)
    op_registry.remove_provider(provider)
    kernels.remove_provider(provider)
    gradients.remove_provider(provider)
    for name in [n for n, (_, p) in _backends.items() if p == provider]:
        del _backends[name]


def register_plugin(plugin: ModuleType | Any, name: str | None = None) -> str:
    """Register a plugin by hand (a module or any object with hookimpls).

    Its hooks run at once; failures follow the same rules as installed plugins.
    Registering the same object twice is a no-op.  Returns the plugin's name.
    """
    ensure_loaded()
    with _lock:
        pm = plugin_manager()
        if pm.is_registered(plugin):
            return pm.get_name(plugin) or ""
        plugin_name = name or getattr(plugin, "__name__", None) or f"plugin-{id(plugin):x}"
        if plugin_name in _plugins:
            raise PluginError(f"a plugin named {plugin_name!r} is already registered", plugin=plugin_name)
        module = getattr(plugin, "__name__", type(plugin).__name__)
        if not _activate(plugin, PluginInfo(plugin_name, None, None, module), warn=False):
            raise PluginError(str(_failures[-1]), plugin=plugin_name) from _failures[-1].error
        return plugin_name


def load_entry_point(ep: EntryPoint) -> PluginInfo:
    """Load one entry point of the ``opkernel`` group now, even one that discovery
    skipped (``OPKERNEL_PLUGINS``, ``OPKERNEL_DISABLE_PLUGIN_AUTOLOAD``); nothing
    happens when it is loaded already.  Raises PluginError when it fails."""
    ensure_loaded()
    with _lock:
        info = _info_of(ep)
        if info.name in _plugins:
            return _plugins[info.name]
        try:
            plugin = ep.load()
        except Exception as e:
            _fail(info, e)
            raise PluginError(str(_failures[-1]), plugin=info.name) from e
        pm = plugin_manager()
        if pm.is_registered(plugin):  # registered by hand under another name
            return _plugins[pm.get_name(plugin) or ""]
        if not _activate(plugin, info):
            raise PluginError(str(_failures[-1]), plugin=info.name) from _failures[-1].error
        return _plugins[info.name]


def unregister_plugin(name: str) -> None:
    """Remove a plugin and everything it registered (used by tests)."""
    with _lock:
        info = _plugins.pop(name, None)
        plugin = plugin_manager().get_plugin(name)
        if info is not None:
            _rollback(plugin, info.provider)
        for listener in _listeners:
            listener()


def plugin_errors() -> list[PluginFailure]:
    """Plugins that failed to load, with the error each raised."""
    ensure_loaded()
    return list(_failures)


def plugins() -> list[PluginInfo]:
    """Loaded plugins, in load order."""
    ensure_loaded()
    return list(_plugins.values())


def backend_classes() -> dict[str, tuple[type[Backend], Provider]]:
    """Every backend class that a plugin provides, by name."""
    ensure_loaded()
    return dict(_backends)


def _reset_for_tests() -> None:
    """Forget every plugin so the next use rediscovers (tests only)."""
    global _loaded
    with _lock:
        for name in list(_plugins):
            unregister_plugin(name)
        _failures.clear()
        _backends.clear()
        _loaded = False
