"""Plugin discovery: one cached scan of the ``opkernel`` entry-point group.

Discovery runs at first use (the first op call, backend query or op lookup),
never at ``import opkernel``.  Each plugin is loaded and its hooks called in
isolation: a plugin that fails to import, or whose hook raises, is rolled back
and reported without affecting the others.

Environment:
  ``OPKERNEL_DISABLE_PLUGIN_AUTOLOAD=1``  load no entry points (built-ins still load)
  ``OPKERNEL_PLUGINS=cpu,opencl``         load only these entry points
  ``OPKERNEL_STRICT_PLUGINS=1``           a failing or overriding plugin raises PluginError

A plugin may replace another distribution's kernel or backend only when it says
so (``override=True``); it is then warned about and listed by ``overrides()``.
Discovery is all-or-nothing per plugin, even when interrupted (KeyboardInterrupt):
an interrupted or strict-failed discovery is resumed by the next use.

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
import sys
import threading
import warnings
from dataclasses import FrozenInstanceError
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from . import _discovery, gradients, kernels, op_registry
from ._known_packages import known_package_for
from ._provenance import CURRENT_PROVIDER, Provider, providing
from ._shadowing import shadowed_by
from ._version import __version__
from .backend import Backend
from .errors import OpSpecError, PluginError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    import pluggy

__all__ = [
    "NAMESPACE_GROUP",
    "namespace_owner",
    "namespace_owners",
    "PluginInfo",
    "PluginFailure",
    "PluginWarning",
    "Override",
    "overrides",
    "ensure_loaded",
    "register_plugin",
    "plugin_errors",
    "failure_of",
    "unknown_op_kernels",
    "plugins",
    "backend_classes",
    "api_version_matches",
    "load_entry_point",
    "plugin_manager",
    "shadowed_by",
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


class Override(_Record):
    """A registration that replaces another distribution's: ``what`` (a kernel or a
    backend), the ``provider`` that overrides and the ``overridden`` one."""

    __slots__ = ("what", "provider", "overridden")

    what: str
    provider: Provider
    overridden: Provider

    def __init__(self, what: str, provider: Provider, overridden: Provider) -> None:
        super().__init__(what, provider, overridden)

    def __str__(self) -> str:
        return f"{self.what}: {self.provider} overrides {self.overridden} (override=True)"


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

    def failed_to_load(self) -> str:
        """``plugin 'x' (opkernel-x 1.0) is installed but failed to load: ImportError: ...``:
        what an error about something that plugin provides says instead of "unknown"."""
        where = f" ({self.distribution} {self.version})" if self.distribution else ""
        installed = " is installed but" if self.distribution else ""
        return f"plugin {self.plugin!r}{where}{installed} failed to load: {type(self.error).__name__}: {self.error}"


_lock = threading.RLock()
_loaded = False
_loading = False  # True while _load_all runs, so hooks may call back into opkernel
_manager: pluggy.PluginManager | None = None
_plugins: dict[str, PluginInfo] = {}
_failures: list[PluginFailure] = []
_backends: dict[str, tuple[type[Backend], Provider]] = {}  # the class in use for each name
_claims: dict[str, list[tuple[type[Backend], Provider]]] = {}  # every accepted class for each name
_listeners: list[Callable[[], None]] = []
# Kernels whose op was not registered when they were checked during discovery: another plugin
# loaded later may declare it, so they are checked again when discovery ends.
_deferred: list[kernels.KernelDef] = []


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
        try:
            _load_plugins()
        except PluginError:
            # Strict mode: every other plugin has loaded and the failing one is rolled back, so
            # discovery is complete; the error is raised once, as a failing plugin warns once.
            _loaded = True
            try:
                _check_deferred()
            except (PluginError, OpSpecError):
                pass  # recorded and rolled back like the first error, which is the one raised
            raise
        _loaded = True
        _check_deferred()
    finally:
        # Anything else (KeyboardInterrupt) leaves discovery unfinished: the next use resumes
        # it, skipping the plugins already loaded, instead of leaving the process without
        # the plugins that came later.
        _loading = False


def _load_plugins() -> None:
    for module_name in BUILTIN_PLUGINS:
        if "builtin" not in _plugins:
            info = PluginInfo("builtin", "opkernel", _own_version(), module_name)
            _activate(importlib.import_module(module_name), info)
    if _env_flag("OPKERNEL_DISABLE_PLUGIN_AUTOLOAD"):
        return
    allow = {n.strip() for n in os.environ.get("OPKERNEL_PLUGINS", "").split(",") if n.strip()}
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    declared: dict[str, list[PluginInfo]] = {}
    for ep in found:
        declared.setdefault(ep.name, []).append(info_of(ep))
    strict_error: PluginError | None = None
    failed = {f.plugin for f in _failures}
    for ep in found:
        if (allow and ep.name not in allow) or ep.name in _plugins:
            continue
        if ep.name in failed:
            continue  # reported before discovery was interrupted; a resumed discovery does not retry it
        try:
            clash = name_clash(ep.name, declared[ep.name])
            if clash is not None:
                failed.add(ep.name)  # one report for all the distributions declaring the name
                _fail(info_of(ep), PluginError(clash, plugin=ep.name))
            else:
                _load_entry_point(ep)
        except PluginError as e:  # strict mode: load every other plugin, then raise the first error
            strict_error = strict_error or e
    if strict_error is not None:
        raise strict_error


def name_clash(name: str, infos: list[PluginInfo]) -> str | None:
    """Why an entry point named ``name`` must not load: another distribution declares the
    same name (either could be impersonating the other), or it takes the built-in's name."""
    dists = sorted({f"{i.distribution} {i.version}" if i.distribution else i.module for i in infos})
    if name == "builtin":
        return f"plugin name 'builtin' is reserved for opkernel's own ops; {', '.join(dists)} declares it; not loaded"
    if len(dists) > 1:
        return (
            f"plugin {name!r} is declared by more than one distribution ({', '.join(dists)}); none of them "
            "is loaded, since opkernel cannot tell which is genuine. Uninstall all but one"
        )
    return None


