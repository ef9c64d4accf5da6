"""Device probes: a verdict per device fingerprint, run once, cached on disk verified."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from opkernel import probes


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    where = tmp_path / "probes"
    monkeypatch.setenv(probes.ENV_CACHE, str(where))
    monkeypatch.setattr(probes, "_memo", {})
    monkeypatch.setattr(probes, "_ignore_disk", [False])
    yield where


class Probe:
    def __init__(self, answer: str | None) -> None:
        self.answer, self.calls = answer, 0

    def __call__(self) -> str | None:
        self.calls += 1
        return self.answer


def test_a_verdict_is_probed_once_then_cached(cache: Path) -> None:
    p = Probe(None)
    assert probes.verdict("x", "dev A", p)[:2] == (None, False)
    assert probes.verdict("x", "dev A", p)[:2] == (None, False)  # this process's memory: the same answer
    assert p.calls == 1
    entries = list(cache.glob("*.probe"))
    assert len(entries) == 1 and (os.stat(cache).st_mode & 0o077) == 0  # a private directory
    probes._memo.clear()  # as a new process
    assert probes.verdict("x", "dev A", p)[:2] == (None, True)
    assert p.calls == 1


def test_failures_are_cached_with_their_reason(cache: Path) -> None:
    p = Probe("cannot compile")
    assert probes.verdict("x", "dev B", p)[0] == "cannot compile"
    probes._memo.clear()
    assert probes.verdict("x", "dev B", p)[:2] == ("cannot compile", True)
    assert p.calls == 1


def test_another_fingerprint_or_backend_probes_again(cache: Path) -> None:
    p = Probe(None)
    probes.verdict("x", "driver 1", p)
    probes.verdict("x", "driver 2", p)
    probes.verdict("y", "driver 1", p)
    assert p.calls == 3


@pytest.mark.parametrize("damage", ["truncate", "flip", "swap"])
def test_a_damaged_or_swapped_entry_is_probed_again(cache: Path, damage: str) -> None:
    good, bad = Probe(None), Probe("broken")
    probes.verdict("x", "dev A", good)
    probes.verdict("x", "dev B", bad)
    a, b = (cache / (probes._key("x", f) + ".probe") for f in ("dev A", "dev B"))
    if damage == "truncate":
        a.write_bytes(a.read_bytes()[:-5])
    elif damage == "flip":
        data = bytearray(a.read_bytes())
        data[-3] ^= 1
        a.write_bytes(bytes(data))
    else:  # B's failure planted under A's name must not pass for A's verdict
        a.write_bytes(b.read_bytes())
    probes._memo.clear()
    assert probes.verdict("x", "dev A", good)[:2] == (None, False)
    assert good.calls == 2


def test_a_probe_that_raises_is_a_device_that_does_not_work(cache: Path) -> None:
    def boom() -> str | None:
        raise RuntimeError("driver exploded")

    reason = probes.verdict("x", "dev C", boom)[0]
    assert reason is not None and "RuntimeError: driver exploded" in reason


def test_reprobe_ignores_the_cache(cache: Path) -> None:
    p = Probe(None)
    probes.verdict("x", "dev A", p)
    probes.reprobe()
    assert probes.verdict("x", "dev A", p)[:2] == (None, False)
    assert p.calls == 2


def test_cache_off_keeps_verdicts_in_memory_only(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(probes.ENV_CACHE, "off")
    p = Probe(None)
    probes.verdict("x", "dev A", p)
    probes._memo.clear()
    probes.verdict("x", "dev A", p)
    assert p.calls == 2 and not cache.exists()


def test_a_cache_others_can_write_is_refused(cache: Path) -> None:
    cache.mkdir(mode=0o777)
    os.chmod(cache, 0o777)
    p = Probe(None)
    with pytest.warns(UserWarning, match="device-probe cache"):
        probes.verdict("x", "dev A", p)
    assert list(cache.iterdir()) == []
