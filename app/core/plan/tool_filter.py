"""The plan's tool filter: which few of a few hundred tools one input offers the model (seed 000 §3.6.4).

Tool choice is context compilation: the registry may grow without bound (built-in tools and every
tool server's), while each decision carries only the handful that matter. ``score_tools`` scores
every tool against one input from four signals and says why:

- the request's embedding against the tool description's (``ToolSignals.similarity``, measured
  once per tool when its server listed it, and per input for the request; only similarities at or
  above ``similarity_floor`` count, scaled to 0…1 above it);
- the request's words the tool's name, server and description share, weighted by how rare each
  word is among the tools (``ToolCatalog``), plus the intent's task type against the tool's name,
  an input that names the tool or its server, and an input that names a file for a file reader;
- the session's tool history (``ToolSignals.history``: calls made before this input).

``choose_tools`` then offers the best ``limit`` tools (the plan's ``tools.max_offered``) scoring
at least ``min_score`` that its caller does not refuse (the plan refuses what the user's
prohibitions name), and says what was refused and what was left out. A score depends on the
other tools only through how rare a word is among them (no normalisation over the list); replay
rebuilds the catalog from the recorded tool specs. Pure and deterministic: ties break by name,
scores are rounded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

from app.core.intent.model import Intent, Mode
from app.core.plan.tools import READS_FILES, ToolSignals, ToolSpec, name_stems, names_file
from app.core.text.words import content_stems, stem

#: The intent's task type → words in a tool's name that suit it.
TASK_WORDS: dict[str, frozenset[str]] = {
    k: frozenset(stem(w) for w in v.split())
    for k, v in {
        "retrieval": "search find query lookup fetch read get list browse web db database file docs index recall",
        "generation": "write draft generate create template format render translate summarize",
        "change": "edit write patch rename move delete create update git code file run apply replace",
        "diagnostic": "log logs run test debug trace inspect read query shell profile monitor status",
        "planning": "calendar todo task schedule plan list reminder",
        "interrupt": "task cancel stop pause resume status",
    }.items()
}
_ALWAYS = frozenset({"always", "core"})
_IDENT_RE = re.compile(r"[a-z0-9][\w-]*[a-z0-9]")
_NAMED_RE = re.compile(r"\b\w*[A-Z]\w*\b")  # words written with a capital: names
_SERVER_NAMED_RE = re.compile(r"\b([\w-]+)\s+(?:server|tools|mcp)\b")


class ToolFilterConfig(BaseModel):
    """The filter's weights, as data."""

    similarity_floor: float = 0.1
    similarity_weight: float = 1.0
    words_weight: float = 0.9
    named_tool: float = 1.0
    named_server: float = 0.25
    per_call: float = 0.1
    history_cap: float = 0.3
    task_word: float = 0.06
    task_cap: float = 0.12
    file_named: float = 0.25
    always: float = 0.3
    min_score: float = 0.12
    left_out_shown: int = 5


DEFAULT_FILTER = ToolFilterConfig()


class ScoredTool(BaseModel):
    """One tool's score for one input and the reasons behind it."""

    name: str
    score: float
    reasons: list[str] = Field(default_factory=list)

    def line(self) -> str:
        """``name (score): reasons`` — how the Plan tab and ``pcm show turn`` print it."""
        return f"{self.name} ({self.score:.2f}): {'; '.join(self.reasons) or 'no signal'}"


class ToolOffer(BaseModel):
    """What ``choose_tools`` decided: the tools offered (best first), those refused with why,
    and the best of the rest (left out: over the limit or under the minimum score)."""

    offered: list[ScoredTool] = Field(default_factory=list)
    refused: list[tuple[str, str]] = Field(default_factory=list)
    left_out: list[ScoredTool] = Field(default_factory=list)


# --------------------------------------------------------------------------- the catalog


@dataclass(frozen=True)
class _Entry:
    spec: ToolSpec
    words: frozenset[str]  # stems of name, server, tags and description
    name_words: frozenset[str]  # stems of the tool's own name and tags
    server_words: frozenset[str]
    identifier: str  # the own name, lower-cased, when it is an identifier (has _ or -, or is camelCase); else ""
    always: bool


