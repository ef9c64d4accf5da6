"""Private cache directories: where a backend may keep compiled programs on disk.

A compiled program loaded from disk runs as this user's code, so a cache
directory must be one that nobody else can write: the directory itself owned by
this user and writable by nobody else, and every directory above it owned by
this user or root and not writable by others (unless sticky, like ``/tmp``),
so nobody can swap it for another.  ``private_dir`` creates a missing
directory with mode 0700 and refuses an unsafe one with an
``UnsafeCacheWarning`` (once per directory and process); the caller then
builds in memory.  ``read_entry`` and ``write_entry`` keep one verified entry
per file in such a directory.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import threading
import warnings

__all__ = ["UnsafeCacheWarning", "unsafe_reason", "private_dir", "read_entry", "write_entry", "cache_root", "configured_dir"]

_OFF = {"off", "0", "none", "no", "false", ""}


def cache_root() -> str:
    """Where opkernel's caches live: ``$XDG_CACHE_HOME/opkernel``, default ``~/.cache/opkernel``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "opkernel")


def configured_dir(env: str, name: str) -> str | None:
    """The cache directory the variable ``env`` names (``off``, ``0``, ``no``...: None, no
    disk cache), or ``cache_root()/name`` when it is unset.  Not yet checked: pass the
    answer to ``private_dir``."""
    value = os.environ.get(env)
    if value is None:
        return os.path.join(cache_root(), name)
    return None if value.strip().lower() in _OFF else os.path.abspath(os.path.expanduser(value))


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
    if not hasattr(os, "geteuid"):  # Windows: no POSIX owners or modes; the profile's ACLs decide
        return None
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


# ------------------------------------------------------------ verified entries
#
# An entry file is a magic line naming its format, the hex SHA-256 of its key, the hex
# SHA-256 of its payload, then the payload.  It is written whole to a temporary file and
# renamed into place, so a reader sees an old entry or a new one, never half of one.  A
# payload is returned only when the file is a regular file of this user and both
# digests match: a truncated or random file, or another key's entry renamed or copied
# into its place, is removed and reads as a miss.

MAX_ENTRY_BYTES = 1 << 30
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _head(magic: bytes, key: str, payload: bytes) -> bytes:
    return magic + b"\n" + hashlib.sha256(key.encode()).hexdigest().encode() + b"\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n"


def read_entry(path: str, key: str, magic: bytes) -> tuple[bytes | None, bool]:
    """``(payload, rejected)``: the verified payload of the entry at ``path`` for ``key``, or
    None; ``rejected`` when a file was there but failed verification (it is removed)."""
    try:
        # O_NOFOLLOW and the regular-file check: a link to a FIFO or /dev/zero would hang
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, False
    except OSError:
        data = b""  # a link, or unreadable
    else:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            mine = not hasattr(os, "geteuid") or st.st_uid == os.geteuid()
            ok = stat.S_ISREG(st.st_mode) and mine and st.st_size <= MAX_ENTRY_BYTES
            data = f.read(MAX_ENTRY_BYTES + 1) if ok else b""
    n = len(magic) + 1 + 2 * 65
    payload = data[n:]
    if data and data[:n] == _head(magic, key, payload):
        return payload, False
    try:
        os.unlink(path)
    except OSError:
        pass
    return None, True


def write_entry(path: str, key: str, payload: bytes, magic: bytes) -> bool:
    """Store an entry atomically; False when it could not be written (a full disk, a
    vanished directory), which only costs the next build."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            f.write(_head(magic, key, payload))
            f.write(payload)
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
