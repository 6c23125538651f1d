"""Environment events as records and how one is routed like an input (pure helpers).

An env event (a file edited, a feed item, a polled value) becomes an ``Evidence`` (same id as
the event, its text labelled and fenced like every outside text), a recall note, and an ENV
graph node. ``RouteIndex`` decides where each event of a batch belongs: to the task, then the
turn, whose own text names the file / feed / endpoint (``mention_names``), else to the most
similar task or turn by embedding when that similarity clears the threshold, else nowhere (the
environment lane).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath
from urllib.parse import urlparse

import numpy as np

from app.core.session.documents import document, document_summary
from app.core.text.quoting import fence, quote_label
from app.core.text.words import MENTIONS
from app.core.types import EnvEvent, Evidence, EvidenceSource, EvidenceType, SourceKind, Task, TaskStatus

NOTE_CHARS = 600  # of an event's content in its recall note (the evidence keeps all; an attached file's note too)
_ORDER = {TaskStatus.ACTIVE: 0, TaskStatus.BLOCKED: 1, TaskStatus.PENDING: 2, TaskStatus.COMPLETE: 3,
          TaskStatus.FAILED: 4}


def _path_name(uri: str) -> str:
    return (PureWindowsPath(uri) if "\\" in uri else PurePosixPath(uri)).name


def env_label(event: EnvEvent) -> str:
    """What the event is about, shortly: a file's path in its folder, a feed item's title, ...
    (outside text: it enters a prompt only through ``fence``, folded by ``quote_label``)."""
    if event.kind == "file":
        return str(event.payload.get("path") or event.title or _path_name(event.uri) or event.uri)
    return event.title or event.uri or event.source


_WORD = re.compile(r"[^a-z_ ]+")


def env_header(event: EnvEvent) -> str:
    """The header of the event's fenced text, in the app's own words only: ``file modified``,
    ``feed item``, ``api changed``, with ``, 2 hard links`` for a file that has more than one
    name (another may be outside the watched folder). The label goes inside the fence."""
    change = str(event.payload.get("change", "") or {"feed": "item", "api": "value"}.get(event.kind, "event"))
    header = f"{event.kind} {_WORD.sub('', change.lower())[:20] or 'event'}"
    links = event.payload.get("hard_links")
    if isinstance(links, int) and links > 1:
        header += f", {links} hard links"
    return header


def env_title(event: EnvEvent) -> str:
    """One line saying what changed: ``file modified: notes/plan.md`` (the label folded)."""
    return f"{env_header(event)}: {quote_label(env_label(event))}"


def event_text(event: EnvEvent) -> str:
    """What an event says: its content, or for a document read into parts its outline (the
    parts are evidences of their own, ``app.core.session.documents``)."""
    return document_summary(event) if document(event) is not None else event.content


def index_text(event: EnvEvent) -> str:
    """The text embedded for similarity routing (the same parts ``env_row`` indexes)."""
    return "\n".join(part for part in (event.title, event.uri, event_text(event)) if part)


def note_text(event: EnvEvent, max_chars: int = NOTE_CHARS) -> str:
    """The event as recall and the compiler see it: labelled, fenced, its content shortened to
    ``max_chars`` — except a file the user attached (``payload["attached"]``), kept whole: they
    asked for all of it to be remembered, and the compiler keeps the lines a question needs."""
    content = event_text(event).strip()
    if len(content) > max_chars and not event.payload.get("attached"):
        content = content[:max_chars].rstrip() + " …"
    if not content:
        content = str(event.payload.get("message") or event.payload.get("skipped") or "(no text)")
    return fence(env_header(event), content, env_label(event))


def env_evidence(event: EnvEvent, added_at: str) -> Evidence:
    """The evidence of an event (id = event id): type env_event, source env with the sensor kind
    as name and the file path / item link as uri; ``valid_from`` is when the session got it."""
    return Evidence(
        evidence_id=event.event_id,
        type=EvidenceType.ENV_EVENT,
        source=EvidenceSource(kind=SourceKind.ENV, name=event.kind, uri=event.uri or event.source),
        content=fence(env_header(event), event_text(event), env_label(event)),
        valid_from=added_at,
        metadata={"kind": event.kind, "source": event.source, "title": event.title,
                  "change": event.payload.get("change", ""), "at": event.at},
    )


def mention_names(event: EnvEvent) -> list[str]:
    """Names a task or a turn may use for what changed: a file's path in its folder and its
    name; a feed's title, URL and host; an endpoint's URL and watched path. Short ones dropped."""
    names: dict[str, None] = {}
    if event.kind == "file":
        for value in (event.payload.get("path"), event.title, _path_name(event.uri) if event.uri else ""):
            if value:
                names.setdefault(str(value), None)
                names.setdefault(_path_name(str(value)), None)
    else:
        for value in (event.payload.get("feed_title"), event.payload.get("feed"), event.source,
                      event.payload.get("path") if event.kind == "api" else None):
            if value:
                names.setdefault(str(value), None)
        for url in (event.payload.get("feed"), event.source):
            host = urlparse(str(url or "")).hostname or ""
            if host and "." in host:
                names.setdefault(host.removeprefix("www."), None)
    return [n for n in names if len(n) >= 3]


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` as a whole token (case-insensitive): "plan.md" is named by
    "update plan.md." but not by "myplan.md" or "plan.mdx"."""
    pattern = r"(?<![\w./-])" + re.escape(name) + r"(?![\w-]|\.\w)"
    return re.search(pattern, text, re.IGNORECASE) is not None


