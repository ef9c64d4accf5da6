"""The guides in docs/ stay true: every ```python block runs.

The blocks of one file run in order in one module namespace, inside
``opkernel.testing.isolated_registries()`` (ops, kernels, gradients and plugins
they register are undone), with the backend choice reset before and after.  A
block preceded by ``<!-- no-test -->`` is skipped; a block preceded by
``<!-- excerpt: PATH -->`` must also appear verbatim in PATH, so a walkthrough
cannot drift from the code it shows.  Relative links must point at files.
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import opkernel as ok
from opkernel import engine
from opkernel.testing import isolated_registries

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GUIDES = [
    "index.md", "op-authoring.md", "kernel-authoring.md", "backend-authoring.md", "plugins.md", "errors.md",
    "autodiff.md", "custom-op.md", "functions.md", "saved-graphs.md", "opencl.md", "scaling.md", "nn.md",
    "random.md", "c-kernels.md", "resources.md",
]
FENCE = re.compile(r"^```([\w+-]*)\s*$")
EXCERPT = re.compile(r"^<!-- excerpt: (\S+) -->$")
NO_TEST = "<!-- no-test -->"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    path: Path
    lang: str
    code: str
    line: int  # 1-based line of the block's first code line
    marker: str  # the last non-blank line before the fence

    @property
    def tested(self) -> bool:
        return self.lang == "python" and self.marker != NO_TEST

    @property
    def excerpt_of(self) -> Path | None:
        match = EXCERPT.match(self.marker)
        return ROOT / match.group(1) if match else None


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise AssertionError(f"{path.name}:{i + 1}: code block is not closed")
        marker = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        found.append(Block(path, match.group(1), "\n".join(lines[i + 1 : end]) + "\n", i + 2, marker))
        i = end + 1
    return found


def doc_files() -> list[Path]:
    return sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]


@pytest.fixture
def doc_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What a reader has: default settings, the example backend importable (as if pip-installed)."""
    for var in ("OPKERNEL_BACKEND", "OPKERNEL_PLUGINS", "OPKERNEL_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "minimal_backend"))
    monkeypatch.chdir(ROOT)
    policy = ok.config.transfer_policy
    engine._reset_backends_for_tests()
    yield
    ok.config.transfer_policy = policy
    engine._reset_backends_for_tests()


def test_the_guides_exist() -> None:
    present = {p.name for p in doc_files()}
    assert [g for g in GUIDES if g not in present] == []


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.name)
def test_python_blocks_run(path: Path, doc_env: None) -> None:
    runnable = [b for b in blocks(path) if b.tested]
    if path.name not in GUIDES and not runnable:
        pytest.skip(f"{path.name} has no python examples (a reference page)")
    assert runnable, f"{path.name} has no tested python block"
    module = types.ModuleType(f"docs_{path.stem.replace('-', '_')}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    try:
        with isolated_registries():
            for block in runnable:
                # Pad so that tracebacks show the line numbers of the .md file.
                code = compile("\n" * (block.line - 1) + block.code, str(path), "exec")
                exec(code, module.__dict__)
    finally:
        del sys.modules[module.__name__]


def test_excerpts_match_their_sources() -> None:
    checked = 0
    for path in doc_files():
        for block in blocks(path):
            source = block.excerpt_of
            if source is None:
                continue
            assert source.is_file(), f"{path.name}:{block.line}: {source} does not exist"
            assert block.code.strip() in source.read_text(encoding="utf-8"), (
                f"{path.name}:{block.line}: the block is no longer a verbatim excerpt of {source.relative_to(ROOT)}"
            )
            checked += 1
    assert checked, "backend-authoring.md walks through examples/minimal_backend with excerpts"


def test_relative_links_resolve() -> None:
    broken = []
    for path in doc_files():
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            if not (path.parent / target.split("#")[0]).exists():
                broken.append(f"{path.name}: {target}")
    assert broken == []


def test_no_test_markers_are_rare() -> None:
    skipped = [f"{b.path.name}:{b.line}" for p in doc_files() for b in blocks(p) if b.marker == NO_TEST]
    assert len(skipped) <= 3, f"too many untested blocks: {skipped}"