class ToolCatalog:
    """The tools' words, indexed once per tool list: which tools hold each word (``postings``),
    each tool's own-name words, server, identifier, whether it reads files or is always there,
    and how rare each word is (``idf``). Scoring one input then touches only its own words."""

    _cache: dict[tuple[tuple[str, str, str, tuple[str, ...]], ...], ToolCatalog] = {}

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        self.entries = [_entry(s) for s in specs]
        self.index = {e.spec.name: i for i, e in enumerate(self.entries)}
        n = len(self.entries)
        self.postings = _postings(e.words for e in self.entries)
        self.name_postings = _postings(e.name_words for e in self.entries)
        self.identifiers = _postings([e.identifier] if e.identifier else [] for e in self.entries)
        self.idf = {w: math.log((n + 1) / (len(ix) + 0.5)) for w, ix in self.postings.items()}
        # A request word no tool holds weighs as a typical tool word: informative, but not about tools.
        self.unknown = float(np.median(list(self.idf.values()))) if self.idf else 1.0
        servers: dict[frozenset[str], list[int]] = {}
        for i, e in enumerate(self.entries):
            if e.server_words:
                servers.setdefault(e.server_words, []).append(i)
        self.servers = {words: np.asarray(ix) for words, ix in servers.items()}
        self.readers = np.asarray([READS_FILES <= e.name_words for e in self.entries], dtype=bool)
        self.always = np.asarray([e.always for e in self.entries], dtype=bool)

    @classmethod
    def of(cls, specs: Sequence[ToolSpec]) -> ToolCatalog:
        """The catalog of ``specs``, kept for the next call with the same tools (a few lists at most)."""
        key = tuple((s.name, s.server, s.description, tuple(s.tags)) for s in specs)
        found = cls._cache.get(key)
        if found is None:
            if len(cls._cache) >= 8:
                cls._cache.clear()
            found = cls._cache[key] = cls(specs)
        return found


def _postings(word_sets: Iterable[Iterable[str]]) -> dict[str, np.ndarray]:
    """word → the indices of the tools whose set holds it."""
    out: dict[str, list[int]] = {}
    for i, words in enumerate(word_sets):
        for word in words:
            out.setdefault(word, []).append(i)
    return {w: np.asarray(ix) for w, ix in out.items()}


def _entry(spec: ToolSpec) -> _Entry:
    own = spec.own_name
    name_words = frozenset(name_stems(own)) | {stem(t) for t in spec.tags}
    server_words = frozenset(name_stems(spec.server)) if spec.server else frozenset()
    words = name_words | server_words | frozenset(content_stems(spec.description))
    identifier = own.lower() if re.search(r"[_\-]|[a-z][A-Z]", own) else ""
    return _Entry(spec, words, name_words, server_words, identifier, bool(_ALWAYS & {t.lower() for t in spec.tags}))


# --------------------------------------------------------------------------- scoring


def score_tools(specs: Sequence[ToolSpec], intent: Intent, signals: ToolSignals,
                config: ToolFilterConfig = DEFAULT_FILTER, *, keep: int = 50) -> list[ScoredTool]:
    """The ``keep`` best tools with a score above zero for this input, best first (ties by name),
    each with the reasons it scored."""
    catalog = ToolCatalog.of(specs)
    if intent.mode == Mode.CLARIFY:  # a question back: no request to serve yet, only the tools always there
        return [ScoredTool(name=e.spec.name, score=config.always, reasons=["always available"])
                for e in catalog.entries if e.always]
    asked = _Request(intent, catalog)
    scores = np.round(_scores(catalog, asked, signals, config), 4)
    positive = np.flatnonzero(scores > 0)
    ranked = sorted(positive.tolist(), key=lambda i: (-scores[i], catalog.entries[i].spec.name))[:keep]
    return [ScoredTool(name=catalog.entries[i].spec.name, score=float(scores[i]),
                       reasons=_reasons(catalog.entries[i], asked, signals, config)) for i in ranked]


class _Request:
    """The input's words, weighted by how rare each is among the tools."""

    def __init__(self, intent: Intent, catalog: ToolCatalog) -> None:
        self.identifiers = set(_IDENT_RE.findall(intent.text.lower()))
        stems = set(content_stems(intent.text + " " + " ".join(intent.entities)))
        # A server is named as a name ("Slack", "GitHub") or as a server ("the memory server"),
        # not by a common word that happens to be its name ("tell me everything").
        self.named = set(content_stems(" ".join(_NAMED_RE.findall(intent.text)))) | set(
            content_stems(" ".join(_SERVER_NAMED_RE.findall(intent.text.lower()))))
        # A word no tool holds still counts (as a typical word): a request of mostly such words is weakly matched.
        self.weights = {w: catalog.idf[w] for w in stems if w in catalog.idf}
        self.total = sum(self.weights.values()) + catalog.unknown * (len(stems) - len(self.weights))
        self.stems = stems
        key = "interrupt" if intent.mode == Mode.INTERRUPT else intent.task_type.value
        self.task = key
        self.task_words = TASK_WORDS.get(key, frozenset())
        self.names_file = names_file(intent)


