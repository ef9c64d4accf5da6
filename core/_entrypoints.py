"""A quick scan for the entry points of one group, as ``importlib.metadata`` finds them.

Importing ``importlib.metadata`` costs ~20 ms (it brings in ``email``,
``zipfile``, ``csv``, ...), more than the rest of plugin discovery.  When
distributions can only come from plain directories on ``sys.path`` (the usual
case), this module finds the same entry points in the same order by reading
``*.dist-info/entry_points.txt`` and ``*.egg-info/entry_points.txt`` itself,
following ``importlib.metadata`` step by step: the directories of ``sys.path``
in order, the metadata directories of each in listing order grouped by
normalized distribution name, the first distribution of a name winning.
:func:`scan` returns None whenever anything else could supply distributions
(a zip or ``.egg`` on ``sys.path``, a meta-path finder of its own), and the
caller then asks ``importlib.metadata``.
"""

from __future__ import annotations

import os
import re
import sys
from importlib import import_module
from typing import Any

__all__ = ["EntryPoint", "Distribution", "scan"]

_INFO_SUFFIXES = (".dist-info", ".egg-info")
# importlib.metadata.EntryPoint.pattern
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


def _normalize(name: str) -> str:
    """importlib.metadata's ``Prepared.normalize``."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


class Distribution:
    """The name and version of an installed distribution, read from its metadata at first use."""

    __slots__ = ("_path", "_fields")

    def __init__(self, path: str) -> None:
        self._path = path
        self._fields: dict[str, str] | None = None

    def _metadata(self) -> dict[str, str]:
        if self._fields is None:
            fields: dict[str, str] = {}
            for filename in ("METADATA", "PKG-INFO"):
                try:
                    with open(os.path.join(self._path, filename), encoding="utf-8") as f:
                        for line in f:
                            if not line.strip():
                                break  # the headers end at the first blank line
                            key, sep, value = line.partition(":")
                            if sep and not line[:1].isspace():
                                fields.setdefault(key.strip().lower(), value.strip())
                except OSError:
                    continue
                break
            self._fields = fields
        return self._fields

    @property
    def name(self) -> str | None:
        return self._metadata().get("name")

    @property
    def version(self) -> str | None:
        return self._metadata().get("version")

    def __repr__(self) -> str:
        return f"<Distribution {self._path!r}>"


class EntryPoint:
    """One entry point: ``name = value`` in ``group`` of ``dist``; ``load()`` imports it."""

    __slots__ = ("name", "value", "group", "dist")

    def __init__(self, name: str, value: str, group: str, dist: Distribution) -> None:
        self.name = name
        self.value = value
        self.group = group
        self.dist = dist

    @property
    def module(self) -> str:
        match = _VALUE.match(self.value)
        return match.group("module") if match else self.value

    @property
    def attr(self) -> str | None:
        match = _VALUE.match(self.value)
        return match.group("attr") if match else None

    def load(self) -> Any:
        """The object the entry point names (as ``importlib.metadata.EntryPoint.load``)."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} has a malformed value {self.value!r}")
        obj: Any = import_module(match.group("module"))
        for attr in filter(None, (match.group("attr") or "").split(".")):
            obj = getattr(obj, attr)
        return obj

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _only_path_finder() -> bool:
    """Whether every meta-path finder that can list distributions is the standard PathFinder."""
    from importlib.machinery import PathFinder

    return all(f is PathFinder for f in sys.meta_path if getattr(f, "find_distributions", None) is not None)


def _info_dirs(entry: str) -> list[tuple[str, str]] | None:
    """(normalized name, path) of the metadata directories in one ``sys.path`` entry,
    in importlib.metadata's order; None when the entry needs importlib.metadata."""
    root = entry or "."
    if os.path.basename(entry).lower().endswith(".egg") or os.path.isfile(root):
        return None  # an egg or a zip: importlib.metadata reads those
    try:
        children = os.listdir(root)
    except OSError:
        return []
    groups: dict[str, list[str]] = {}
    for child in children:
        low = child.lower()
        if low.endswith(_INFO_SUFFIXES):
            groups.setdefault(_normalize(low.rpartition(".")[0].partition("-")[0]), []).append(
                os.path.join(entry, child)
            )
    return [(name, path) for name, paths in groups.items() for path in paths]


def _unique_name(path: str, dist: Distribution) -> str:
    """importlib.metadata's ``PathDistribution._normalized_name``."""
    filename, ext = os.path.splitext(os.path.basename(path))
    if ext in _INFO_SUFFIXES:
        return _normalize(filename.partition("-")[0])
    return _normalize(dist.name or "")


def _read_entry_points(path: str) -> str | None:
    try:
        with open(os.path.join(path, "entry_points.txt"), encoding="utf-8") as f:
            return f.read()
    except OSError:  # no such file, or the .egg-info is a file itself
        return None


def _group_entries(text: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` lines of section ``[group]`` (importlib.metadata's ``Sectioned``)."""
    found, section = [], None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section == group:
            name, _, value = line.partition("=")
            found.append((name.strip(), value.strip()))
    return found


def scan(group: str) -> list[EntryPoint] | None:
    """The entry points of ``group``, as ``importlib.metadata.entry_points(group=group)``
    lists them; None when only importlib.metadata can tell."""
    if not _only_path_finder():
        return None
    seen: set[str] = set()
    result: list[EntryPoint] = []
    for entry in sys.path:
        if not isinstance(entry, str):
            return None
        infos = _info_dirs(entry)
        if infos is None:
            return None
        for _, path in infos:
            dist = Distribution(path)
            name = _unique_name(path, dist)
            if name in seen:
                continue
            seen.add(name)
            text = _read_entry_points(path)
            if text is None:
                continue
            for ep_name, value in _group_entries(text, group):
                result.append(EntryPoint(ep_name, value, group, dist))
    return result
