"""How much host memory a new allocation can still get.

The size checks that run before work (``opkernel._bounds``) and backends whose device
allocates from host memory (an OpenCL CPU device) ask the same question: an
allocation past this answer would meet the OOM killer, or a failed ``malloc`` inside a
driver that does not check it.  Public for backend authors.
"""

from __future__ import annotations

import os

__all__ = ["host_available_bytes"]


def _meminfo() -> dict[str, int]:
    fields: dict[str, int] = {}
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                fields[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return fields


def _cgroup_room() -> int | None:
    """What the cgroup (v2) this process runs in still lets it allocate, if it is limited."""
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as f:
            return max(int(limit) - int(f.read().strip()), 0)
    except (OSError, ValueError):
        return None


def host_available_bytes() -> int | None:
    """Bytes of host memory a new allocation can still get without the OOM killer:
    Linux's MemAvailable plus free swap, within the cgroup's limit and the process's
    address-space limit; elsewhere the free physical pages.  None when the system
    does not say."""
    room: int | None
    try:
        info = _meminfo()
        room = info["MemAvailable"] + info.get("SwapFree", 0)
    except (OSError, KeyError, ValueError, IndexError):
        try:
            room = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            room = None
    for limit in (_cgroup_room(), _address_space_room()):
        if limit is not None:
            room = limit if room is None else min(room, limit)
    return room


def _address_space_room() -> int | None:
    """What this process's address-space limit (``ulimit -v``) still leaves, if it has one."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm", encoding="ascii") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
        return max(soft - mapped, 0)
    except (ImportError, OSError, ValueError, IndexError):
        return None