def _own_version() -> str | None:
    return __version__


def info_of(ep: EntryPoint) -> PluginInfo:
    dist = getattr(ep, "dist", None)
    return PluginInfo(ep.name, dist.name if dist else None, dist.version if dist else None, ep.value)


def _load_entry_point(ep: EntryPoint) -> bool:
    """Import ``ep``'s module and run its hooks as one transaction: registrations made
    while importing belong to the plugin and are rolled back with it."""
    info = info_of(ep)
    if info.name in _plugins:
        return True
    module_name = _module_of(ep)
    fresh = module_name not in sys.modules
    try:
        plugin = _import(ep, info)
    except Exception as e:  # a broken plugin must not break the others
        _fail(info, e)
        return False
    if _activate(plugin, info):
        return True
    if fresh:
        sys.modules.pop(module_name, None)  # so that a retry imports (and registers) it again
    return False


def _module_of(ep: EntryPoint) -> str:
    return str(ep.value).split(":", 1)[0].strip()


def _import(ep: EntryPoint, info: PluginInfo) -> Any:
    """``ep.load()`` as the first step of the plugin's transaction: what its module registers
    while being imported belongs to the plugin, and is removed again if the import fails
    (KeyboardInterrupt included) or the module is not its distribution's own."""
    module_name = _module_of(ep)
    fresh = module_name not in sys.modules
    try:
        with providing(info.provider):
            plugin = ep.load()
        problem = _shadowing(ep, module_name)
        if problem is not None:
            raise PluginError(f"plugin {info.name!r}: {problem}", plugin=info.name)
    except BaseException:
        discard_registrations(info.provider)
        if fresh:
            sys.modules.pop(module_name, None)
        raise
    return plugin


def _shadowing(ep: EntryPoint, module_name: str) -> str | None:
    """Why the module imported for ``ep`` is not the one its distribution installed (a
    file of the same name earlier on sys.path, e.g. in the current directory under
    ``python -c`` or a REPL), or None.  Distributions that list no file for the module
    (editable installs) cannot be checked."""
    dist = getattr(ep, "dist", None)
    module = sys.modules.get(module_name)
    origin = getattr(module, "__file__", None)
    if dist is None or origin is None:
        return None
    return shadowed_by(module_name, origin, dist)


