"""Type aliases for annotating code that calls opkernel (as ``numpy.typing`` does for numpy).

``TensorLike`` is what every op input accepts: a tensor, a numpy array or scalar,
or Python scalars and (nested) lists or tuples of them, which are converted to a
tensor on the active backend.  ``DTypeLike`` is what a type attr (``DstT``,
``out_type``) and ``ok.tensor(dtype=...)`` accept, ``ShapeLike`` what a shape
attr accepts.  The generated stubs of ``opkernel.ops`` use them::

    import opkernel as ok
    from opkernel.typing import TensorLike

    def scaled(x: TensorLike, k: float) -> ok.Tensor:
        return ok.ops.mul(x, k)
"""

from __future__ import annotations

from typing import Any, Sequence, Union

import numpy as np

from .dtypes import DType
from .shapes import TensorShape
from .tensor import Tensor

__all__ = ["TensorLike", "DTypeLike", "ShapeLike"]

# Plain assignments (not ``TypeAlias``): mypy reads them as aliases and they stay
# usable at run time (``isinstance`` aside).  Nested lists are ``Sequence[Any]``:
# their depth is not expressible without recursive aliases, which the run-time
# ``Union`` could not hold.
TensorLike = Union[Tensor, np.ndarray[Any, Any], np.generic, bool, int, float, complex, str, bytes, Sequence[Any]]
DTypeLike = Union[DType, str, type, np.dtype[Any]]
ShapeLike = Union[TensorShape, Sequence[Union[int, None]], None]
