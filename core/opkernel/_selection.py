"""Kernel selection: per-op dispatch state (``OpHandle`` and its signature caches),
the choice of kernel for a bound call (``select_kernel``, with errors that say which
backends and packages do have one), the building of a call's ``Signature``, and the
kernel fallback (``ok.config.kernel_fallback``), which runs a call the active backend
has no kernel for on another backend.
"""

from __future__ import annotations

import copy
import inspect
import os
import threading
import warnings
from typing import Any, Callable, Mapping

import numpy as np

from . import kernels as kernel_registry
from . import op_registry, plugins
from ._binding import format_attr
from ._calls import Signature, arg_dtypes, fast_call, input_lengths, invoker, output_dtypes, packer
from ._context import FALLBACK, PROFILERS, backend_instance, config, lock
from ._convert import moved
from ._known_packages import known_package_for
from .backend import Backend
from .dtypes import DType
from .errors import BackendNotFoundError, BackendUnavailableError, KernelFallbackWarning, KernelNotFoundError
from .kernels import GENERIC, KernelDef
from .op_registry import OpDef
from .shapes import output_size_inputs
from .tensor import Tensor, Variable, update_lock

class OpHandle:
    """Per-op dispatch state: the finalized OpDef and its signature caches.

    A handle lives as long as the process; when plugins or kernels change it is
    reset in place, so generated wrappers can hold on to it.
    ``fast`` maps ``(backend, input dtypes..., attr value, attr class, ...)``
    to a signature's ``call``, for calls whose inputs are all tensors on the
    active backend; ``cache`` maps the fully bound signature.
    """

    __slots__ = ("name", "_op_def", "cache", "fast", "literal", "_validated", "generation", "build_lock")

    def __init__(self, name: str) -> None:
        self.name = name
        self._op_def: OpDef | None = None
        self.cache: dict[Any, Signature] = {}
        self.fast: dict[Any, Callable[..., Any]] = {}
        #: Calls with Python literal or numpy arguments (``mean(x, [0])``, ``mul(g, 2.0)``):
        #: ``(backend, label, input keys, attr keys)`` -> the signature, the dtype each
        #: such argument converts to (None where the caller passed a tensor), and whether
        #: an output may be a view of a caller's numpy array (see ``_unaliased``).
        self.literal: dict[Any, tuple[Signature, list[Any], bool, tuple[int, ...]]] = {}
        self._validated: set[int] = set()
        self.generation = 0  # bumped by reset(): a signature built before it must not be stored
        self.build_lock = threading.RLock()  # one construction per signature, even when threads race

    @property
    def op_def(self) -> OpDef:
        op_def = self._op_def
        if op_def is None:
            plugins.ensure_loaded()
            op_def = self._op_def = op_registry.get_op_def(self.name)
        return op_def

    def reset(self) -> None:
        with cache_lock:
            self.generation += 1
            self.cache.clear()
            self.fast.clear()
            self.literal.clear()
            self._validated.clear()
            self._op_def = None


handles: dict[str, OpHandle] = {}
#: Held while a handle is reset and while a signature is stored, so that a signature
#: built from the kernels before a registration is never stored after its reset.
cache_lock = threading.Lock()


def op_handle(name: str) -> OpHandle:
    """The handle of op ``name`` (finalizing the op)."""
    h = handles.get(name)
    if h is None:
        h = handles.setdefault(name, OpHandle(name))
    h.op_def  # noqa: B018 -- finalize now, so unknown ops fail here
    return h


def reset_handles() -> None:
    """Forget every cached signature (plugins, ops or kernels changed)."""
    for h in list(handles.values()):
        h.reset()


kernel_registry.on_change(reset_handles)
plugins.on_change(reset_handles)


