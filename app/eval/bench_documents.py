"""``pcm bench documents``: a 300-page PDF attached with progress — throughput, memory, re-ingest.

The PDF is real text: the 15 pages of the Federal Register notice in tests/data/documents
(public domain) repeated to ``pages`` pages (pypdf writes it); its second version has page 17
replaced by a page of another document. Per run, taking turns with the baseline in the same run:

* **baseline** — pypdf's text extraction of every page, in this process, nothing else: the
  bare cost of the text layer;
* **attach** — ``Engine.attach_file`` into a fresh session on the real embedder and stores:
  the capped child reads the pages into parts (stage "reading"), the parts are embedded and
  indexed (stage "indexing"); pages/s for each stage and in all, as a ratio to the baseline.

Memory: the reading child's peak resident memory (``VmHWM``) and the app process's peak resident
memory before and after. Re-ingest: the file overwritten with its second version and attached
again to the session of the last run; how many parts were embedded again and which selectors
were superseded (only page 17's).
"""

from __future__ import annotations

import io
import logging
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.core.engine.facade import Engine
from app.core.types import EvidenceType

DOCS = Path(__file__).resolve().parents[2] / "tests" / "data" / "documents"
SOURCE = DOCS / "federal-register-2020-17221.pdf"
OTHER = DOCS / "stories-10-pages.pdf"
CHANGED_PAGE = 17


def build_pdfs(folder: Path, pages: int) -> tuple[Path, Path]:
    """``bench.pdf`` (``pages`` pages of the source, repeated) and ``bench-v2.pdf`` (page 17 replaced)."""
    from pypdf import PdfReader, PdfWriter

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    source, other = PdfReader(SOURCE), PdfReader(OTHER)
    paths = folder / "bench.pdf", folder / "bench-v2.pdf"
    for version, path in enumerate(paths):
        writer = PdfWriter()
        for n in range(pages):
            changed = version == 1 and n == CHANGED_PAGE - 1
            writer.add_page(other.pages[6] if changed else source.pages[n % len(source.pages)])
        with path.open("wb") as fh:
            writer.write(fh)
    return paths


def bare_extract(path: Path) -> float:
    """Seconds pypdf takes to extract every page's text in this process."""
    from pypdf import PdfReader

    started = time.perf_counter()
    reader = PdfReader(io.BytesIO(path.read_bytes()))
    for page in reader.pages:
        page.extract_text()
    return time.perf_counter() - started


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _attach(engine: Engine, path: Path, title: str) -> dict[str, Any]:
    state = await engine.open_session(None, title=title)
    marks: dict[str, float] = {}
    started = time.perf_counter()

    def heard(progress: dict[str, Any]) -> None:
        marks.setdefault(f"{progress['stage']}_first", time.perf_counter() - started)
        if progress["done"] == progress["total"]:
            marks[f"{progress['stage']}_done"] = time.perf_counter() - started
            marks[f"{progress['stage']}_total"] = progress["total"]

    done = await engine.attach_file(state.session_id, path, on_progress=heard)
    total = time.perf_counter() - started
    return {"session_id": state.session_id, "total_s": total, "read_s": marks.get("reading_done", 0.0),
            "index_s": total - marks.get("reading_done", 0.0), "parts": done.parts, "pages": done.pages,
            "progress_reports": len(marks)}


async def _reingest(engine: Engine, session_id: str, path: Path) -> dict[str, Any]:
    heard: list[dict[str, Any]] = []
    started = time.perf_counter()
    await engine.attach_file(session_id, path, on_progress=heard.append)
    took = time.perf_counter() - started
    parts = [e for e in await engine.records().evidences(session_id, superseded=True)
             if e.type == EvidenceType.RAG_DOC]
    indexing = [h for h in heard if h["stage"] == "indexing"]
    return {"total_s": round(took, 2), "embedded_again": indexing[-1]["total"] if indexing else 0,
            "superseded": sorted({p.metadata["selector"] for p in parts if p.valid_to is not None}),
            "added": sorted({p.metadata["selector"] for p in parts if p.valid_from > parts[0].valid_from
                             and p.valid_to is None}),
            "current_parts": sum(1 for p in parts if p.valid_to is None)}


async def bench_documents(engine: Engine, *, pages: int = 300, runs: int = 3,
                          say: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """Build the PDFs, then per run the baseline and an attach taking turns; then the re-ingest."""
    from app.sensors.documents import read_document

    folder = Path(tempfile.mkdtemp(prefix="pcm-bench-docs-"))
    v1, v2 = build_pdfs(folder, pages)
    say(f"built {v1.name} ({pages} pages, {v1.stat().st_size / 2**20:.1f} MB)")
    rss_before = _rss_mb()
    bare, attached = [], []
    for run in range(runs):
        bare.append(bare_extract(v1))
        attached.append(await _attach(engine, v1, f"bench run {run + 1}"))
        say(f"run {run + 1}: baseline {bare[-1]:.1f} s, attach {attached[-1]['total_s']:.1f} s "
            f"(read {attached[-1]['read_s']:.1f} s, {attached[-1]['parts']} parts)")
    child = read_document(v1.read_bytes(), v1.name, "pdf")
    v1.write_bytes(v2.read_bytes())  # the same file saved with page 17 changed: its next version
    again = await _reingest(engine, attached[-1]["session_id"], v1)
    med = statistics.median
    attach_s, read_s, bare_s = med(a["total_s"] for a in attached), med(a["read_s"] for a in attached), med(bare)
    return {
        "pages": pages, "runs": runs, "parts": attached[-1]["parts"],
        "baseline_extract_s": round(bare_s, 2), "baseline_pages_per_s": round(pages / bare_s, 1),
        "read_s": round(read_s, 2), "read_pages_per_s": round(pages / read_s, 1) if read_s else None,
        "attach_s": round(attach_s, 2), "attach_pages_per_s": round(pages / attach_s, 1),
        "attach_max_s": round(max(a["total_s"] for a in attached), 2),
        "ratio_attach_to_baseline": round(attach_s / bare_s, 2), "ratio_read_to_baseline": round(read_s / bare_s, 2),
        "child_peak_rss_mb": child.peak_rss_mb, "child_peak_address_space_mb": child.peak_mb,
        "app_peak_rss_mb_before": round(rss_before, 1), "app_peak_rss_mb_after": round(_rss_mb(), 1),
        "reingest": again,
    }


def format_documents_bench(report: dict[str, Any]) -> str:
    r, again = report, report["reingest"]
    return "\n".join([
        f"{r['pages']}-page PDF, {r['parts']} parts, median of {r['runs']} runs (baseline and attach taking turns)",
        f"  baseline (pypdf text, in process): {r['baseline_extract_s']} s = {r['baseline_pages_per_s']} pages/s",
        f"  attach, reading in the capped child: {r['read_s']} s = {r['read_pages_per_s']} pages/s "
        f"({r['ratio_read_to_baseline']}× baseline)",
        f"  attach, read + embed + index: {r['attach_s']} s = {r['attach_pages_per_s']} pages/s "
        f"({r['ratio_attach_to_baseline']}× baseline; slowest run {r['attach_max_s']} s)",
        f"  memory: reading child peak RSS {r['child_peak_rss_mb']} MB (address space {r['child_peak_address_space_mb']} "
        f"MB); app peak RSS {r['app_peak_rss_mb_before']} → {r['app_peak_rss_mb_after']} MB",
        f"  re-ingest after page {CHANGED_PAGE} changed: {again['total_s']} s, {again['embedded_again']} parts embedded "
        f"again, superseded {again['superseded']}, added {again['added']}, {again['current_parts']} current parts",
    ])
