"""``pcm eval summaries``: what the summaries of each level keep, and what they cost.

Each conversation of DIR/messages.jsonl is ingested into its own fresh session as history and
its summaries are brought up to date (``Engine.summarize``: one part per update, at most
``PART_MESSAGES`` messages, cut at a pause). Measured per level over the session summary's
parts (each part is the level's summary of the turns one update covered):

- identifier retention: of the names, numbers, dates and paths of the covered turns (speakers
  included), the share a part keeps verbatim (pooled over parts);
- compression ratio: the parts' words over the covered turns' words;
- gold coverage: the share of questions (adversarial ones left out) whose every gold turn lies in
  a part that names at least one of the question's entities (its identifiers; questions naming
  none are not counted);
- generation time per level (p50, p95 in ms) of every part the run made (the model's or the
  extractive one's, as the run allowed), and of the model's calls alone (the table's last lines);
- cache hit rate: the same conversations' summaries gone through again from the first update
  (``SummaryService.replay``): the share of level updates found in the cache.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.core.engine.facade import Engine
from app.core.memory.summaries import LEVELS, SummaryTurn, contains, identifiers, turn_identifiers, words
from app.core.session.state import SessionState
from app.core.types import Author, AuthorKind, Message, Role, SummaryRecord
from app.eval.recall import load_dataset


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _part_turns(state: SessionState, part: dict[str, Any]) -> list[SummaryTurn]:
    views = [state.messages[m] for m in state.order[part["first"]:part["last"] + 1]]
    return [SummaryTurn(v.message_id, v.seq, v.speaker, v.text) for v in views]


class _Tally:
    """Pooled counts of one level."""

    def __init__(self) -> None:
        self.kept = self.wanted = self.summary_words = self.turn_words = 0
        self.covered = self.asked = 0

    def part(self, text: str, turns: Sequence[SummaryTurn]) -> None:
        wanted = turn_identifiers(turns)
        self.wanted += len(wanted)
        self.kept += sum(1 for i in wanted if contains(text, i))
        self.summary_words += words(text)
        self.turn_words += sum(words(t.text) for t in turns)


def _gold_coverage(tally: dict[str, _Tally], questions: Sequence[dict[str, Any]], state: SessionState,
                   parts: Sequence[dict[str, Any]]) -> None:
    """Count, per level, the questions whose every gold turn is in a part naming their entities."""
    part_of = {}
    for part in parts:
        for index in range(part["first"], part["last"] + 1):
            part_of[index] = part
    speakers = set(state.speakers())
    for q in questions:
        if q.get("category") == "adversarial":
            continue
        entities = identifiers(q["question"]) - speakers
        gold = [state.messages[g].seq for g in q["gold"] if g in state.messages]
        if not entities or not gold:
            continue
        for level in LEVELS:
            tally[level].asked += 1
            tally[level].covered += all(i in part_of and any(contains(part_of[i][level], e) for e in entities)
                                        for i in gold)


async def run_summary_eval(engine: Engine, data_dir: Path, *, limit: int | None = None,
                           progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Summarize every conversation of ``data_dir`` (the first ``limit`` messages of each, when
    given) and measure the levels (see the module docstring)."""
    _, questions, _, by_conv = load_dataset(data_dir)
    tally: dict[str, _Tally] = {level: _Tally() for level in LEVELS}
    sessions: list[str] = []
    for conv, rows in by_conv.items():
        rows = rows[:limit] if limit else rows
        state = await engine.open_session(None, title=f"eval summaries {conv}")
        await engine.ingest(state.session_id, [
            Message(message_id=r["id"], role=Role.USER, content=r["text"], at=r["ts"],
                    author=Author(kind=AuthorKind.USER, id=r["author"])) for r in rows])
        await engine.summarize(state.session_id)
        sessions.append(state.session_id)
        summary = _session_summary(await engine.session_summaries(state.session_id))
        parts = summary.parts if summary is not None else []
        for part in parts:
            turns = _part_turns(state, part)
            for level in LEVELS:
                tally[level].part(part[level], turns)
        _gold_coverage(tally, [q for q in questions if q["conversation"] == conv], state, parts)
        if progress:
            progress(f"summarized {conv}: {len(rows)} turns in {len(parts)} parts")
    lab = engine.lab()
    stats = lab.summary_stats()
    hits, misses = stats.hits, stats.misses
    for session_id in sessions:
        await lab.replay_summaries(session_id)
    replayed = (stats.hits - hits) + (stats.misses - misses)
    return {
        "levels": {level: {
            "identifier_retention": round(t.kept / t.wanted, 4) if t.wanted else 1.0,
            "compression_ratio": round(t.summary_words / t.turn_words, 4) if t.turn_words else 0.0,
            "gold_coverage": round(t.covered / t.asked, 4) if t.asked else 0.0,
            "gen_ms_p50": round(_quantile(stats.gen_ms[level], 0.5), 2),
            "gen_ms_p95": round(_quantile(stats.gen_ms[level], 0.95), 2),
        } for level, t in tally.items()},
        # the model's calls alone (the levels it writes), for the generation time it costs
        "model_ms": {level: {"n": len(ms), "p50": round(_quantile(ms, 0.5), 1), "p95": round(_quantile(ms, 0.95), 1)}
                     for level, ms in stats.model_ms.items() if ms},
        "cache_hit_rate": round((stats.hits - hits) / replayed, 4) if replayed else 0.0,
        "questions_counted": tally["brief"].asked,
        "outcomes": dict(stats.outcomes),
        "conversations": len(sessions),
    }


def _session_summary(summaries: Sequence[SummaryRecord]) -> SummaryRecord | None:
    return next((s for s in summaries if s.subject == "session" and s.level == "detailed"), None)


def format_summary_report(report: dict[str, Any]) -> str:
    """The report as a table, one row per level."""
    lines = ["level     retention  compression  gold coverage  gen p50 ms  gen p95 ms"]
    for level, row in report["levels"].items():
        lines.append(f"{level:<9} {row['identifier_retention']:>9.3f}  {row['compression_ratio']:>11.3f}  "
                     f"{row['gold_coverage']:>13.3f}  {row['gen_ms_p50']:>10.1f}  {row['gen_ms_p95']:>10.1f}")
    for level, row in report.get("model_ms", {}).items():
        lines.append(f"the model's {row['n']} {level} calls: p50 {row['p50']:.0f} ms, p95 {row['p95']:.0f} ms")
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(report["outcomes"].items()))
    lines.append(f"cache hit rate on a replay: {report['cache_hit_rate']:.3f}; "
                 f"{report['questions_counted']} questions counted for gold coverage; who wrote the parts: {outcomes}")
    return "\n".join(lines)


def write_json(report: dict[str, Any], path: Path) -> None:
    """``--json FILE``: exactly the levels and the cache hit rate."""
    path.write_text(json.dumps({"levels": report["levels"], "cache_hit_rate": report["cache_hit_rate"]}, indent=2),
                    encoding="utf-8")