def _fail(info: PluginInfo, error: BaseException, *, warn: bool = True) -> None:
    failure = PluginFailure(info.name, info.distribution, info.version, error)
    _failures[:] = [f for f in _failures if f.plugin != info.name]  # a retried plugin is reported once
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
    culprits: dict[Provider, str] = {}  # earlier registrations this plugin shows to be takeovers
    try:
        pm.register(plugin, name=info.name)
        with providing(provider):
            for hook_name in HOOK_ORDER:
                for impl in getattr(pm.hook, hook_name).get_hookimpls():
                    if impl.plugin is plugin:
                        result = impl.function()
                        if hook_name == "opkernel_register_backends":
                            culprits.update(_add_backends(result or [], provider))
        _check_provider(provider)
        culprits.update(_kernel_takeovers(provider))
        culprits.update(_gradient_squatters(provider))
        culprits.update(_op_squatters(provider))
        for override in _overrides_involving(provider):
            if _env_flag("OPKERNEL_STRICT_PLUGINS"):
                culprits.setdefault(override.provider, f"{override}; OPKERNEL_STRICT_PLUGINS=1 refuses overrides")
            else:
                warnings.warn(str(override), PluginWarning, stacklevel=4)
        if provider in culprits:
            raise PluginError(culprits[provider], plugin=info.name)
    except BaseException as e:  # KeyboardInterrupt too: never leave a plugin half-registered
        _rollback(plugin, provider)
        if not isinstance(e, Exception):
            raise
        _fail(info, e, warn=warn)
        return False
    _plugins[info.name] = info
    for listener in _listeners:
        listener()
    _refuse(culprits)
    return True


def _add_backends(classes: list[type[Backend]], provider: Provider) -> dict[Provider, str]:
    """Accept ``provider``'s backend classes; return the earlier providers whose claim on a
    name this one shows to be a takeover.  Raises PluginError for a claim that is one."""
    culprits: dict[Provider, str] = {}
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, Backend) and cls.name):
            raise PluginError(f"opkernel_register_backends returned {cls!r}, not a named Backend subclass")
        claims = _claims.setdefault(cls.name, [])
        if any(c is cls for c, _ in claims):
            continue
        overriders = [p for c, p in claims if c.override]
        replaces = cls.override and not overriders  # the one class that says it replaces the others
        overridden = bool(overriders) and not cls.override  # kept, in case the overrider goes
        # The owner arriving after plugins that took its name (they loaded first) without saying so.
        reclaims = not (cls.override or overriders) and provider.plugin == cls.name
        reclaims = reclaims and not any(p.plugin == cls.name for _, p in claims)
        if claims and not (replaces or overridden or reclaims):
            raise PluginError(
                f"backend {cls.name!r} is already provided by {(overriders or [claims[0][1]])[0]}; "
                f"{provider} provides another ({cls.__module__}.{cls.__qualname__}). The name belongs to "
                f"the plugin named {cls.name!r}; a backend that replaces another distribution's must set "
                "`override = True` on its class",
                plugin=provider.plugin,
            )
        if claims and reclaims:
            for _, taker in claims:
                culprits[taker] = (
                    f"backend {cls.name!r}: {taker} provides it without `override = True`, but the name "
                    f"belongs to {provider} (the plugin named {cls.name!r}); refused"
                )
        claims.append((cls, provider))
        _backends[cls.name] = _winner(cls.name, claims)
    return culprits


def _winner(name: str, claims: list[tuple[type[Backend], Provider]]) -> tuple[type[Backend], Provider]:
    """The class in use for backend ``name``: an overriding one, else its owner's, else the first."""
    return next(
        (c for c in claims if c[0].override), next((c for c in claims if c[1].plugin == name), claims[0])
    )


def _kernel_takeovers(provider: Provider) -> dict[Provider, str]:
    """Earlier kernels of other distributions that win over one of ``provider``'s without
    owning the op or backend or saying override=True (registered before ``provider`` came)."""
    culprits: dict[Provider, str] = {}
    mine: dict[tuple[str, str], list[kernels.KernelDef]] = {}
    for k in kernels.all_kernels():
        if k.provider == provider:
            mine.setdefault((k.op, k.backend), []).append(k)
    for key, ours in mine.items():
        for other in kernels.kernels_for(*key):
            taken = kernels.unauthorised_takeovers(other, ours, others_are_older=False)
            if taken and other.provider != provider:
                culprits.setdefault(other.provider, (
                    f"its kernel for {other.describe()} would be chosen over {provider}'s "
                    f"({taken[0].describe()}) without override=True, and it provides neither the op nor "
                    "the backend; refused"
                ))
    return culprits


def _overrides_involving(provider: Provider) -> list[Override]:
    return [o for o in _overrides() if provider in (o.provider, o.overridden)]


