"""``pcm eval documents DIR``: questions over real documents with the gold page or section; recall of
the gold part in the compiled context next to a plain fixed-size-chunk RAG baseline.

DIR holds the documents and ``questions.jsonl``: ``{"qid", "file", "question", "gold": [selectors:
"page:5", "section:\\"Chapter 2\\"", "sheet:Users!A89:E89", "lines:40-60"], "answer": a phrase the
gold passage holds}``. Each document is attached to a session of its own (``Engine.attach_file``:
read into parts, embedded, indexed); then, per question and budget, the engine builds the
context (no generation) and the baseline packs the best fixed-size chunks into the same budget:

* **pcm** — the compiled context; a gold hit when it cites a part of the document whose selector
  meets a gold one (the same page or a page range holding it, the section or a part under that
  heading, a sheet range holding the row, overlapping lines);
* **fixed_100**, **fixed_200** — plain RAG: the document's text cut into windows of 100 or 200
  words (``CHUNK_SIZES``; no regard for pages or headings), embedded by the same embedder, the
  closest to the question packed as ``[n] text`` lines while they fit the budget by the same token
  counter; a gold hit when a packed window overlaps a gold part.

Both also report **answer in context**: the share of questions whose context holds the answer
phrase (spaces, dashes and case normalised), which credits a hit only when the words are there.
One PRED line per (question, budget, method) goes to ``--out``.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.core.engine.facade import Engine
from app.core.session.documents import DocPart, document_parts, part_id
from app.core.session.selectors import Part, parse, sheet_parts
from app.core.types import EnvEvent

CHUNK_SIZES = (100, 200)  # words of a baseline window
METHODS = ("pcm", *(f"fixed_{n}" for n in CHUNK_SIZES))
_DASHES = re.compile(r"[\u2010-\u2015\u2212]")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def normalised(text: str) -> str:
    """Lower case, one space between words, every dash a hyphen, curly quotes straight."""
    return " ".join(_DASHES.sub("-", text.translate(_QUOTES)).lower().split())


def _rows(cells: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"[A-Z]+(\d+)(?::[A-Z]+(\d+))?", cells)
    return (int(m.group(1)), int(m.group(2) or m.group(1))) if m else None


def _meets(gold: Part, part: Part, heading: Sequence[str]) -> bool:
    """Whether a part located by ``part`` (its outermost selector part) and ``heading`` meets
    the gold location."""
    if gold.kind == "section":
        return (part.kind == "section" and part.value == gold.value) or gold.value in heading
    if gold.kind != part.kind:
        return False
    if gold.kind == "sheet":
        (g_sheet, g_cells), (p_sheet, p_cells) = sheet_parts(gold.value), sheet_parts(part.value)
        g, p = _rows(g_cells), _rows(p_cells)
        return g_sheet == p_sheet and g is not None and p is not None and p[0] <= g[1] and g[0] <= p[1]
    g, p = gold.first_last(), part.first_last()
    return g is not None and p is not None and p[0] <= g[1] and g[0] <= p[1]


def meets_gold(golds: Sequence[str], selector: str, heading: Sequence[str]) -> bool:
    """Whether a part's ``selector`` (and heading path) meets any of the gold selectors."""
    ranges = parse(selector)
    if not ranges:
        return False
    part = ranges[0][0]
    return any(_meets(g[0][0], part, heading) for gold in golds if (g := parse(gold)))


@dataclass
class _Windows:
    chunks: list[tuple[str, list[DocPart]]]  # text and the parts each overlaps
    vectors: np.ndarray | None


@dataclass
class _Document:
    session_id: str
    event: EnvEvent
    parts: dict[str, DocPart]  # by part evidence id
    windows: dict[int, _Windows]  # the baseline's fixed-size windows, by words a window


