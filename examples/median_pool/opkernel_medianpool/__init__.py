"""opkernel-medianpool: median pooling, an example third-party op package.

``pip install opkernel-medianpool`` and opkernel finds it through the entry point
``medianpool = "opkernel_medianpool"`` (group ``opkernel``)::

    import opkernel as ok
    y = ok.ops.addons.median_pool2d(x, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="VALID")

or, without installing it as a plugin, ``ok.load_op_library("opkernel_medianpool")``.
The hooks below run once, at discovery; importing this module stays cheap (no
numpy work, no pyopencl, no cupy).
"""

from __future__ import annotations

import opkernel as ok

__version__ = "0.1.0"

#: The opkernel plugin-API versions this package works with.
OPKERNEL_PLUGIN_API = ">=1,<2"


@ok.hookimpl
def opkernel_register_ops() -> None:
    from . import ops

    ops.register_ops()


@ok.hookimpl
def opkernel_register_kernels() -> None:
    from . import kernels

    kernels.register_all()


@ok.hookimpl
def opkernel_register_gradients() -> None:
    from . import ops

    ops.register_gradients()
