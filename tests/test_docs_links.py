"""README and docs/ point only at things that exist: every relative link resolves to a file
(and its ``#anchor`` to a heading of that file), and every repository path named in backticks
(``spark_app/cli.py``, ``configs/scenarios/x.yaml``) is there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A path in backticks: a folder, a slash and a file with one of the repository's endings.
NAMED = re.compile(
    r"`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+\.(?:py|yaml|yml|md|json|csv|txt|j2|toml|xml))`"
)
# Paths a page names as what a command writes or a user holds, not as repository files.
ELSEWHERE = ("out/", "/", "~", ".venv/", "checkpoint/", "charts/", "state-change/", "tmp/")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a Markdown page's headings."""
    anchors = set()
    for heading in re.findall(r"^#+\s+(.*)$", page.read_text(), flags=re.M):
        text = re.sub(r"[`*_]", "", heading.strip().lower())
        anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text)))
    return anchors


def _broken(page: Path) -> list[str]:
    text = page.read_text()
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a web address, not a file of the repository
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path) if path else page
        if not resolved.exists():
            broken.append(f"link {target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"link {target}: no heading #{anchor} in {resolved.name}")
    for named in NAMED.findall(text):
        if named.startswith(ELSEWHERE) or "*" in named:
            continue
        if not (ROOT / named).exists() and not (page.parent / named).exists():
            broken.append(f"path {named}: not in the repository")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_links_and_paths_resolve(page: Path) -> None:
    assert _broken(page) == []


def test_checker_finds_a_broken_link_and_path(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n[a](missing.md) [b](#title) [c](#nowhere) `spark_app/gone.py`\n")
    assert _broken(page) == [
        "link missing.md: no such file",
        "link #nowhere: no heading #nowhere in page.md",
        "path spark_app/gone.py: not in the repository",
    ]
