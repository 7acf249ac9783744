"""The README is a newcomer's entry and the docs state today's truth: short, the two set-up commands, every link
resolves, every answer term in the glossary, no commit hashes or history narration."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted((REPO / "docs").glob("*.md"))


def test_readme_is_short_with_the_two_commands_and_working_links():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 120
    assert "make probe" in text and "make test" in text
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith("http"):
            assert (REPO / target).exists(), target
    for term in ("plan", "usable", "single attempt", "next"):
        assert f"**{term}**" in text  # the answer's columns explained where they are shown
    assert "docs/glossary.md" in text and "docs/figures.md" in text


def test_docs_links_resolve():
    for doc in [*DOCS, REPO / "README.md"]:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", doc.read_text()):
            if target.endswith((".md", ".yaml", ".py", "/")) and not target.startswith("http"):
                assert (doc.parent / target).exists(), (doc.name, target)


def test_glossary_defines_the_answers_terms():
    text = (REPO / "docs" / "glossary.md").read_text().lower()
    for term in ("rung", "ladder", "class", "skill", "condition", "if", "tc", "overall", "usable", "floor", "plan",
                 "single attempt", "verifier", "stand-in", "simulated", "aiq", "hermes_json", "cost per usable result"):
        assert f"**{term}**" in text or f"`{term}`" in text, term


def test_no_doc_names_a_commit_or_narrates_history():
    pattern = re.compile(r"\b(at|of|checkout of|clone of) [0-9a-f]{7,40}\b|main at |before sessions|no longer wins")
    for doc in [*DOCS, REPO / "README.md"]:
        hits = [line for line in doc.read_text().splitlines() if pattern.search(line)]
        assert not hits, (doc.name, hits)
