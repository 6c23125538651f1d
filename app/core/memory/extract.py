"""Memory objects from a text, by rules (the fast path of the memory writer).

``extract_memories`` reads one piece of evidence (a user turn, an answer, an environment event or
a tool result) and returns the memory objects it states: the user's profile (preferences,
prohibitions, permissions), keyed facts ("my deadline is Friday", "I live in Porto", a
``key: value`` line of a watched file), decisions ("we decided to use Postgres"), commitments ("I
will send the report by Monday") and dated events ("I went to Kyoto last week"). Each object
carries its one-line context, keywords, entities and tags, an importance by type, the evidence it
came from and a scope.

Ids are derived from (evidence id, type, normalised content), so extracting the same evidence
twice yields the same ids: the writer stores nothing new the second time (idempotent).

Deliberately narrow, like the fact rule it builds on: a missed memory costs a recall miss, a wrong
one would be stated to the model as known.
"""

from __future__ import annotations

import hashlib
import re

from app.core.context.compiler import extract_facts
from app.core.intent.profile import STATEMENT_LEAD, parse_profile_statements, statement_starts
from app.core.text.sentences import CLAUSE_ENDS, statements
from app.core.text.words import content_stems
from app.core.types import MemoryFragment, MemoryType

#: How much a memory of each type matters when nothing else is known (recall and consolidation).
IMPORTANCE: dict[str, float] = {
    "prohibition": 0.95, "permission": 0.8, "preference": 0.75, "decision": 0.7, "commitment": 0.65,
    "fact": 0.6, "event": 0.45, "summary": 0.5, "note": 0.3,
}
OUTSIDE = "outside"  # the tag of a memory taken from outside text (a file, a feed, a tool, a model answer)
#: Types that describe the user rather than one piece of work: they apply to every session.
WORKSPACE_TYPES = frozenset({"preference", "prohibition", "permission"})

_LEAD = r"^(?:(?:and|also|but|so|ok|okay|well)[,]?\s+)*"
_DECISION = re.compile(
    _LEAD + r"(?:we|i)\s+(?:have\s+)?(?:decided|agreed|chose|settled)\s+(?:to|on|that)\s+(?P<x>.+)$|"
    r"^(?:let'?s|we'?ll|we\s+will)\s+go\s+with\s+(?P<y>.+)$|^decision\s*:\s*(?P<z>.+)$",
    re.IGNORECASE,
)
_COMMITMENT = re.compile(
    _LEAD + r"(?:i\s+will|i'll|i\s+promise\s+to|i\s+have\s+to|i\s+need\s+to|i\s+must|"
    r"remind\s+me\s+to|todo\s*:)\s+(?P<x>.+)$",
    re.IGNORECASE,
)
_USER_FACT = re.compile(
    r"\bi\s+(?:now\s+|currently\s+)?(?P<verb>live|work|moved|study|studied)\s+(?P<prep>in|at|for|to|as)\s+"
    r"(?P<x>[^,.;!?\n]{2,60})",
    re.IGNORECASE,
)
#: Lasting facts about the user stated in the first person ("btw I'm vegetarian", "I'm allergic to
#: peanuts", "I don't eat pork"): a diet, an allergy or intolerance, a lasting condition. Matched
#: where a statement of the user's own may start (``statement_starts``), so "my friend is vegan",
#: "if I were vegan" and "am I diabetic" are not the user's.
_USER_TRAIT = re.compile(
    STATEMENT_LEAD + r"i(?:'m|\s+am)\s+(?:(?:a|an|also|now|strictly|strict|lifelong|practi[cs]ing)\s+)*"
    r"(?P<x>(?:vegetarian|vegan|pescatarian|teetotal|diabetic|coeliac|celiac|colou?r[\s-]?blind|left[\s-]handed|"
    r"deaf|hard\s+of\s+hearing|(?:lactose|gluten)[\s-]intolerant|allergic\s+to\s+[^,.;!?\n]{2,40}|"
    r"intolerant\s+(?:to|of)\s+[^,.;!?\n]{2,40})\b)|"
    + STATEMENT_LEAD + r"i\s+(?P<neg>don'?t|do\s+not|can'?t|cannot|never)\s+"
    r"(?P<verb>eat|drink)\s+(?!(?:much|a\s+lot|many|enough|anything|that|this|it|well|out|there|here)\b)"
    r"(?P<y>[^,.;!?\n]{2,40})",
    re.IGNORECASE,
)
_USER_FACT_KEYS = {"live": "home", "moved": "home", "work": "work", "study": "studies", "studied": "studies"}
_EVENT = re.compile(
    r"\b(?:yesterday|last\s+(?:week|month|year|night|monday|tuesday|wednesday|thursday|friday|saturday|"
    r"sunday|weekend)|(?:on|in|since)\s+(?:january|february|march|april|may|june|july|august|september|"
    r"october|november|december)|\d{4}-\d{2}-\d{2}|\d+\s+(?:days|weeks|months|years)\s+ago)\b",
    re.IGNORECASE,
)
_PAST = re.compile(r"\b(?:i|we)\s+(?:\w+ed|went|met|saw|got|had|made|took|gave|bought|left|came|ran|won|lost|"
                   r"found|began|started|finished|visited)\b", re.IGNORECASE)
