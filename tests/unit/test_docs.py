"""The README and docs/ hold together: every link between pages resolves, and the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md")), ROOT / "bench" / "RESULTS.md"]
NOT_YET_WRITTEN = {DOCS / "steps.md", DOCS / "moving.md"}  # linked now; their pages arrive with their features
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(page: Path) -> str:
    """The page without code blocks and inline code, where `](` is not a link."""
    return CODE.sub("", FENCE.sub("", page.read_text()))


def anchors(page: Path) -> set[str]:
    """GitHub's ids for the page's headings."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page)) if not re.match(r"[a-z]+:", t)]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if file in NOT_YET_WRITTEN and not file.exists():
            continue
        if not file.exists() or (anchor and anchor not in anchors(file)):
            broken.append(target)
    return broken


def test_every_link_between_pages_resolves() -> None:
    assert DOCS.is_dir() and len(PAGES) > 5
    broken = {page.name: found for page in PAGES if (found := broken_links(page))}
    assert not broken


def test_a_link_to_a_missing_page_or_heading_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n[ok](#top) [gone](#nowhere) [none](none.md) `[code](none.md)`\n")
    assert broken_links(page) == ["#nowhere", "none.md"]


def test_the_readme_is_short_and_lists_every_docs_page() -> None:
    assert len(README.read_text().splitlines()) <= 250
    listed = {(ROOT / t).resolve() for t in links(README)}
    pages = {p.resolve() for p in DOCS.glob("*.md")} | NOT_YET_WRITTEN | {ROOT / "bench" / "RESULTS.md"}
    assert pages <= listed, sorted(str(p.relative_to(ROOT)) for p in pages - listed)
