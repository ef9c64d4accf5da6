"""Making pip-installed OpenCL runtimes visible to pyopencl's ICD loader.

The ICD loader bundled with pyopencl's wheels (ocl-icd) finds drivers through
the ``.icd`` files of one directory: ``$OCL_ICD_VENDORS`` when set, else
``/etc/OpenCL/vendors`` (``$OPENCL_VENDOR_PATH`` where set); it also always loads
the PoCL that ships in the wheel.  Intel's CPU runtime from PyPI
(``pip install 'opkernel-opencl[intel]'``: ``intel-opencl-rt``,
``intel-cmplr-lib-rt``, ``tbb``) installs ``lib/libintelocl.so`` but no ``.icd``
file anywhere the loader looks.

``expose_runtimes`` (called before pyopencl is first imported) gives the loader
a private directory holding an ``.icd`` file for each such runtime plus a copy
of every ``.icd`` file of the system's vendors directory, so no driver the user
already has is hidden, and points ``OCL_ICD_VENDORS`` at it.  An
``OCL_ICD_VENDORS`` the user set is never overridden (one this module set in a
parent process, inherited with its environment, is not the user's choice).  The
directory is ``$XDG_CACHE_HOME/opkernel/opencl-icd/<hash of the runtime paths>``,
used only when private to this user (``opkernel.cachedirs``); its files are
rewritten whenever their content differs from what they must say.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from typing import NamedTuple

from opkernel.cachedirs import cache_root, private_dir, unsafe_reason

__all__ = ["Runtime", "installed_runtimes", "expose_runtimes", "SYSTEM_VENDORS"]

SYSTEM_VENDORS = "/etc/OpenCL/vendors"
_SUBDIR = "opencl-icd"


class Runtime(NamedTuple):
    """An OpenCL runtime installed from PyPI: its ``.icd`` name and its library."""

    icd: str
    library: str


#: (distribution, library file name, .icd file name) of the runtimes looked for.
_KNOWN = (("intel-opencl-rt", "libintelocl.so", "opkernel-intel-cpu.icd"),)


def installed_runtimes() -> list[Runtime]:
    """The pip-installed OpenCL runtimes whose library is present."""
    from importlib import metadata

    found: list[Runtime] = []
    for dist_name, lib, icd in _KNOWN:
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            continue
        for f in dist.files or ():
            if f.name == lib:
                path = os.path.realpath(str(dist.locate_file(f)))
                if os.path.isfile(path):
                    found.append(Runtime(icd, path))
                    break
    return found


def _ours(path: str) -> bool:
    """Whether ``path`` is a directory this module made (here or in a parent process)."""
    parent = os.path.dirname(os.path.abspath(path).rstrip(os.sep))
    return os.path.basename(parent) == _SUBDIR or os.path.basename(path.rstrip(os.sep)).startswith("opkernel-icd-")


def _wanted(runtimes: list[Runtime]) -> dict[str, str]:
    """file name -> content of every .icd file the directory must hold."""
    files: dict[str, str] = {}
    system = os.environ.get("OPENCL_VENDOR_PATH") or SYSTEM_VENDORS
    try:
        names = sorted(os.listdir(system))
    except OSError:
        names = []
    for name in names:
        if not name.endswith(".icd"):
            continue
        try:
            with open(os.path.join(system, name), encoding="utf-8", errors="replace") as f:
                files["system-" + name] = f.read()
        except OSError:
            continue
    for rt in runtimes:
        files[rt.icd] = rt.library + "\n"
    return files


def _fill(where: str, files: dict[str, str]) -> bool:
    try:
        present = {n for n in os.listdir(where) if n.endswith(".icd")}
        for name in present - set(files):
            os.unlink(os.path.join(where, name))
        for name, content in files.items():
            path = os.path.join(where, name)
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    if f.read() == content and not os.path.islink(path):
                        continue
            except OSError:
                pass
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=where)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(content)
            os.replace(tmp, path)
    except OSError:
        return False
    return True


def expose_runtimes() -> str | None:
    """Point ``OCL_ICD_VENDORS`` at a private directory listing the pip-installed
    runtimes and the system's drivers; returns the directory, or None when nothing was
    done (no such runtime installed, or the user chose ``OCL_ICD_VENDORS``)."""
    chosen = os.environ.get("OCL_ICD_VENDORS")
    if chosen is not None and not _ours(chosen):
        return None
    runtimes = installed_runtimes()
    if not runtimes:
        if chosen is not None:  # a parent's directory, inherited: the loader's default is what the user has
            del os.environ["OCL_ICD_VENDORS"]
        return None
    files = _wanted(runtimes)
    digest = hashlib.sha256("\0".join(rt.library for rt in runtimes).encode()).hexdigest()[:16]
    where = private_dir(os.path.join(cache_root(), _SUBDIR, digest), "opencl backend (the ICD directory of pip-installed OpenCL runtimes)")
    if where is None or not _fill(where, files):
        where = _temporary(files)
        if where is None:
            return None
    os.environ["OCL_ICD_VENDORS"] = where
    return where


def _temporary(files: dict[str, str]) -> str | None:
    """A directory of this process, removed at exit: where the cache cannot hold one."""
    try:
        where = tempfile.mkdtemp(prefix="opkernel-icd-")
    except OSError:
        return None
    if unsafe_reason(where) is not None or not _fill(where, files):
        shutil.rmtree(where, ignore_errors=True)
        return None
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:
            shutil.rmtree(where, ignore_errors=True)

    atexit.register(remove)
    return where