_TRAILING = re.compile(r"\s+(?:now|currently|these days|again)\s*$", re.IGNORECASE)
_KEY_VALUE = re.compile(r"^\s*(?P<k>[A-Za-z][\w .-]{0,40}?)\s*[:=]\s*(?P<v>[^\n]{1,80}?)\s*$")
_ENTITY = re.compile(
    r"(?:[\w.-]+/[\w./-]+|\b[A-Z][a-zA-Z0-9]+(?:[-_.][A-Za-z0-9]+)*\b|\b[a-z]+\d+[a-z0-9]*\b|\b\d[\d.,:/-]*\d\b)"
)
_BEFORE_START = frozenset(".!?:;\n\"'(")  # what may come right before a sentence's first word


def memory_id(evidence_id: str, kind: str, content: str) -> str:
    """The id of a memory extracted from ``evidence_id``: the same input always gives the same id."""
    norm = " ".join(content.lower().split())
    return "mem-" + hashlib.sha1(f"{evidence_id}\x1f{kind}\x1f{norm}".encode()).hexdigest()[:20]


def entities(text: str) -> list[str]:
    """Names, identifiers, paths and numbers in ``text``. A capitalised word that only ever starts
    a sentence ("Last week…", "Thanks") is not taken for a name; one with inner capitals or digits
    ("PostgreSQL", "K8s"), or also capitalised inside a sentence, is."""
    found = [(m.group(0).strip(".,"), _starts_sentence(text, m.start())) for m in _ENTITY.finditer(text)]
    inside = {word for word, first in found if not first}
    out: dict[str, None] = {}
    for word, first in found:
        plain = word[:1].isupper() and word[1:].islower()
        if len(word) < 2 or (first and plain and word not in inside):
            continue
        out.setdefault(word, None)
    return list(out)[:12]


def _starts_sentence(text: str, at: int) -> bool:
    before = text[max(0, at - 40):at].rstrip(" \t")
    return not before or before[-1] in _BEFORE_START


def _memory(kind: MemoryType, content: str, *, evidence_id: str, at: str, source: str, key: str = "",
            value: str = "") -> MemoryFragment:
    ents = entities(content)
    return MemoryFragment(
        fragment_id=memory_id(evidence_id, kind, content),
        content=content,
        context=f"{kind} stated in {source}",
        type=kind,
        keywords=content_stems(content)[:12],
        entities=ents,
        tags=sorted({kind, *(e.lower() for e in ents[:3])}),
        importance=IMPORTANCE[kind],
        source_evidence_ids=[evidence_id],
        scope="workspace" if kind in WORKSPACE_TYPES else "session",
        key=key,
        value=value,
        valid_from=at,
        recorded_at=at,
    )


def _profile(text: str, evidence_id: str, at: str, source: str) -> list[MemoryFragment]:
    return [_memory(st.kind, st.text, evidence_id=evidence_id, at=at, source=source)
            for st in parse_profile_statements(text)]


def profile_by_hand(text: str, *, at: str) -> list[MemoryFragment]:
    """The profile statements of ``text`` ("I prefer…", "Never…", "You may…") as memories the user
    added in the Memory panel at ``at``: extractor "user", workspace scope, and no source evidence
    (no message says them; ``notes.note_of`` shows them to every session, their own included)."""
    out: dict[str, MemoryFragment] = {}
    for st in parse_profile_statements(text):
        memory = _memory(st.kind, st.text, evidence_id=f"profile:{at}", at=at, source="the Memory panel")
        out.setdefault(memory.fragment_id, memory.model_copy(update={
            "context": f"{st.kind} added by the user in the Memory panel", "source_evidence_ids": [],
            "extractor": "user"}))
    return list(out.values())


def _facts(text: str, evidence_id: str, at: str, source: str, speaker: str = "") -> list[MemoryFragment]:
    """Keyed facts; with ``speaker`` (imported history, where anyone may speak) a first-person fact
    is the speaker's ("Maria's home"), so two people's "my family" never close each other."""
    own = f"{speaker}'s " if speaker else ""
    out: list[MemoryFragment] = []
    for f in extract_facts(text, evidence_id=evidence_id, at=at, reliability=1.0):
        value = _TRAILING.sub("", f.value).strip()
        mine = re.search(r"\bmy\s+" + re.escape(f.key), text, re.IGNORECASE) is not None
        key = own + f.key if mine else f.key
        memory = _memory("fact", f"{key} is {value}", evidence_id=evidence_id, at=at, source=source,
                         key=key, value=value)
        out.append(memory.model_copy(update={"scope": "workspace"}) if mine else memory)
    for m in _USER_FACT.finditer(text):
        key = own + _USER_FACT_KEYS.get(m.group("verb").lower(), m.group("verb").lower())
        value = _TRAILING.sub("", m.group("x")).strip()
        memory = _memory("fact", f"{key} is {value}", evidence_id=evidence_id, at=at, source=source,
                         key=key, value=value)
        out.append(memory.model_copy(update={"scope": "workspace"}))  # about the user: every session's
    if not speaker:  # a trait is the app user's own, never a speaker's of imported history
        out += _traits(text, evidence_id, at, source)
    return out


