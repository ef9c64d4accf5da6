"""The core distribution's version (``opkernel.__version__``), in the lowest layer: the plugin
layer checks plugins against it without importing the package root."""

__version__ = "0.1.0"