def _refuse(culprits: dict[Provider, str]) -> None:
    """Unload the earlier plugins in ``culprits`` (a takeover came to light when the plugin
    they took from loaded), reporting each like a failing plugin."""
    by_provider = {info.provider: info for info in _plugins.values()}
    strict_error: PluginError | None = None
    for provider, reason in culprits.items():
        info = by_provider.get(provider)
        if info is None:  # a script's kernel, not a plugin: drop that kernel and say so
            kernels.remove_kernels(
                k for k in kernels.all_kernels()
                if k.provider == provider
                and kernels.unauthorised_takeovers(k, kernels.kernels_for(k.op, k.backend), others_are_older=False)
            )
            warnings.warn(f"{provider}: {reason}", PluginWarning, stacklevel=5)
            continue
        unregister_plugin(info.name)
        try:
            _fail(info, PluginError(f"plugin {info.name!r}: {reason}", plugin=info.name), warn=True)
        except PluginError as e:
            strict_error = strict_error or e
    if strict_error is not None:
        raise strict_error


def overrides() -> list[Override]:
    """Every registration in use that replaces another distribution's (``override=True``)."""
    ensure_loaded()
    return _overrides()


def _overrides() -> list[Override]:
    found = [
        Override(f"kernel for {k.describe()}", k.provider, other.provider) for k, other in kernels.overrides()
    ]
    for name, claims in _claims.items():
        winner = _backends.get(name)
        if winner is not None and winner[0].override:
            found += [Override(f"backend {name!r}", winner[1], p) for c, p in claims if c is not winner[0]]
    found += [Override(f"gradient of op {new.op!r}", new.provider, old.provider) for new, old in gradients.overrides()]
    found += [Override(f"op {name!r}", new, old) for new, old, name in op_registry.overrides()]
    for list_overrides, _ in _registries:
        found += list_overrides()
    return list(dict.fromkeys(found))


def _gradient_squatters(provider: Provider) -> dict[Provider, str]:
    """Earlier parties whose gradient for one of ``provider``'s ops ``provider`` replaced:
    they registered the gradient of an op they do not provide, without override=True."""
    return {
        old.provider: (
            f"it registered the gradient of op {new.op!r}, which {provider} provides, without override=True; "
            f"{provider}'s gradient replaces it and the squatter is refused"
        )
        for new, old in gradients.displaced() if new.provider == provider and old.provider != provider
    }


def _owners(op: str, backend: str) -> frozenset[str]:
    """The distributions that may register kernels for (op, backend) over anyone's: the
    op's provider and every provider of the backend."""
    owners = {kernels.origin_of(p) for _, p in _claims.get(backend, ())}
    if op_registry.is_registered(op):
        op_provider = op_registry._origin(op)[0]
        if op_provider is not None:
            owners.add(kernels.origin_of(op_provider))
    return frozenset(owners)


kernels.set_owner_lookup(_owners)


#: The entry point group where a distribution declares the op namespaces it owns: an entry
#: ``Vendor = "module"`` makes every op ``Vendor>...`` (and every device program named so)
#: that distribution's; an entry naming one op (``"Vendor>Op" = "module"``) owns that name.
NAMESPACE_GROUP = "opkernel.namespaces"
_namespace_table: dict[str, tuple[str, str]] | None = None


def namespace_owners() -> dict[str, tuple[str, str]]:
    """Declared namespace (or op name) -> (the distribution that declares it, the module its
    entry point names); one that two distributions declare has no owner (a PluginWarning says so)."""
    global _namespace_table
    table = _namespace_table
    if table is None:
        declared: dict[str, dict[str, str]] = {}
        for ep in entry_points(group=NAMESPACE_GROUP):
            dist = getattr(ep, "dist", None)
            if dist is not None:
                declared.setdefault(ep.name.strip(), {})[dist.name] = _module_of(ep)
        table = {}
        for key, by_dist in sorted(declared.items()):
            if len(by_dist) == 1:
                table[key] = next(iter(by_dist.items()))
            else:
                warnings.warn(f"op namespace {key!r} is declared by {', '.join(sorted(by_dist))}: it has no owner",
                              PluginWarning, stacklevel=2)
        _namespace_table = table
    return table


def _declaration(name: str) -> tuple[str, str] | None:
    if ">" not in name:
        return None
    table = namespace_owners()
    return table.get(name) or table.get(name.split(">", 1)[0])


def namespace_owner(name: str) -> str | None:
    """The distribution that owns op (or device program) ``name``: the one declaring the
    name itself or its namespace (``Vendor`` of ``Vendor>Op``) in ``opkernel.namespaces``."""
    found = _declaration(name)
    return None if found is None else found[0]