def _traits(text: str, evidence_id: str, at: str, source: str) -> list[MemoryFragment]:
    """The user's lasting facts of ``text`` (``_USER_TRAIT``), as workspace facts "the user …"."""
    out: list[MemoryFragment] = []
    for sentence in statements(text, CLAUSE_ENDS):
        for start in statement_starts(sentence):
            m = _USER_TRAIT.match(sentence, start)
            if m is None:
                continue
            said = _TRAILING.sub("", " ".join((m.group("x") or m.group("y")).split()))
            if not content_stems(said):  # "I don't eat much": says nothing
                continue
            content = f"the user is {said}" if m.group("x") else f"the user does not {m.group('verb').lower()} {said}"
            memory = _memory("fact", content, evidence_id=evidence_id, at=at, source=source)
            out.append(memory.model_copy(update={"scope": "workspace"}))
    return out


def _statements(text: str, evidence_id: str, at: str, source: str) -> list[MemoryFragment]:
    out: list[MemoryFragment] = []
    for sentence in statements(text):
        decision = _DECISION.match(sentence)
        if decision is not None:
            obj = next(g for g in decision.groups() if g)
            out.append(_memory("decision", obj.strip(), evidence_id=evidence_id, at=at, source=source))
            continue
        commitment = _COMMITMENT.match(sentence)
        if commitment is not None and content_stems(commitment.group("x")):
            out.append(_memory("commitment", commitment.group("x").strip(), evidence_id=evidence_id, at=at,
                               source=source))
            continue
        if _EVENT.search(sentence) and _PAST.search(sentence):
            out.append(_memory("event", sentence, evidence_id=evidence_id, at=at, source=source))
    return out


def _key_values(text: str, name: str, evidence_id: str, at: str) -> list[MemoryFragment]:
    """``key: value`` / ``key = value`` lines of a file or tool result, as facts keyed by the source."""
    out: list[MemoryFragment] = []
    for line in text.splitlines()[:400]:
        m = _KEY_VALUE.match(line)
        if m is None or not content_stems(m.group("k")):
            continue
        key = f"{name} {m.group('k').strip().lower()}".strip()
        value = m.group("v").strip()
        out.append(_memory("fact", f"{key} is {value}", evidence_id=evidence_id, at=at, source=name or "a file",
                           key=key, value=value))
        if len(out) >= 40:
            break
    return out


def extract_memories(text: str, *, evidence_id: str, at: str, source: str = "user") -> list[MemoryFragment]:
    """The memory objects ``text`` states, deduplicated by id, in order.

    ``source``: "user" (the app user's own input: profile, facts, decisions, commitments, events),
    "history" or "history:SPEAKER" (imported history: facts, decisions, commitments and events of
    the session only; a first-person fact is SPEAKER's; "agent:SPEAKER" the same, for what an MCP
    client recorded: the engine marks those memories as from outside),
    "answer" (the model's answer: decisions only), or "env:NAME" / "tool:NAME" (an environment event
    or a tool result: its ``key: value`` lines as facts keyed by NAME).
    """
    found: list[MemoryFragment] = []
    if source == "user":
        found += _profile(text, evidence_id, at, "a user turn")
        found += _facts(text, evidence_id, at, "a user turn")
        found += _statements(text, evidence_id, at, "a user turn")
    elif source.partition(":")[0] in ("history", "agent"):  # anyone may speak: no profile, nothing workspace-wide
        speaker = source.partition(":")[2]
        found += [m.model_copy(update={"scope": "session"}) for m in
                  _facts(text, evidence_id, at, "history", speaker) + _statements(text, evidence_id, at, "history")]
    else:  # not the user's own words: quoted (fenced) wherever the memory is shown to the model
        if source == "answer":
            found += [m for m in _statements(text, evidence_id, at, "an answer") if m.type == "decision"]
        else:
            found += _key_values(text, source.partition(":")[2], evidence_id, at)
        found = [m.model_copy(update={"tags": sorted({*m.tags, OUTSIDE})}) for m in found]
    unique: dict[str, MemoryFragment] = {}
    for memory in found:
        unique.setdefault(memory.fragment_id, memory)
    return list(unique.values())
