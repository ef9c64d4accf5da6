"""The plugin's version, in a module of its own: the package root imports its
submodules, and those that need the version (program-cache and probe keys) read it here."""

__version__ = "0.1.0"