def check_program_name(kind: str, name: str, module: str | None) -> None:
    """AlreadyExistsError unless code in ``module`` may declare the device program ``name``
    (``kind``: "OpenCL program", "CUDA program"): a name in a declared namespace belongs to the
    declaring distribution's package (the top-level package of its entry point's module)."""
    found = _declaration(name)
    if found is None:
        return
    owner, owner_module = found
    if module is not None and module.split(".")[0] == owner_module.split(".")[0]:
        return
    from .errors import AlreadyExistsError

    raise AlreadyExistsError(
        f"{kind} {name!r} is in namespace {name.split('>', 1)[0]!r}, which {owner} declares (entry point group "
        f"{NAMESPACE_GROUP!r}); {module or 'this code'} may not declare it. Name the program in a namespace of "
        f"its own, or declare it with register=False (built and cached, but not a name others can find)",
        program=name,
    )


op_registry.set_owner_lookup(namespace_owner)


def _op_squatters(provider: Provider) -> dict[Provider, str]:
    """Earlier parties whose registration of an op in ``provider``'s namespace ``provider``
    replaced: they registered an op name they do not own, without override=True."""
    return {
        old: (f"it registered op {name!r}, in a namespace {new} declares, without override=True; "
              f"{new}'s op replaces it and the squatter is refused")
        for new, old, name in op_registry.displaced() if new == provider and old != provider
    }


def _gradient_owner(op: str) -> str | None:
    """The origin that provides ``op``, and so owns its gradient (None: an unknown op)."""
    if not op_registry.is_registered(op):
        return None
    provider = op_registry._origin(op)[0]
    return None if provider is None else kernels.origin_of(provider)


gradients.set_owner_lookup(_gradient_owner)


# ------------------------------------------------------- registration checks


def _check_declaration(kernel: kernels.KernelDef) -> None:
    """OpSpecError unless ``kernel`` fits its op's declaration (which must be registered)."""
    declared = op_registry.declaration(kernel.op)
    if declared is not None:
        kernel.check_declaration(*declared)


def _unknown_op_message(kernel: kernels.KernelDef) -> str:
    close = op_registry._close_matches(kernel.op, op_registry.op_names(), 3)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    known = known_package_for(kernel.op)
    if known is not None:
        hint += f"; the op package {known.distribution} provides it: pip install {known.distribution}"
    if _failures:  # the op's own plugin may be the one that failed
        hint += f"; plugins that failed to load: {', '.join(repr(f.plugin) for f in _failures)}"
    return (
        f"kernel for op {kernel.op!r} on backend {kernel.backend!r} from {kernel.provider}: no op named "
        f"{kernel.op!r} is registered{hint}; the kernel is never used (`opkernel kernels` flags it)"
    )


def _unknown_op(kernel: kernels.KernelDef, stacklevel: int = 6) -> None:
    """Warn (PluginWarning) about a kernel for an op that does not exist, or raise
    PluginError under ``OPKERNEL_STRICT_PLUGINS=1``."""
    message = _unknown_op_message(kernel)
    if _env_flag("OPKERNEL_STRICT_PLUGINS"):
        raise PluginError(f"{message}; OPKERNEL_STRICT_PLUGINS=1 refuses it", plugin=kernel.provider.plugin)
    warnings.warn(message, PluginWarning, stacklevel=stacklevel)


def _check_new_kernel(kernel: kernels.KernelDef) -> None:
    """``register_kernel``'s check of a kernel before it is added (kernels.set_registration_check)."""
    if CURRENT_PROVIDER.get() is not None:
        return  # a plugin's or op library's: checked when its hooks have run (_check_provider)
    if op_registry.is_registered(kernel.op):
        _check_declaration(kernel)
    elif _loaded and not _loading:
        _unknown_op(kernel, stacklevel=4)
    else:
        _deferred.append(kernel)  # a plugin not loaded yet may declare the op


kernels.set_registration_check(_check_new_kernel)
_discovery.install(lambda: ensure_loaded())


def _check_provider(provider: Provider) -> None:
    """Check the kernels ``provider`` (a plugin whose hooks have run) registered: raises
    OpSpecError or, for an unknown op under OPKERNEL_STRICT_PLUGINS=1, PluginError; warns
    about an unknown op; defers a kernel for an op not registered yet during discovery."""
    for k in kernels.all_kernels():
        if k.provider != provider:
            continue
        if op_registry.is_registered(k.op):
            _check_declaration(k)
        elif _loading:
            _deferred.append(k)
        else:
            _unknown_op(k)