def select_kernel(op_def: OpDef, backend: str, attrs: Mapping[str, Any], label: str | None = None) -> KernelDef:
    """The kernel that would run: highest priority on ``backend`` whose constraints and
    label match, else a generic kernel; raises KernelNotFoundError."""
    for where in (backend, GENERIC):
        for k in kernel_registry.kernels_for(op_def.name, where):
            if k.label == label and k.matches(attrs):
                return k
    raise _no_kernel(op_def, backend, attrs, label)


def _no_kernel(op_def: OpDef, backend: str, attrs: Mapping[str, Any], label: str | None) -> KernelNotFoundError:
    types = ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(attrs.items()) if isinstance(v, DType) or (isinstance(v, tuple) and v and isinstance(v[0], DType)))
    registered = [
        f"{k.backend} ({k.describe_constraints()}{', label=' + repr(k.label) if k.label else ''})"
        for b in kernel_registry.backends_for(op_def.name)
        for k in kernel_registry.kernels_for(op_def.name, b)
    ]
    on_backend = kernel_registry.kernels_for(op_def.name, backend)
    if not registered:
        reason = "no kernel is registered on any backend"
    elif not on_backend:
        reason = f"no kernel on backend {backend!r}"
    elif not any(k.matches(attrs) for k in on_backend):
        reason = f"no kernel on backend {backend!r} for these types"
    else:
        reason = f"no kernel on backend {backend!r} with label {label!r}"
    where = f" with {types}" if types else ""
    listing = "; registered: " + ", ".join(registered) if registered else ""
    return KernelNotFoundError(
        f"{reason}: op {op_def.name!r}{where}{listing}.{_providers_hint(op_def.name, backend)}"
        f"{_fallback_hint(op_def.name, backend, attrs, label)}",
        op=op_def.name, backend=backend,
    )


def _fallback_hint(op: str, backend: str, attrs: Mapping[str, Any], label: str | None) -> str:
    """The way out through ``ok.config.kernel_fallback``, when another backend has a
    kernel for the call and no fallback is in effect."""
    if config.kernel_fallback:
        return ""
    installed = plugins.backend_classes()
    others = [
        b for b in kernel_registry.backends_for(op)
        if b not in (backend, GENERIC) and b in installed and any(k.label == label and k.matches(attrs) for k in kernel_registry.kernels_for(op, b))
    ]
    if not others:
        return ""
    name = "cpu" if "cpu" in others else sorted(others)[0]
    return (
        f" To run it on {name!r} instead (its inputs copied there, its outputs back), set "
        f"ok.config.kernel_fallback = ({name!r},), OPKERNEL_KERNEL_FALLBACK={name}, or use "
        f"`with ok.kernel_fallback({name!r}):`."
    )


def _providers_hint(op: str, backend: str) -> str:
    """Which installed distributions provide kernels of ``op``, on which backends, and which
    known op package (``opkernel.library.KNOWN_OP_PACKAGES``) to install for ``backend``."""
    by_package: dict[str, set[str]] = {}
    for b in kernel_registry.backends_for(op):
        for k in kernel_registry.kernels_for(op, b):
            if k.provider.distribution is not None:  # an installed package, not a script or a test
                by_package.setdefault(k.provider.distribution, set()).add(b)
    hint = "".join(f" {p} provides kernels for: {', '.join(sorted(bs))}." for p, bs in sorted(by_package.items()))
    known = known_package_for(op)
    if known is not None and known.distribution not in by_package and {backend, GENERIC} & set(known.backends):
        hint += f" {known.distribution} provides kernels for: {', '.join(known.backends)}; pip install {known.distribution}."
    return hint


