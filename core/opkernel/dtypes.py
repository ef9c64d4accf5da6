"""Data types: TensorFlow's set of dtypes, their numpy mapping and type classes.

Every dtype is a singleton :class:`DType`, so dtypes compare by identity and
are cheap dictionary keys.  :func:`as_dtype` turns anything a user may write
for a dtype (a name, ``"DT_FLOAT"``, a numpy dtype, a Python type) into one.

The type classes (``numbertype``, ``realnumbertype``, ``quantizedtype``) are
the sets an op spec may name as an attr's type, exactly as in TensorFlow's
``REGISTER_OP`` grammar.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, TypeAlias

import numpy as np

from .errors import OpTypeError

__all__ = [
    "DType",
    "as_dtype",
    "ALL_DTYPES",
    "DTYPES",
    "TYPE_CLASSES",
    "bool_",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "half",
    "bfloat16",
    "float32",
    "float64",
    "double",
    "complex64",
    "complex128",
    "string",
    "resource",
    "qint8",
    "quint8",
    "qint16",
    "quint16",
    "qint32",
    "numbertype",
    "numerictype",
    "realnumbertype",
    "realnumerictype",
    "quantizedtype",
]

NumpyDType: TypeAlias = "np.dtype[Any]"

_FLOAT, _INT, _UINT, _COMPLEX, _QUANT, _BOOL, _STRING, _RESOURCE = (
    "float", "int", "uint", "complex", "quantized", "bool", "string", "resource"
)


class DType:
    """One tensor element type, e.g. ``float32``; a singleton, compared by identity.

    ``name`` is TensorFlow's Python name (``"float32"``), ``enum`` its
    ``DataType`` enum name (``"DT_FLOAT"``) and ``spec_name`` the name the
    op-spec grammar prints (``"float"``).
    """

    __slots__ = ("name", "enum", "spec_name", "as_numpy_dtype", "np", "_kind")

    name: str
    enum: str
    spec_name: str
    as_numpy_dtype: type[Any]
    np: NumpyDType

    def __init__(self, name: str, enum: str, spec_name: str, scalar: type[Any] | None, kind: str) -> None:
        self.name = name
        self.enum = enum
        self.spec_name = spec_name
        if scalar is not None:  # None: bfloat16, whose numpy type is filled in at first use
            self.as_numpy_dtype = scalar
            self.np = np.dtype(scalar)
        self._kind = kind

    if not TYPE_CHECKING:

        def __getattr__(self, attr: str) -> Any:
            # Reached only for a slot never set: bfloat16's ``np`` and
            # ``as_numpy_dtype`` before their first use (see _load_bfloat16).
            if attr in ("np", "as_numpy_dtype") and object.__getattribute__(self, "name") == "bfloat16":
                _load_bfloat16()
                return object.__getattribute__(self, attr)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")

    def __repr__(self) -> str:
        return f"ok.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        # Pickling by name keeps the singletons unique across processes.
        return _PICKLE_NAMES[self.name]

    @property
    def is_floating(self) -> bool:
        """True for float16, bfloat16, float32 and float64."""
        return self._kind == _FLOAT

    @property
    def is_integer(self) -> bool:
        """True for the signed and unsigned integers (not the quantized types, as in TF)."""
        return self._kind in (_INT, _UINT)

    @property
    def is_unsigned(self) -> bool:
        """True for uint8..uint64 and the unsigned quantized types."""
        return self._kind == _UINT or self.name.startswith("quint")

    @property
    def is_complex(self) -> bool:
        """True for complex64 and complex128."""
        return self._kind == _COMPLEX

    @property
    def real_dtype(self) -> DType:
        """The dtype of a complex dtype's parts (complex64 -> float32, complex128 ->
        float64); every other dtype is its own real dtype (TensorFlow's ``real_dtype``)."""
        if self._kind == _COMPLEX:
            return float32 if self.name == "complex64" else float64
        return self

    @property
    def is_quantized(self) -> bool:
        """True for qint8, quint8, qint16, quint16 and qint32."""
        return self._kind == _QUANT

    @property
    def is_bool(self) -> bool:
        """True for bool."""
        return self._kind == _BOOL

    @property
    def is_numeric(self) -> bool:
        """True for every dtype in ``numbertype`` (everything but bool, string and resource)."""
        return self._kind not in (_BOOL, _STRING, _RESOURCE)

    @property
    def is_resource(self) -> bool:
        """True for ``resource``: tensors of handles to resources (``opkernel.resources``)."""
        return self._kind == _RESOURCE

    @property
    def in_host_memory(self) -> bool:
        """True for the dtypes whose tensors every backend keeps as numpy object arrays in
        host memory: ``string`` and ``resource``."""
        return self._kind in (_STRING, _RESOURCE)

    @property
    def size(self) -> int:
        """Bytes per element (the numpy itemsize; 8 for the object-backed string)."""
        return self.np.itemsize

    @property
    def min(self) -> int | float:
        """The smallest finite value of a real dtype (integer, floating, quantized)."""
        return self._limits()[0]

    @property
    def max(self) -> int | float:
        """The largest finite value of a real dtype (integer, floating, quantized)."""
        return self._limits()[1]

    def _limits(self) -> tuple[int | float, int | float]:
        if self._kind == _FLOAT:
            import ml_dtypes  # its finfo also knows bfloat16

            finfo: Callable[[Any], Any] = ml_dtypes.finfo  # not annotated, hence the typed alias
            info = finfo(self.np)
            return float(info.min), float(info.max)
        if self._kind in (_INT, _UINT, _QUANT):
            iinfo = np.iinfo(self.np)
            return int(iinfo.min), int(iinfo.max)
        raise OpTypeError(f"dtype {self.name} has no min/max: it is not a real number type")


_PICKLE_NAMES: dict[str, str] = {}


def _make(name: str, enum: str, spec_name: str, scalar: type[Any] | None, kind: str) -> DType:
    _PICKLE_NAMES[name] = "bool_" if name == "bool" else name
    return DType(name, enum, spec_name, scalar, kind)


bool_ = _make("bool", "DT_BOOL", "bool", np.bool_, _BOOL)
int8 = _make("int8", "DT_INT8", "int8", np.int8, _INT)
int16 = _make("int16", "DT_INT16", "int16", np.int16, _INT)
int32 = _make("int32", "DT_INT32", "int32", np.int32, _INT)
int64 = _make("int64", "DT_INT64", "int64", np.int64, _INT)
uint8 = _make("uint8", "DT_UINT8", "uint8", np.uint8, _UINT)
uint16 = _make("uint16", "DT_UINT16", "uint16", np.uint16, _UINT)
uint32 = _make("uint32", "DT_UINT32", "uint32", np.uint32, _UINT)
uint64 = _make("uint64", "DT_UINT64", "uint64", np.uint64, _UINT)
float16 = _make("float16", "DT_HALF", "half", np.float16, _FLOAT)
# Its numpy type comes from ml_dtypes, imported at first use (~5 ms): see _load_bfloat16.
bfloat16 = _make("bfloat16", "DT_BFLOAT16", "bfloat16", None, _FLOAT)
float32 = _make("float32", "DT_FLOAT", "float", np.float32, _FLOAT)
float64 = _make("float64", "DT_DOUBLE", "double", np.float64, _FLOAT)
complex64 = _make("complex64", "DT_COMPLEX64", "complex64", np.complex64, _COMPLEX)
complex128 = _make("complex128", "DT_COMPLEX128", "complex128", np.complex128, _COMPLEX)
string = _make("string", "DT_STRING", "string", np.object_, _STRING)
qint8 = _make("qint8", "DT_QINT8", "qint8", np.int8, _QUANT)
quint8 = _make("quint8", "DT_QUINT8", "quint8", np.uint8, _QUANT)
qint16 = _make("qint16", "DT_QINT16", "qint16", np.int16, _QUANT)
quint16 = _make("quint16", "DT_QUINT16", "quint16", np.uint16, _QUANT)
qint32 = _make("qint32", "DT_QINT32", "qint32", np.int32, _QUANT)
#: Handles to resources (a variable, a table, a queue: ``opkernel.resources``), as
#: TensorFlow's DT_RESOURCE: numpy object arrays of ``ResourceHandle`` in host memory.
#: An op takes or makes handles by naming ``resource`` as an argument's type; a ``type``
#: attr does not range over it (TensorFlow's does: its Identity forwards handles).
resource = _make("resource", "DT_RESOURCE", "resource", np.object_, _RESOURCE)

half = float16
double = float64

ALL_DTYPES: tuple[DType, ...] = (
    bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float16, bfloat16, float32, float64, complex64, complex128, string,
    qint8, quint8, qint16, quint16, qint32,
)

#: Every name :func:`as_dtype` accepts: Python names, spec names and enum names.
DTYPES: dict[str, DType] = {}
for _dt in (*ALL_DTYPES, resource):
    DTYPES[_dt.name] = DTYPES[_dt.spec_name] = DTYPES[_dt.enum] = _dt
del _dt

# The quantized dtypes share numpy types with the integers; the plain integer
# wins the reverse lookup, as in TensorFlow.
_BY_NUMPY: dict[np.dtype[Any], DType] = {}
for _dt in reversed(ALL_DTYPES):
    if _dt is not bfloat16:
        _BY_NUMPY[_dt.np] = _dt
del _dt

_BY_TYPE: dict[type[Any], DType] = {dt.as_numpy_dtype: dt for dt in reversed(ALL_DTYPES) if dt is not bfloat16}
_BY_TYPE.update({bool: bool_, int: int32, float: float32, complex: complex64, str: string, bytes: string})


_BFLOAT16_LOADED = False


def _load_bfloat16() -> None:
    """Give bfloat16 its numpy type (ml_dtypes.bfloat16) and add it to the reverse lookups.

    Runs at the first use of ``bfloat16.np`` or ``bfloat16.as_numpy_dtype``,
    or when a lookup misses while ml_dtypes is imported (a bfloat16 numpy
    dtype cannot exist before that).  Running it twice is harmless.
    """
    import ml_dtypes

    scalar: type[Any] = ml_dtypes.bfloat16
    dtype = np.dtype(scalar)
    _BY_NUMPY.setdefault(dtype, bfloat16)
    _BY_TYPE.setdefault(scalar, bfloat16)
    bfloat16.as_numpy_dtype = scalar
    bfloat16.np = dtype
    global _BFLOAT16_LOADED
    _BFLOAT16_LOADED = True


realnumbertype: frozenset[DType] = frozenset(
    {float32, float64, int32, int64, uint8, int16, int8, uint16, float16, uint32, uint64, bfloat16}
)
quantizedtype: frozenset[DType] = frozenset({qint8, quint8, qint16, quint16, qint32})
numbertype: frozenset[DType] = realnumbertype | {complex64, complex128} | quantizedtype
realnumerictype = realnumbertype
numerictype = numbertype

#: The type classes an op spec may use in place of a list of dtypes.
TYPE_CLASSES: dict[str, frozenset[DType]] = {
    "numbertype": numbertype,
    "numerictype": numerictype,
    "realnumbertype": realnumbertype,
    "realnumerictype": realnumerictype,
    "quantizedtype": quantizedtype,
    "type": frozenset(ALL_DTYPES),
}

_ACCEPTED = (
    "a DType, a dtype name such as 'float32', 'float', 'half' or 'DT_FLOAT', "
    "a numpy dtype or scalar type, ml_dtypes.bfloat16, or one of the Python types "
    "bool, int, float, complex, str, bytes"
)


def as_dtype(value: object) -> DType:
    """The :class:`DType` for ``value``.

    Accepts a DType; a name (``"float32"``, ``"float"``, ``"half"``,
    ``"DT_FLOAT"``); a numpy dtype or scalar type (object and text dtypes map
    to ``string``); ``ml_dtypes.bfloat16``; or a Python type, mapped as
    TensorFlow converts Python literals (``int`` -> int32, ``float`` ->
    float32, ``complex`` -> complex64, ``str``/``bytes`` -> string).
    Anything else raises :class:`~opkernel.errors.OpTypeError`.
    """
    if isinstance(value, DType):
        return value
    found: DType | None = None
    if isinstance(value, np.dtype):
        found = _from_numpy(value)
    elif isinstance(value, str):
        found = DTYPES.get(value)
    elif isinstance(value, type):
        found = _BY_TYPE.get(value)
        if found is None and issubclass(value, np.generic):
            found = _from_numpy(np.dtype(value))
    if found is None:
        raise OpTypeError(f"cannot interpret {value!r} as a dtype; expected {_ACCEPTED}")
    return found


def of_array(array: np.ndarray) -> DType:
    """The dtype of the tensor a native host array holds: ``resource`` for an object
    array of resource handles (``opkernel.resources.ResourceHandle``), else the numpy
    dtype's (:func:`as_dtype`).  Graph constants are typed this way."""
    if array.dtype.kind == "O" and array.size and getattr(array.flat[0], "is_resource_handle", False):
        return resource
    return as_dtype(array.dtype)


def _from_numpy(value: np.dtype[Any]) -> DType | None:
    found = _BY_NUMPY.get(value)
    if found is not None:
        return found
    if value.kind == "V" and not _BFLOAT16_LOADED and "ml_dtypes" in sys.modules:
        _load_bfloat16()
        return _BY_NUMPY.get(value)
    if value.kind in "OUS":
        return string
    if value.byteorder not in "=|":
        return _BY_NUMPY.get(value.newbyteorder("="))
    return None