def task_text(task: Task) -> str:
    """What a task says about itself: name, acceptance, result."""
    return " ".join(part for part in (task.name, task.acceptance, task.result_summary) if part)


@dataclass(frozen=True)
class Route:
    """Where an event goes: ``kind`` "task" (``ref`` = task id), "turn" (``ref`` = turn node id)
    or "lane" (nowhere in particular); ``how`` "mention" / "similarity"; the score and why."""

    kind: str
    ref: str | None
    how: str
    score: float
    reason: str


LANE = Route("lane", None, "", 0.0, "no task or branch refers to it: environment lane")
@dataclass(frozen=True)
class _Target:
    kind: str  # "task" | "turn"
    ref: str
    name: str  # for the reason
    text: str  # lower-cased
    tokens: frozenset[str]  # MENTIONS.words


class RouteIndex:
    """The routing targets of one batch, prepared once: tasks (active first, then blocked,
    pending, done; latest first within a status) and turns (latest first), each with its text's
    tokens for exact mentions and its embedding for similarity. Routing an event is then a few
    set lookups and one matrix product, cheap enough for a burst of events on the event loop."""

    def __init__(self, tasks: Sequence[Task], turns: Sequence[tuple[str, str]], *,
                 task_vectors: Mapping[str, np.ndarray] | None = None,
                 turn_vectors: Mapping[str, np.ndarray] | None = None, threshold: float = 0.55) -> None:
        ordered = [t for _, t in sorted(enumerate(tasks), key=lambda p: (_ORDER.get(p[1].status, 5), -p[0]))]
        self.targets = [_Target("task", t.task_id, t.name, task_text(t).lower(), frozenset(MENTIONS.words(task_text(t))))
                        for t in ordered]
        self.targets += [_Target("turn", node, "", text.lower(), frozenset(MENTIONS.words(text))) for node, text in turns]
        self._first: dict[str, int] = {}  # token → the first (preferred) target whose text has it
        for n, target in enumerate(self.targets):
            for token in target.tokens:
                self._first.setdefault(token, n)
        vecs = {**{("task", k): v for k, v in (task_vectors or {}).items()},
                **{("turn", k): v for k, v in (turn_vectors or {}).items()}}
        self._rows = [n for n, t in enumerate(self.targets) if (t.kind, t.ref) in vecs]
        self._matrix = (np.stack([vecs[(self.targets[n].kind, self.targets[n].ref)] for n in self._rows])
                        if self._rows else None)
        self.threshold = threshold

    def _first_naming(self, name: str) -> int | None:
        low = name.lower()
        if " " not in low:
            return self._first.get(low)
        # a multi-word name (a feed's title): a phrase search, rare enough to scan for
        return next((n for n, t in enumerate(self.targets) if low in t.text and mentions(t.text, name)), None)

    def route(self, event: EnvEvent, vector: np.ndarray | None = None) -> Route:
        """Exact names first (tasks before turns), then the most similar target ≥ the threshold."""
        hits = [(n, name) for name in mention_names(event) if (n := self._first_naming(name)) is not None]
        if hits:
            n, hit = min(hits, key=lambda h: h[0])
            target = self.targets[n]
            where = f"task {target.name!r}" if target.kind == "task" else "the branch at this turn"
            return Route(target.kind, target.ref, "mention", 1.0, f"{where} names {hit!r}")
        if vector is None or self._matrix is None:
            return LANE
        scores = self._matrix @ np.asarray(vector, dtype=np.float32)
        best = int(np.argmax(scores))  # the first of equal scores: the preferred target
        score = float(scores[best])
        if score < self.threshold:
            return LANE
        target = self.targets[self._rows[best]]
        where = f"task {target.name!r}" if target.kind == "task" else "this turn"
        return Route(target.kind, target.ref, "similarity", round(score, 4), f"similar to {where} ({score:.2f})")
