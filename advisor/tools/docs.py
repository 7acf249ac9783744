"""Doc tools over the task's fixture docs: search_docs (ranked keyword search) and read_doc.

The search is a small BM25 over words of the doc id and text; results list doc ids, titles (first line)
and a snippet around the best-matching line, so an agent can cite the id it read.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from advisor.errors import did_you_mean
from advisor.tools.base import ToolError, ToolSpec, object_schema, register_tool

_WORD = re.compile(r"[a-z0-9]+")
MAX_DOC_CHARS = 20_000


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def search(docs: dict[str, str], query: str, k: int = 5) -> list[tuple[str, float]]:
    """Rank doc ids by BM25 score of `query` (ties keep the docs' order); only docs with a positive score."""
    terms = set(_words(query))
    if not terms or not docs:
        return []
    tokenized = {doc_id: _words(doc_id.replace("-", " ") + " " + text) for doc_id, text in docs.items()}
    n = len(tokenized)
    avg = sum(len(t) for t in tokenized.values()) / n or 1.0
    df = Counter(term for toks in tokenized.values() for term in set(toks) & terms)
    scored = []
    for doc_id, toks in tokenized.items():
        tf = Counter(toks)
        score = 0.0
        for term in terms:
            if tf[term]:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf[term] * 2.2 / (tf[term] + 1.2 * (0.25 + 0.75 * len(toks) / avg))
        if score > 0:
            scored.append((doc_id, score))
    scored.sort(key=lambda item: -item[1])
    return scored[:k]


def _snippet(text: str, query: str, width: int = 160) -> str:
    terms = set(_words(query))
    best = max(text.splitlines() or [""], key=lambda line: len(terms & set(_words(line))))
    best = best.strip()
    return best if len(best) <= width else best[: width - 3] + "..."


@register_tool
class SearchDocs:
    """Keyword search over the task's documentation."""

    spec = ToolSpec(
        name="search_docs",
        description="Search the documentation; returns the best-matching doc ids with their title and a snippet.",
        parameters=object_schema({
            "query": {"type": "string", "description": "Keywords to search for."},
            "k": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Results to return (default 5)."},
        }, ["query"]),
    )

    async def run(self, env, arguments: dict[str, Any]) -> str:
        """Return one result per line: doc id, title, snippet."""
        docs = env.task.fixtures.docs
        if not docs:
            raise ToolError("this task has no documentation to search")
        hits = search(docs, arguments["query"], int(arguments.get("k", 5)))
        if not hits:
            return "no documents match; try other keywords"
        lines = []
        for doc_id, _ in hits:
            text = docs[doc_id]
            title = (text.strip().splitlines() or [""])[0].lstrip("# ").strip()
            lines.append(f"[{doc_id}] {title} -- {_snippet(text, arguments['query'])}")
        return "\n".join(lines)


@register_tool
class ReadDoc:
    """Read one document by id."""

    spec = ToolSpec(
        name="read_doc",
        description="Read the full text of a documentation page by its doc id (as listed by search_docs).",
        parameters=object_schema({"doc_id": {"type": "string", "description": "The document id."}}, ["doc_id"]),
    )

    async def run(self, env, arguments: dict[str, Any]) -> str:
        """Return the document text."""
        docs = env.task.fixtures.docs
        doc_id = arguments["doc_id"].strip().strip("[]")
        if doc_id not in docs:
            raise ToolError(f"no document {arguments['doc_id']!r}.{did_you_mean(doc_id, list(docs))}")
        return docs[doc_id][:MAX_DOC_CHARS]