def build_signature(op: OpHandle, attrs: dict[str, Any], be: Backend, label: str | None, fallback: bool = True) -> Signature:
    op_def = op.op_def
    try:
        kdef = select_kernel(op_def, be.name, attrs, label)
    except KernelNotFoundError as e:
        if not fallback or not config.kernel_fallback:
            raise
        return FallbackSignature(op, attrs, be, label, e)
    if id(kdef) not in op._validated:
        kdef.validate_against(op_def)
        op._validated.add(id(kdef))
    out_dtypes, out_lengths = output_dtypes(op_def, attrs)
    in_lengths = input_lengths(op_def, attrs)
    run = invoker(op_def, kdef, attrs, be, out_dtypes, in_lengths, out_lengths)
    sig = Signature(run, out_dtypes, packer(op_def, out_lengths), kdef, op_def, attrs, be)
    fast = fast_call(sig, kdef, in_lengths, out_lengths)
    if fast is not None:
        sig.call = fast
    sized_by = output_size_inputs(op_def.shape_fn)
    if sized_by:
        from ._bounds import size_guard  # only ops whose output sizes come from input values use it

        sig.call = size_guard(sig.call, op_def, attrs, be, out_dtypes, in_lengths, sized_by)
    return sig

# ------------------------------------------------------------ kernel fallback

#: (op, from, to) already warned about: the warning is issued once per key and process.
_WARNED: set[tuple[str, str, str]] = set()


class FallbackSignature(Signature):
    """A call signature the active backend has no kernel for, run on a fallback backend.

    Which backend runs it depends on the fallback in effect at each call (a
    ContextVar), so the route is looked up per call in ``routes``, keyed by that
    setting: the signature can sit in the op's caches like any other, and a call
    made after the fallback is turned off raises the KernelNotFoundError of a call
    without one.  A kernel registered later resets the caches, so it wins from then on."""

    __slots__ = ("handle", "label", "error", "routes", "ref_positions", "in_dtypes")

    def __init__(self, op: OpHandle, attrs: dict[str, Any], be: Backend, label: str | None, error: KernelNotFoundError) -> None:
        op_def = op.op_def
        self.handle, self.label, self.error = op, label, error
        self.routes: dict[tuple[str, ...], Signature | KernelNotFoundError] = {}
        first = self._route(config.kernel_fallback, be, attrs)  # raises when no listed backend has a kernel
        out_dtypes, out_lengths = output_dtypes(op_def, attrs)
        in_lengths = input_lengths(op_def, attrs)
        super().__init__(self._run, out_dtypes, packer(op_def, out_lengths), first.kernel, op_def, attrs, be)
        self.call = self._fallback_call
        self.refs = []
        self.in_dtypes = [dt for arg, n in zip(op_def.inputs, in_lengths) for dt in arg_dtypes(arg, n, attrs)]
        self.ref_positions = frozenset(
            i for i, is_ref in enumerate(
                a.is_ref for a, n in zip(op_def.inputs, in_lengths) for _ in range(1 if n is None else n)
            ) if is_ref
        )

    def _route(self, setting: tuple[str, ...], be: Backend, attrs: dict[str, Any]) -> Signature:
        route = self.routes.get(setting)
        if route is None:
            route = self.routes[setting] = self._resolve(setting, be, attrs)
        if isinstance(route, KernelNotFoundError):
            raise copy.copy(route)
        return route

    def _resolve(self, setting: tuple[str, ...], be: Backend, attrs: dict[str, Any]) -> Signature | KernelNotFoundError:
        if not setting:  # the error a call without a fallback gets, with its way out
            return _no_kernel(self.handle.op_def, be.name, attrs, self.label)
        tried: list[str] = []
        for name in setting:
            if name == be.name:
                continue
            try:
                fb = backend_instance(name)
            except BackendUnavailableError as e:
                tried.append(f"{name!r} (unavailable here: {e})")
                continue
            except BackendNotFoundError as e:
                raise BackendNotFoundError(f"the kernel fallback {setting} names backend {name!r}: {e}", backend=name) from e
            try:
                return build_signature(self.handle, attrs, fb, self.label, fallback=False)
            except KernelNotFoundError:
                tried.append(f"{name!r} (no kernel for these types either)")
        error = self.error
        return KernelNotFoundError(
            f"{error.message} The kernel fallback {setting} has none: tried {', '.join(tried) or 'no other backend'}.",
            op=error.op, backend=be.name,
        )

    def _fallback_call(self, *inputs: Tensor) -> Any:
        setting = FALLBACK.get()
        if setting is None:
            setting = config._kernel_fallback
        route = self.routes.get(setting)
        if route is None or route.__class__ is KernelNotFoundError:
            route = self._route(setting, self.backend, self.attrs)
        be, fb = self.backend, route.backend  # type: ignore[union-attr]
        key = (self.op_def.name, be.name, fb.name)
        if key not in _WARNED:
            _warn_fallback(key, self.attrs)
        refs = self.ref_positions
        # A Ref input goes over as a copy of its own (a host backend's to_numpy and
        # from_numpy may hand over the variable's memory, which the kernel would then
        # update in place, bypassing the copy-on-write that protects read_value()
        # snapshots and .numpy() arrays); the update comes back as the variable's new value.
        with update_lock(*[inputs[i] for i in refs]):  # type: ignore[arg-type]  # none: an empty lock
            copies = [
                Variable._view(fb.from_numpy(np.array(be.to_numpy(x._value))), x._dtype, fb) if i in refs else moved(x, fb)
                for i, x in enumerate(inputs)
            ]
            result = route.call(*copies)  # type: ignore[union-attr]
            for i in refs:  # the update made on the fallback backend, written back as the variable's new value
                var = inputs[i]
                var._value = be.from_numpy(fb.to_numpy(copies[i]._value))
                var._version += 1  # type: ignore[attr-defined]
        result = _map_outputs(result, lambda t: moved(t, be))
        with lock:
            config._fallbacks[key] = config._fallbacks.get(key, 0) + 1
        for p in list(PROFILERS):
            add = getattr(p, "add_fallback", None)
            if add is not None:
                add(*key)
        return result

    def _run(self, flat: list[Any]) -> list[Any]:
        """The signature's ``run``: native values in and out, through ``call``."""
        be = self.backend
        result = self._fallback_call(*[
            (Variable._view if i in self.ref_positions else Tensor)(v, dt, be) for i, (v, dt) in enumerate(zip(flat, self.in_dtypes))
        ])
        outs: list[Any] = []
        _map_outputs(result, lambda t: outs.append(t._value))
        return outs


