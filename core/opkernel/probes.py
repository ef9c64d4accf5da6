"""Availability proven, not presumed: device probes and their cached verdicts.

A backend counts a device as usable only after a small program has compiled,
run and given the right answer there (TensorFlow.js moves past a backend whose
factory fails; JAX's plugins report devices only once their client starts).
A probe is the backend's own function; this module keeps its verdict, so that
only the first start on a device pays for it:

* ``verdict(backend, fingerprint, probe)`` runs ``probe`` once per fingerprint
  and keeps the answer (``None``: the device works; else the reason it does
  not) in this process and in the private cache directory
  ``$OPKERNEL_PROBE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/opkernel/probes``;
  ``off`` keeps verdicts in memory only).  The fingerprint names the device,
  its driver, the runtime and opkernel versions and the probe itself, so a
  new driver or release probes again.  An entry is a verified file of
  ``opkernel.cachedirs``: one that fails verification is removed and the
  device probed again.
* ``reprobe()`` forgets every verdict of this process and ignores the cached
  ones until the next start (``opkernel info --reprobe``).
* ``DeviceStatus`` is one device as ``Backend.devices`` reports it, for
  ``opkernel info`` and the test suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

from .cachedirs import configured_dir, private_dir, read_entry, write_entry

__all__ = ["DeviceStatus", "ENV_CACHE", "cache_dir", "verdict", "reprobe", "stats"]

ENV_CACHE = "OPKERNEL_PROBE_CACHE_DIR"
_MAGIC = b"opkernel-probe 1"


@dataclass(frozen=True)
class DeviceStatus:
    """One device a backend can see, with its probe's verdict.

    ``id`` is what the backend's device variable accepts (``OPKERNEL_OPENCL_DEVICE``,
    ``OPKERNEL_CUDA_DEVICE``); ``kind`` is ``"gpu"``, ``"cpu"``, ``"accelerator"`` or
    ``"other"``; ``reason`` is None when the probe passed, else why the device is not
    used, in one line, with the remedy where there is one; ``chosen`` marks the device
    the backend uses; ``cached`` says the verdict came from the probe cache (no probe
    ran in this process) and ``seconds`` is what finding the verdict cost here."""

    backend: str
    id: str
    name: str
    platform: str
    kind: str
    reason: str | None
    chosen: bool = False
    cached: bool = False
    seconds: float = 0.0

    @property
    def works(self) -> bool:
        return self.reason is None


_lock = threading.Lock()
_memo: dict[str, tuple[str | None, bool, float]] = {}  # key -> (reason, cached, seconds)
_ignore_disk = [False]
_counts = {"probes": 0, "cache_hits": 0}


def cache_dir() -> str | None:
    """Where verdicts are kept between processes, or None when that is off."""
    return configured_dir(ENV_CACHE, "probes")


def _key(backend: str, fingerprint: str) -> str:
    return hashlib.sha256(f"{backend}\0{fingerprint}".encode()).hexdigest()


def _read(where: str, key: str) -> tuple[bool, str | None]:
    payload, _rejected = read_entry(os.path.join(where, key + ".probe"), key, _MAGIC)
    if payload is None:
        return False, None
    try:
        record = json.loads(payload.decode())
        reason = record["reason"]
    except (ValueError, KeyError, TypeError):
        return False, None
    if reason is not None and not isinstance(reason, str):
        return False, None
    return True, reason


def verdict(backend: str, fingerprint: str, probe: Callable[[], str | None]) -> tuple[str | None, bool, float]:
    """``(reason, cached, seconds)``: ``probe``'s answer for the device ``fingerprint``
    describes, from this process's memory, the probe cache, or by running it (once per
    fingerprint and process, whatever the number of threads asking).  ``probe`` returns
    None when the device works, else the reason it does not; if it raises, the error is
    the reason.  Never raises."""
    key = _key(backend, fingerprint)
    with _lock:
        hit = _memo.get(key)
        if hit is not None:
            return hit
        start = time.perf_counter()
        where = cache_dir()
        if where is not None:
            where = private_dir(where, f"backend {backend!r} (${ENV_CACHE}, the device-probe cache)")
        if where is not None and not _ignore_disk[0]:
            found, reason = _read(where, key)
            if found:
                _counts["cache_hits"] += 1
                result = _memo[key] = (reason, True, time.perf_counter() - start)
                return result
        try:
            reason = probe()
        except Exception as e:  # a probe that raises is a device that does not work
            reason = f"the probe raised {type(e).__name__}: {e}"
        _counts["probes"] += 1
        if where is not None:
            record = {"backend": backend, "fingerprint": fingerprint, "reason": reason, "when": time.time()}
            write_entry(os.path.join(where, key + ".probe"), key, json.dumps(record).encode(), _MAGIC)
        result = _memo[key] = (reason, False, time.perf_counter() - start)
        return result


def reprobe() -> None:
    """Forget this process's verdicts and ignore cached ones: every device is probed
    again on its next check (and the cache rewritten)."""
    with _lock:
        _memo.clear()
        _ignore_disk[0] = True


def stats() -> dict[str, int]:
    """How many probes ran in this process, and how many verdicts came from the cache."""
    with _lock:
        return dict(_counts)
