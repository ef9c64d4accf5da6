"""The exception hierarchy of opkernel.

Every exception carries the context it was raised in (the op, the backend, the
plugin) as attributes, and subclasses the built-in category a caller would
naturally catch (``ValueError``, ``TypeError``, ``LookupError``), so ordinary
``except`` clauses keep working.  Messages follow one pattern: op first, names
quoted, what was expected, what was given, the choices, the fix.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "OpkernelError",
    "OpSpecError",
    "InvalidArgumentError",
    "ShapeError",
    "GraphFormatError",
    "IncompatibleOpError",
    "OpTypeError",
    "SymbolicTensorError",
    "AlreadyExistsError",
    "OpNotFoundError",
    "KernelNotFoundError",
    "GradientNotFoundError",
    "BackendNotFoundError",
    "BackendUnavailableError",
    "PluginError",
    "ResourceNotFoundError",
    "FailedPreconditionError",
    "UnimplementedError",
    "CancelledError",
    "OutOfRangeError",
    "DLPackError",
    "ResourceExhaustedError",
    "InternalError",
    "NativeError",
    "KernelFallbackWarning",
]


class OpkernelError(Exception):
    """Base class of every error raised by opkernel.

    ``op`` is the op name the error concerns, when there is one.
    """

    def __init__(self, message: str, *, op: str | None = None, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        for key, value in context.items():
            setattr(self, key, value)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickling (a Dask worker's error reaching the client, ``multiprocessing``, ``copy``)
        keeps the class, the message, ``op`` and every context attribute.

        A chained exception (``__cause__``, ``__context__``) from a native library that does
        not pickle (pyopencl's errors hold a driver record) is replaced, on this error, by a
        :class:`NativeError` with its class name and message: tblib, which Dask uses, pickles
        the chain, and one unpicklable link would turn the whole error into a bare
        ``Exception``.  A context attribute that does not pickle is kept as its ``repr``."""
        for name in ("__cause__", "__context__"):
            linked = getattr(self, name)
            if linked is not None and not isinstance(linked, (OpkernelError, NativeError)) and not _pickles(linked):
                setattr(self, name, NativeError.standing_for(linked))
        state = {k: v if _pickles(v) else repr(v) for k, v in self.__dict__.items()}
        return (type(self), (self.message,), state)


class NativeError(Exception):
    """Stands for an exception of a native library that cannot be pickled, in the chain of
    an opkernel error that was (``OpkernelError.__reduce__``): ``type_name`` is its class's
    qualified name, and the message is its own."""

    def __init__(self, message: str, type_name: str = "") -> None:
        super().__init__(message, type_name)
        self.message = message
        self.type_name = type_name

    @classmethod
    def standing_for(cls, error: BaseException) -> NativeError:
        kind = type(error)
        stand_in = cls(str(error), f"{kind.__module__}.{kind.__qualname__}")
        stand_in.__traceback__ = None
        return stand_in

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}" if self.type_name else self.message


def _pickles(value: Any) -> bool:
    import pickle  # only when an error is pickled

    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True


class OpSpecError(OpkernelError, ValueError):
    """A malformed op spec (``.input``/``.output``/``.attr``) or an op definition
    that fails its cross-checks when it is finalized."""


class InvalidArgumentError(OpkernelError, ValueError):
    """A call's arguments break the op's contract (TensorFlow's InvalidArgument,
    and what ``ctx.require`` raises)."""


class ShapeError(InvalidArgumentError):
    """Shapes that are incompatible with the op's shape function."""


class GraphFormatError(InvalidArgumentError):
    """A saved graph file (``ok.load``) that is damaged, hostile or of another format
    version; the message names the file and where in it the problem is (``.path``)."""


class IncompatibleOpError(OpkernelError, ValueError):
    """An op a saved graph needs is installed, but its definition changed since the
    graph was saved in a way that breaks it; ``.reasons`` names the compat rules."""


class OpTypeError(OpkernelError, TypeError):
    """An input of the wrong dtype or kind (a plain tensor given to a ``Ref`` input)."""


class SymbolicTensorError(OpTypeError):
    """A value was asked of a placeholder while tracing (``.numpy()``, ``bool(t)``,
    ``float(t)``): at trace time a tensor argument has a shape and dtype, no value.
    (Also ``opkernel.function.SymbolicTensorError``.)"""


class AlreadyExistsError(OpkernelError, ValueError):
    """A second, different registration under a key that is already taken."""


class OpNotFoundError(OpkernelError, LookupError):
    """No op of that name is registered."""


class KernelNotFoundError(OpkernelError, LookupError):
    """No kernel matches (op, backend, types, label)."""


class GradientNotFoundError(OpkernelError, LookupError):
    """No gradient is registered for an op on a path that needs one."""


class BackendNotFoundError(OpkernelError, LookupError):
    """A backend name that is unknown or not available."""


class BackendUnavailableError(BackendNotFoundError):
    """A backend that is installed but cannot be initialised here."""


class PluginError(OpkernelError, RuntimeError):
    """A plugin failed to load or one of its hooks raised.  ``.plugin`` names it."""

    def __init__(self, message: str, *, plugin: str | None = None, **context: Any) -> None:
        super().__init__(message, plugin=plugin, **context)


class ResourceNotFoundError(OpkernelError, LookupError):
    """No resource under that container and name in the backend's resource manager."""


class FailedPreconditionError(OpkernelError, RuntimeError):
    """The op's inputs are fine but the state it works on is not ready for it: a variable
    read before its first assignment, a table looked up before it is initialized
    (TensorFlow's FailedPreconditionError)."""


class UnimplementedError(OpkernelError, NotImplementedError):
    """The op cannot do this for this resource, by design: an insert into a table that is
    initialized once (TensorFlow's UnimplementedError)."""


class CancelledError(OpkernelError, RuntimeError):
    """An operation that was cancelled before it could finish: an asynchronous kernel
    whose wait was given up (a channel or queue closed while it waited)."""


class OutOfRangeError(OpkernelError, IndexError):
    """Nothing more will come: a take from a closed, empty channel or queue (TensorFlow's
    OUT_OF_RANGE, which ends an input loop)."""


class DLPackError(OpkernelError, BufferError):
    """A tensor that cannot be exchanged through DLPack as asked (``Tensor.__dlpack__``,
    ``ok.from_dlpack``): memory without a DLPack pointer, a device it cannot reach, or a
    ``copy=False`` that would break the values-are-values rule."""


class ResourceExhaustedError(OpkernelError, MemoryError):
    """A device ran out of memory; ``.requested_bytes`` says how much was asked for."""


class InternalError(OpkernelError, RuntimeError):
    """A kernel or backend broke an invariant it promised to keep."""


class KernelFallbackWarning(UserWarning):
    """An op ran on a fallback backend (``ok.config.kernel_fallback``) because the
    active backend has no kernel for it.  Issued once per (op, from, to) and process;
    every fallback is counted in ``ok.config.fallbacks``.  Turn it into an error
    with ``warnings.simplefilter("error", KernelFallbackWarning)`` to find each op a
    backend still lacks."""