def _check_deferred() -> None:
    """At the end of discovery: check the kernels whose op was unknown when they came.  A
    plugin's bad kernel unloads that plugin (reported as a failure); a script's is dropped
    and its error raised.  Under OPKERNEL_STRICT_PLUGINS=1 the first error is raised."""
    pending = list(_deferred)
    _deferred.clear()
    by_provider = {info.provider: info for info in _plugins.values()}
    first: Exception | None = None
    for k in pending:
        stored = [c for c in kernels.kernels_for(k.op, k.backend) if c.impl is k.impl and c.provider == k.provider]
        if not stored:
            continue  # never added, or gone already (its plugin was rolled back)
        try:
            if op_registry.is_registered(k.op):
                _check_declaration(k)
            else:
                _unknown_op(k)
            continue
        except (OpSpecError, PluginError) as e:
            error: Exception = e
        info = by_provider.get(k.provider)
        if info is not None:
            if info.name not in _plugins:
                continue  # unloaded for an earlier kernel
            unregister_plugin(info.name)
            try:
                _fail(info, error)
            except PluginError as e:
                first = first or e
        else:
            kernels.remove_kernels(stored)
            first = first or error
    if first is not None:
        raise first


def unknown_op_kernels() -> list[kernels.KernelDef]:
    """Registered kernels whose op does not exist (a misspelt name, or an op whose plugin
    failed to load); ``opkernel info`` and ``opkernel kernels`` flag them."""
    ensure_loaded()
    return [k for k in kernels.all_kernels() if not op_registry.is_registered(k.op)]


def failure_of(name: str) -> PluginFailure | None:
    """The recorded failure of the plugin called ``name`` (or of the distribution
    ``opkernel-<name>``), or None: errors about a backend or op library of that name
    then say the plugin "is installed but failed to load" instead of "unknown"."""
    wanted = {f"opkernel-{name}", f"opkernel_{name}"}
    failures = plugin_errors()
    return next(
        (f for f in failures if f.plugin == name),
        next((f for f in failures if f.distribution is not None and f.distribution.lower() in wanted), None),
    )


# Registries of the layers above this one (ok.dask's partitioning rules): each gives its
# overrides (listed and refused in strict mode with the others) and removes a provider's
# registrations on rollback.  They add themselves here (add_registry): no upward import.
_registries: list[tuple[Callable[[], list[Override]], Callable[[Provider], None]]] = []


def add_registry(overrides: Callable[[], list[Override]], remove_provider: Callable[[Provider], None]) -> None:
    """Put a higher layer's registry under the plugin rules: ``overrides()`` lists its
    registrations that replace another party's; ``remove_provider(p)`` drops p's."""
    _registries.append((overrides, remove_provider))


def discard_registrations(provider: Provider) -> None:
    """Remove every op, kernel, gradient (and higher layer's registration) ``provider``
    registered (the rollback of a plugin or op library that failed part-way)."""
    op_registry.remove_provider(provider)
    kernels.remove_provider(provider)
    gradients.remove_provider(provider)
    for _, remove in _registries:
        remove(provider)


def _rollback(plugin: Any, provider: Provider) -> None:
    pm = plugin_manager()
    if pm.is_registered(plugin):
        pm.unregister(plugin)
    discard_registrations(provider)
    for name, claims in list(_claims.items()):
        claims[:] = [c for c in claims if c[1] != provider]
        if claims:
            _backends[name] = _winner(name, claims)
        else:
            del _claims[name]
            _backends.pop(name, None)


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
        info = info_of(ep)
        if info.name in _plugins:
            return _plugins[info.name]
        fresh = _module_of(ep) not in sys.modules
        try:
            plugin = _import(ep, info)
        except Exception as e:
            _fail(info, e)
            raise PluginError(_failures[-1].failed_to_load(), plugin=info.name) from e
        pm = plugin_manager()
        if pm.is_registered(plugin):  # registered by hand under another name
            return _plugins[pm.get_name(plugin) or ""]
        if not _activate(plugin, info):
            if fresh:
                sys.modules.pop(_module_of(ep), None)  # a retry imports (and registers) it again
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
    global _loaded, _loading
    with _lock:
        _loading = True  # listeners that query plugins while we unregister must not rediscover
        try:
            for name in list(_plugins):
                unregister_plugin(name)
        finally:
            _loading = False
        _failures.clear()
        _backends.clear()
        _claims.clear()
        _loaded = False