def _scores(catalog: ToolCatalog, asked: _Request, signals: ToolSignals, config: ToolFilterConfig) -> np.ndarray:
    """Every tool's score at once: similarity, shared words, names, task words, file, history, always."""
    score = np.zeros(len(catalog.entries), dtype=np.float64)
    span = 1.0 - config.similarity_floor
    for name, sim in signals.similarity.items():
        i = catalog.index.get(name)
        if i is not None and sim >= config.similarity_floor:
            score[i] += config.similarity_weight * (sim - config.similarity_floor) / span
    for name, calls in signals.history.items():
        i = catalog.index.get(name)
        if i is not None and calls > 0:
            score[i] += min(config.history_cap, config.per_call * calls)
    score += _word_scores(catalog, asked, config)
    score[catalog.always] += config.always
    return score


def _word_scores(catalog: ToolCatalog, asked: _Request, config: ToolFilterConfig) -> np.ndarray:
    """The words' part of every tool's score: shared words, names, task words, a named file."""
    score = np.zeros(len(catalog.entries), dtype=np.float64)
    if asked.total > 0:
        for word, weight in asked.weights.items():
            score[catalog.postings[word]] += config.words_weight * weight / asked.total
    for ident in asked.identifiers & catalog.identifiers.keys():
        score[catalog.identifiers[ident]] += config.named_tool
    for words, ix in catalog.servers.items():
        if words <= asked.named:
            score[ix] += config.named_server
    hits = np.zeros(len(catalog.entries), dtype=np.float64)
    for word in asked.task_words & catalog.name_postings.keys():
        hits[catalog.name_postings[word]] += 1
    score += np.minimum(config.task_cap, config.task_word * hits)
    if asked.names_file:
        score[catalog.readers] += config.file_named
    return score


def _reasons(entry: _Entry, asked: _Request, signals: ToolSignals, config: ToolFilterConfig) -> list[str]:
    """Why a tool scored: the signals that counted, in ``_scores``' order."""
    spec, reasons = entry.spec, []
    sim = signals.similarity.get(spec.name, 0.0)
    if sim >= config.similarity_floor:
        reasons.append(f"similar {sim:.2f}")
    shared = sorted(w for w in asked.weights if w in entry.words)
    if shared:
        reasons.append("words " + ", ".join(shared[:4]))
    if entry.identifier and entry.identifier in asked.identifiers:
        reasons.append("named")
    if entry.server_words and entry.server_words <= asked.named:
        reasons.append(f"server {spec.server} named")
    if entry.name_words & asked.task_words:
        reasons.append(f"{asked.task} task")
    if asked.names_file and READS_FILES <= entry.name_words:
        reasons.append("the input names a file")
    calls = signals.history.get(spec.name, 0)
    if calls:
        reasons.append(f"used {calls}× in this session")
    if entry.always:
        reasons.append("always available")
    return reasons


# --------------------------------------------------------------------------- choosing


def choose_tools(scored: Sequence[ScoredTool], specs: Mapping[str, ToolSpec], *, limit: int,
                 refuse: Callable[[ToolSpec], str | None],
                 config: ToolFilterConfig = DEFAULT_FILTER) -> ToolOffer:
    """Offer the best ``limit`` tools of ``scored`` that score at least ``min_score`` and that
    ``refuse`` lets through (it gives a reason to refuse one, or None). A refused tool that would
    have been offered is listed in ``refused``; the best of the rest in ``left_out``."""
    offer = ToolOffer()
    for tool in scored:
        spec = specs.get(tool.name)
        if spec is None:
            continue
        why = refuse(spec)
        if why is not None:
            if len(offer.offered) < limit and tool.score >= config.min_score:
                offer.refused.append((tool.name, why))
            continue
        if len(offer.offered) < limit and tool.score >= config.min_score:
            offer.offered.append(tool)
        elif len(offer.left_out) < config.left_out_shown:
            why_out = f"over the plan's limit of {limit}" if tool.score >= config.min_score else "scores too low"
            offer.left_out.append(tool.model_copy(update={"reasons": [why_out, *tool.reasons]}))
    return offer


def description_text(spec: ToolSpec) -> str:
    """The text a tool's embedding is made of: its server, its name's words and its description."""
    words = " ".join(spec.own_name.replace("_", " ").replace("-", " ").split())
    head = f"{spec.server} {words}" if spec.server else words
    return f"{head}: {spec.description}" if spec.description else head


def similarities(names: Sequence[str], matrix: np.ndarray | None, query: Sequence[float] | None,
                 floor: float = DEFAULT_FILTER.similarity_floor) -> dict[str, float]:
    """Tool name → cosine of ``query`` and the tool's row of ``matrix`` (description embeddings,
    one row per name), rounded to 4 places; only those at or above ``floor``."""
    if query is None or matrix is None or not names:
        return {}
    m = np.asarray(matrix, dtype=np.float32)
    q = np.asarray(query, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1) * (float(np.linalg.norm(q)) or 1.0)
    sims = np.divide(m @ q, norms, out=np.zeros(len(names), dtype=np.float32), where=norms > 0)
    return {n: round(float(s), 4) for n, s in zip(names, sims) if s >= floor}
