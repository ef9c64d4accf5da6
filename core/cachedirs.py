"""Private cache directories: where a backend may keep compiled programs on disk.

A compiled program loaded from disk runs as this user's code, so a cache
directory must be one that nobody else can write: the directory itself owned by
this user and writable by nobody else, and every directory above it owned by
this user or root and not writable by others (unless sticky, like ``/tmp``),
so nobody can swap it for another.  ``private_dir`` creates a missing
directory with mode 0700 and refuses an unsafe one with an
``UnsafeCacheWarning`` (once per directory and process); the caller then
builds in memory.
"""

from __future__ import annotations

import os
import stat
import threading
import warnings

__all__ = ["UnsafeCacheWarning", "unsafe_reason", "private_dir"]


class UnsafeCacheWarning(UserWarning):
    """A cache directory was refused because someone other than this user could write to it."""


_lock = threading.Lock()
_checked: dict[str, str | None] = {}  # realpath -> why it was refused (None: trusted)


def _who(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _writers(mode: int) -> str:
    return " and ".join(w for bit, w in ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "every user")) if mode & bit)


def unsafe_reason(path: str) -> str | None:
    """Why the existing directory ``path`` cannot hold a trusted cache, or None if it can."""
    me = os.geteuid()
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as e:
        return f"it cannot be examined ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != me:
        return f"it is owned by {_who(st.st_uid)}, not by this user ({_who(me)})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by {_writers(st.st_mode)} (mode {stat.S_IMODE(st.st_mode):04o})"
    parent = os.path.dirname(real)
    while True:
        try:
            pst = os.stat(parent)
        except OSError as e:
            return f"its parent {parent!r} cannot be examined ({e.strerror})"
        if pst.st_uid not in (me, 0):
            return f"its parent {parent!r} is owned by {_who(pst.st_uid)}, who could replace it"
        if pst.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not pst.st_mode & stat.S_ISVTX:
            return f"its parent {parent!r} is writable by {_writers(pst.st_mode)} without the sticky bit, so they could replace it"
        if parent == os.path.dirname(parent):
            return None
        parent = os.path.dirname(parent)


def _make(path: str) -> None:
    """Create ``path`` and any missing parents with mode 0700 (os.makedirs would give the
    parents the umask's mode, which may be group-writable)."""
    missing: list[str] = []
    p = path
    while not os.path.isdir(p):
        missing.append(p)
        up = os.path.dirname(p)
        if up == p:
            break
        p = up
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass


def private_dir(path: str, what: str) -> str | None:
    """``path`` (created 0700 if missing) when it can hold a trusted cache; otherwise None,
    after warning once that ``what`` is refused and why."""
    path = os.path.abspath(os.path.expanduser(path))
    try:
        _make(path)
    except OSError as e:
        reason: str | None = f"it cannot be created ({e.strerror})"
    else:
        reason = unsafe_reason(path)
    key = os.path.realpath(path)
    with _lock:
        known = key in _checked and _checked[key] == reason
        _checked[key] = reason
    if reason is not None and not known:
        warnings.warn(
            f"{what}: refusing the cache directory {path!r}: {reason}. Compiled programs are "
            f"built in memory instead. Fix: make the directory private (chown it to this user "
            f"and chmod 700) or point the cache elsewhere.",
            UnsafeCacheWarning, stacklevel=3,
        )
    return None if reason is not None else path