def _map_outputs(result: Any, fn: Callable[[Tensor], Any]) -> Any:
    """A packed op result (a tensor, a list, a named tuple of those, or None) with ``fn``
    applied to each tensor, in output order."""
    if result is None:
        return None
    if isinstance(result, Tensor):
        return fn(result)
    if result.__class__ is list:
        return [fn(t) for t in result]
    return result._make([_map_outputs(part, fn) for part in result])


def _warn_fallback(key: tuple[str, str, str], attrs: Mapping[str, Any]) -> None:
    """The warning of a fallback, once per (op, from, to), pointing at the caller's line."""
    op, source, target = key
    types = ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(attrs.items()) if isinstance(v, DType))
    level, frame = 1, inspect.currentframe()
    here = os.path.dirname(os.path.abspath(__file__))
    while frame is not None and (frame.f_code.co_filename.startswith(here) or frame.f_code.co_filename.startswith("<opkernel")):
        frame, level = frame.f_back, level + 1
    with lock:  # threads falling back at once: one of them warns
        if key in _WARNED:
            return
        _WARNED.add(key)
    try:
        warnings.warn(
            f"op {op!r} has no kernel on backend {source!r}{' for ' + types if types else ''}: running it on "
            f"{target!r} (ok.config.kernel_fallback), its inputs copied there and its outputs back. Warned once per "
            f"op and pair of backends; ok.config.fallbacks counts every call.",
            KernelFallbackWarning, stacklevel=level,
        )
    except BaseException:  # a warnings filter raising it: the next call raises again
        with lock:
            _WARNED.discard(key)
        raise