def fixed_chunks(event: EnvEvent, parts: Sequence[DocPart], words: int) -> list[tuple[str, list[DocPart]]]:
    """The document's text cut into windows of ``words`` words, each with the parts it overlaps."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", event.content)]
    out = []
    for i in range(0, len(spans), words):
        start, end = spans[i][0], spans[min(len(spans), i + words) - 1][1]
        out.append((event.content[start:end], [p for p in parts if p.start < end and start < p.end]))
    return out


async def _attach(engine: Engine, path: Path) -> _Document:
    state = await engine.open_session(None, title=f"eval {path.name}")
    await engine.attach_file(state.session_id, path)
    [event] = [e for e in await engine.env_events(state.session_id) if e.payload.get("document")]
    parts = document_parts(event)
    windows = {}
    for words in CHUNK_SIZES:
        chunks = fixed_chunks(event, parts, words)
        windows[words] = _Windows(chunks, await engine.embed([text for text, _ in chunks]))
    return _Document(state.session_id, event, {part_id(state.session_id, event, p): p for p in parts}, windows)


def _pack(win: _Windows, query: np.ndarray | None, count: Callable[[str], int], budget: int) -> list[int]:
    """Indexes of the fixed chunks closest to the query that fit ``budget`` as ``[n] text`` lines."""
    if win.vectors is None or query is None:
        return []
    order = np.argsort(-(win.vectors @ query))
    kept: list[int] = []
    used = 0
    for i in order:
        cost = count(f"[{len(kept) + 1}] {win.chunks[int(i)][0]}")
        if used + cost <= budget:
            kept.append(int(i))
            used += cost
    return kept


def _pcm_row(doc: _Document, q: dict[str, Any], record: Any) -> dict[str, Any]:
    cited = [(r.evidence_id, r.selector) for b in record.context.blocks for r in b.refs if r.evidence_id in doc.parts]
    hit = any(meets_gold(q["gold"], doc.parts[eid].selector, doc.parts[eid].heading) for eid, _ in cited)
    text = normalised(record.context.text())
    return {"hit": hit, "answer_in": normalised(q["answer"]) in text, "tokens": record.context.tokens,
            "cited": [sel for _, sel in cited]}


def _baseline_row(win: _Windows, q: dict[str, Any], kept: list[int], count: Callable[[str], int]) -> dict[str, Any]:
    chunks = [win.chunks[i] for i in kept]
    hit = any(meets_gold(q["gold"], p.selector, p.heading) for _, parts in chunks for p in parts)
    text = "\n".join(f"[{n}] {t}" for n, (t, _) in enumerate(chunks, 1))
    return {"hit": hit, "answer_in": normalised(q["answer"]) in normalised(text), "tokens": count(text) if text else 0,
            "cited": sorted({p.selector for _, parts in chunks for p in parts})}


async def run_documents_eval(engine: Engine, data_dir: Path, budgets: Sequence[int], out_path: Path, *,
                             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Attach every document of DIR, build at every budget, write PRED lines, score both methods."""
    questions = [json.loads(line) for line in (data_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    docs: dict[str, _Document] = {}
    started = time.perf_counter()
    for name in sorted({q["file"] for q in questions}):
        docs[name] = await _attach(engine, data_dir / name)
        if progress:
            progress(f"attached {name}: {len(docs[name].parts)} parts")
    attach_s = time.perf_counter() - started
    scores: dict[str, dict[int, list[tuple[str, bool, bool]]]] = defaultdict(lambda: defaultdict(list))
    count = engine.count_tokens
    with out_path.open("w", encoding="utf-8") as out:
        for q in questions:
            doc = docs[q["file"]]
            vec = await engine.embed([q["question"]])
            query = None if vec is None else vec[0]
            kind = Path(q["file"]).suffix.lstrip(".")
            for budget in budgets:
                record, _ = await engine.build(doc.session_id, q["question"], budget=budget)
                rows = {"pcm": _pcm_row(doc, q, record)}
                for words, win in doc.windows.items():
                    rows[f"fixed_{words}"] = _baseline_row(win, q, _pack(win, query, count, budget), count)
                for method, row in rows.items():
                    scores[method][budget].append((kind, row["hit"], row["answer_in"]))
                    out.write(json.dumps({"qid": q["qid"], "budget": budget, "method": method, **row},
                                         ensure_ascii=False) + "\n")
    return {"budgets": list(budgets), "counter": engine.counter_name, "questions": len(questions),
            "documents": {n: {"parts": len(d.parts), **{f"fixed_{w}": len(v.chunks) for w, v in d.windows.items()}}
                          for n, d in docs.items()},
            "attach_s": round(attach_s, 2), "methods": {m: {str(b): _summary(rows) for b, rows in per.items()}
                                                       for m, per in scores.items()}}


def _summary(rows: Sequence[tuple[str, bool, bool]]) -> dict[str, Any]:
    kinds = sorted({k for k, _, _ in rows})
    return {"recall": round(sum(h for _, h, _ in rows) / len(rows), 3),
            "answer_in_context": round(sum(a for _, _, a in rows) / len(rows), 3),
            "by_format": {k: round(sum(h for kk, h, _ in rows if kk == k) / sum(1 for kk, _, _ in rows if kk == k), 3)
                          for k in kinds}}


def format_documents_report(report: dict[str, Any]) -> str:
    """The report as a table: per budget and method, gold-part recall and answer in context."""
    lines = [f"{report['questions']} questions over {len(report['documents'])} documents "
             f"(counter: {report['counter']}; attached in {report['attach_s']} s)",
             f"{'budget':>7} {'method':<13} {'recall':>7} {'answer in ctx':>14}  recall by format"]
    for budget in report["budgets"]:
        for method in METHODS:
            s = report["methods"][method][str(budget)]
            by = ", ".join(f"{k} {v:.2f}" for k, v in s["by_format"].items())
            lines.append(f"{budget:>7} {method:<13} {s['recall']:>7.3f} {s['answer_in_context']:>14.3f}  {by}")
    return "\n".join(lines)
