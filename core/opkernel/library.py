"""Op libraries loaded at run time: ``ok.load_op_library``, as ``tf.load_op_library``.

A library is a plugin (a module with ``opkernel`` hooks): an installed
distribution's entry point, any importable module, or a ``.py`` file; or a shared
object built against the C ABI (``opkernel/c_api.h``, :mod:`opkernel._c_library`).  Loading
runs its hooks through the same plugin manager as discovery, once; the result
is a module-like :class:`OpLibrary` whose attributes are the generated wrappers
of exactly the ops that library registered.

:data:`KNOWN_OP_PACKAGES`, the op packages opkernel knows of (defined in the
registries' layer, ``opkernel._known_packages``, where the errors that name them
are raised), is re-exported here.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import _c_library, op_registry, plugins
from ._provenance import Provider, providing
from ._known_packages import KNOWN_OP_PACKAGES, KnownOpPackage, known_package_for
from .errors import PluginError

__all__ = ["KNOWN_OP_PACKAGES", "KnownOpPackage", "OpLibrary", "load_op_library", "known_package_for"]

_lock = threading.RLock()
_files: dict[Path, str] = {}  # a loaded .py file -> its plugin name


class OpLibrary(types.ModuleType):
    """What :func:`load_op_library` returns: one attribute per op of the library,
    its generated wrapper (``lib.median_pool2d`` for ``Addons>MedianPool2D``).

    ``op_names`` lists the ops; ``plugin``, ``distribution`` and ``version`` say
    where they came from.
    """

    def __init__(self, info: plugins.PluginInfo) -> None:
        super().__init__(info.module, f"opkernel op library {info.name!r}")
        self._info = info

    @property
    def plugin(self) -> str:
        return self._info.name

    @property
    def distribution(self) -> str | None:
        return self._info.distribution

    @property
    def version(self) -> str | None:
        return self._info.version

    @property
    def provider(self) -> Provider:
        return self._info.provider

    @property
    def op_names(self) -> list[str]:
        """The ops this library registered, sorted."""
        snap = op_registry.snapshot()
        mine = [n for n, r in snap.pending.items() if r.provider == self._info.provider]
        mine += [n for n, d in snap.ops.items() if d.provider == self._info.provider]
        return sorted(mine)

    def _index(self) -> dict[str, str]:
        from .ops._gen import split_namespace

        return {split_namespace(name)[1]: name for name in self.op_names}

    def __getattr__(self, attr: str) -> Callable[..., Any]:
        if attr.startswith("__"):
            raise AttributeError(attr)
        op_name = self._index().get(attr)
        if op_name is None:
            raise AttributeError(
                f"op library {self._info.name!r} has no op {attr!r}; its ops: {sorted(self._index()) or 'none'}"
            )
        from .ops import _wrapper

        fn = _wrapper(op_name)
        self.__dict__[attr] = fn  # later lookups find it without building the wrapper again
        return fn

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._index()})

    def __repr__(self) -> str:
        where = f" from {self._info.distribution} {self._info.version}" if self._info.distribution else ""
        return f"<opkernel op library {self._info.name!r}{where}: {', '.join(self.op_names) or 'no ops'}>"


def _entry_point(target: str) -> Any:
    """The ``opkernel`` entry point named ``target``, or whose module is ``target``."""
    found = list(plugins.entry_points(group=plugins.ENTRY_POINT_GROUP))
    by_name = [ep for ep in found if ep.name == target]
    if by_name:
        clash = plugins.name_clash(target, [plugins.info_of(ep) for ep in by_name])
        if clash is not None:  # which one is meant cannot be told: load neither
            raise PluginError(f"load_op_library: {clash}", plugin=target)
        return by_name[0]
    return next((ep for ep in found if ep.value.split(":", 1)[0].strip() == target), None)


def _is_path(target: str) -> bool:
    return (
        target.endswith((".py", ".so", ".dylib", ".dll"))
        or os.sep in target
        or (os.altsep is not None and os.altsep in target)
    )


def _load_file(path: Path) -> str:
    if path in _files and _files[path] in {p.name for p in plugins.plugins()}:
        return _files[path]
    if not path.is_file():
        raise PluginError(f"load_op_library: no such file: {str(path)!r}", plugin=str(path))
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    module_name = "_opkernel_library_" + re.sub(r"\W", "_", path.stem) + "_" + digest
    if path.suffix != ".py" and _c_library.is_shared_object(path):
        _files[path] = _register(_c_library.load(path, module_name), str(path), module_name)
        return _files[path]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"load_op_library: cannot import {str(path)!r} as a Python module", plugin=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    provider = Provider(str(path))
    try:
        with providing(provider):  # what the file registers at import belongs to the library
            spec.loader.exec_module(module)
    except BaseException as e:
        _undo(provider, module_name)
        if not isinstance(e, Exception):
            raise
        raise PluginError(
            f"load_op_library: importing {str(path)!r} failed: {type(e).__name__}: {e}", plugin=str(path)
        ) from e
    _files[path] = _register(module, str(path), module_name)
    return _files[path]


def _undo(provider: Provider, module_name: str) -> None:
    """Roll back a library that failed part-way: what it registered, and its module, so
    that a retry imports it afresh instead of finding its names taken."""
    plugins.discard_registrations(provider)
    sys.modules.pop(module_name, None)


def _register(module: types.ModuleType, name: str, module_name: str) -> str:
    try:
        return plugins.register_plugin(module, name=name)
    except BaseException:
        _undo(Provider(name), module_name)
        raise


def _load_module(target: str) -> str:
    fresh = target not in sys.modules
    try:
        with providing(Provider(target)):  # what the module registers at import belongs to the library
            module = importlib.import_module(target)
    except ImportError as e:
        if fresh:
            _undo(Provider(target), target)
        failed = _failed_plugin_of_module(target)
        if failed is not None:
            raise PluginError(f"load_op_library({target!r}): {failed.failed_to_load()}", plugin=failed.plugin) from e
        raise PluginError(
            f"load_op_library: {target!r} is neither an installed plugin's name, nor an importable module, "
            f"nor a .py file ({type(e).__name__}: {e})",
            plugin=target,
        ) from e
    except BaseException as e:
        if fresh:
            _undo(Provider(target), target)
        if not isinstance(e, Exception):
            raise
        failed = _failed_plugin_of_module(target)
        if failed is not None:
            raise PluginError(f"load_op_library({target!r}): {failed.failed_to_load()}", plugin=failed.plugin) from e
        raise PluginError(
            f"load_op_library: importing {target!r} failed: {type(e).__name__}: {e}", plugin=target
        ) from e
    problem = _shadowing(target, module)
    if problem is not None:
        if fresh:
            _undo(Provider(target), target)
        raise PluginError(f"load_op_library: {problem}", plugin=target)
    if not fresh:
        return plugins.register_plugin(module, name=target)
    return _register(module, target, target)


def _failed_plugin_of_module(module: str) -> plugins.PluginFailure | None:
    """The recorded failure of the installed plugin whose entry point names ``module``."""
    by_module = {ep.name for ep in plugins.entry_points(group=plugins.ENTRY_POINT_GROUP) if plugins._module_of(ep) == module}
    return next((f for f in plugins.plugin_errors() if f.plugin in by_module), None)


def _shadowing(target: str, module: types.ModuleType) -> str | None:
    """Why ``module`` is not the installed distribution's module of that name (a file of
    the same name earlier on sys.path, e.g. in the current directory), or None."""
    origin = getattr(module, "__file__", None)
    if origin is None:
        return None
    from importlib import metadata

    for name in metadata.packages_distributions().get(target.split(".", 1)[0], []):
        try:
            problem = plugins.shadowed_by(target, origin, metadata.distribution(name))
        except metadata.PackageNotFoundError:
            continue
        if problem is not None:
            return problem
    return None


def load_op_library(target: str | os.PathLike[str]) -> OpLibrary:
    """Register an op library and return its ops' wrappers.

    ``target`` is an installed distribution's plugin name (its entry point in the
    group ``opkernel``, e.g. ``"medianpool"``), an importable module name
    (``"opkernel_medianpool"``), the path of a ``.py`` file, or the path of a shared
    object built against the C ABI (``"./zero_out.so"``: docs/c-kernels.md).  The library's hooks
    run as any plugin's do; loading it a second time (or loading a plugin that
    discovery already loaded) registers nothing again.  Raises PluginError when
    the target cannot be found or its hooks fail (nothing is left registered).
    """
    plugins.ensure_loaded()
    text = os.fspath(target)
    with _lock:
        if _is_path(text):
            name = _load_file(Path(text).expanduser().resolve())
        else:
            ep = _entry_point(text)
            name = plugins.load_entry_point(ep).name if ep is not None else _load_module(text)
    info = next(p for p in plugins.plugins() if p.name == name)
    return OpLibrary(info)
