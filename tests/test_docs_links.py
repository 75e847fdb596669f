"""Every relative link in the project's pages (README, docs, benchmarks, examples) reaches a file, and every #anchor a heading there.

Headings are renamed as studies finish (a section "under way" becomes done), and a link that still names the old
anchor goes nowhere without an error; GitHub's rule for a heading's anchor is reproduced here.
"""

import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    *sorted(ROOT.glob("*.md")),
    *(page for folder in ("docs", "benchmarks", "examples") for page in sorted((ROOT / folder).rglob("*.md"))),
]
FENCED = re.compile(r"^```.*?^```", flags=re.S | re.M)
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", flags=re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: its text as rendered, lower case, punctuation but '-' and '_' dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    """The anchors of a page's headings (read once a page); a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCED.sub("", page.read_text())):
        name = anchor(heading)
        count = seen.get(name, 0)
        seen[name] = count + 1
        out.add(name if count == 0 else f"{name}-{count}")
    return frozenset(out)


def test_anchor_follows_githubs_rule() -> None:
    assert anchor("Real ARC-AGI-1 tasks at laptop scale (issue 61)") == "real-arc-agi-1-tasks-at-laptop-scale-issue-61"
    assert anchor("Levers on the quickstart rung (`benchmarks/levers.sh`, 3 seeds)") == (
        "levers-on-the-quickstart-rung-benchmarksleverssh-3-seeds"
    )
    assert anchor("The papers' claims: which held at this scale") == "the-papers-claims-which-held-at-this-scale"
    assert anchor("[Results](docs/results.md) in short") == "results-in-short"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(page: Path) -> None:
    broken = []
    for link in LINK.findall(FENCED.sub("", page.read_text())):
        if re.match(r"[a-z]+:", link):
            continue  # https:, mailto:
        path, _, fragment = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            broken.append(f"{link}: no heading with this anchor in {target.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
