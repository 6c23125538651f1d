"""The user profile ("who the user is" of the task-state contract): statements and matching.

A ``UserProfile`` holds three lists of short statements: preferences ("short answers"),
prohibitions ("delete files in /data") and permissions ("deploy to staging"). The engine keeps it
current by parsing user inputs with :func:`parse_profile_statements`, which recognises statements
such as "never X", "don't X", "I prefer X", "always X" and "you may X" anywhere in a sentence
("By the way, I prefer metric units"), guarded against questions, conditions, quotes and other
people's words ("my friend said she prefers…").

Matching a request against a statement is deliberately coarse and explainable: light stemming,
stop words removed, and words inside a negated clause of the request ("... but don't delete
anything") do not count, so stating a prohibition never conflicts with itself. The word helpers
live in :mod:`app.core.text.words`.

Everything here is pure and deterministic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from app.core.text.sentences import CLAUSE_ENDS, SENTENCE_ENDS, piece_spans, statements
from app.core.text.words import content_stems, negated_stems

# --------------------------------------------------------------------------- matching


def statement_matches(statement: str, text: str, min_share: float = 0.5) -> bool:
    """True when ``text`` asks for what ``statement`` describes (outside negated clauses).

    The first content word of the statement (usually its verb) must appear, and at least
    ``min_share`` of its content words overall: "delete files in /data" matches "delete the old
    files in data" but not "delete the temp folder" nor "never delete files".
    """
    wanted = content_stems(statement)
    if not wanted:
        return False
    have = set(content_stems(text)) - negated_stems(text)
    if wanted[0] not in have:
        return False
    hits = sum(1 for s in wanted if s in have)
    return hits >= max(1, math.ceil(min_share * len(wanted) - 1e-9))


# --------------------------------------------------------------------------- statements

StatementKind = Literal["preference", "prohibition", "permission"]

#: Words a statement may open with that do not change it ("please always…", "btw, I prefer…").
STATEMENT_LEAD = (r"(?:(?:and|also|but|so|please|oh|ok|okay|well|actually|anyway|btw|by\s+the\s+way|just|basically|"
         r"honestly|personally|generally|in\s+general|for\s+the\s+record|fyi|just\s+so\s+you\s+know|"
         r"(?:please\s+)?(?:note|remember|keep\s+in\s+mind)(?:\s+that)?)[,:]?\s+)*")
_PATTERNS: tuple[tuple[StatementKind, re.Pattern[str]], ...] = (
    (
        "prohibition",
        re.compile(
            STATEMENT_LEAD + r"(?:you\s+(?:must|should)\s+)?(?:never(?:\s+ever)?|don'?t(?:\s+ever)?|"
            r"do\s+not(?:\s+ever)?|must\s+not|mustn't|should\s+not|shouldn't|"
            r"i\s+(?:don'?t|do\s+not|never)\s+want\s+you\s+to(?:\s+ever)?)\s+(?P<x>.+)$",
            re.IGNORECASE,
        ),
    ),
    (
        "preference",
        re.compile(
            STATEMENT_LEAD + r"(?:i(?:\s+would|'d)?\s+(?:like|want|need)\s+you\s+to\s+always\s+|"
            r"i(?:\s+would|'d)?\s+(?:really\s+|generally\s+|usually\s+|much\s+|also\s+)*"
            r"(?:prefer|like)\s+(?!it\b|that\b|this\b|them\b|when\b|how\b|you\b)|"
            r"always\s+|from\s+now\s+on[,]?\s+(?:please\s+)?)(?P<x>.+)$",
            re.IGNORECASE,
        ),
    ),
    (
        "permission",
        re.compile(
            STATEMENT_LEAD + r"(?:you\s+(?:may|are\s+allowed\s+to|have\s+(?:my\s+)?permission\s+to)|"
            r"you're\s+allowed\s+to|feel\s+free\s+to|it'?s\s+ok(?:ay)?\s+to|"
            r"it\s+is\s+ok(?:ay)?\s+to)\s+(?P<x>.+)$",
            re.IGNORECASE,
        ),
    ),
)

# Where a statement may start inside a sentence: its start, after a clause mark, or after a word
# that joins clauses ("By the way, I prefer…", "…, and never use emojis", "because I prefer…").
_STARTS = re.compile(r"(?:^|[,:(\u2014\u2013]|\s-\s|\b(?:and|but|so|because|since|also|plus|btw|though|"
                     r"although|anyway|actually)\b)\s*", re.IGNORECASE)
# What, said before it in the sentence, makes a statement not the user's own standing wish:
# a condition or supposition ("if I preferred…"), a question's opening ("do you think I prefer"),
# and another person's words ("my friend said always…"; the user's own "as I told you" is theirs).
_HYPOTHETICAL = re.compile(r"\b(?:if|unless|suppose|supposing|imagine|assuming|assume|whether|in\s+case|"
                           r"what\s+if|let'?s\s+say|pretend|hypothetically|wonder)\b", re.IGNORECASE)
_QUESTION_OPEN = re.compile(r"^\W*(?:do|does|did|am|is|are|was|were|what|why|how|when|where|who|which|shall|"
                            r"should\s+i|can\s+i|could\s+i)\b", re.IGNORECASE)
_REPORTED = re.compile(r"\b(?P<who>\w+)\s+(?:\w+ly\s+)?(?:said|says|told|tells|wrote|writes|thinks|thought|"
                       r"claims|claimed|asked|asks|believes|reckons|insists|insisted|wants|wanted)\b|"
                       r"\baccording\s+to\b", re.IGNORECASE)
_QUOTES = re.compile("[\"\u201c\u201d]")


def _own_voice(before: str) -> bool:
    """Whether a statement after ``before`` (the start of its sentence) is the user's own: not
    inside quotation marks, not under a condition or a question, not reported from someone else."""
    if len(_QUOTES.findall(before)) % 2 or _HYPOTHETICAL.search(before) or _QUESTION_OPEN.search(before):
        return False
    return all((m.group("who") or "").lower() in {"i", "we"} for m in _REPORTED.finditer(before))


def statement_starts(sentence: str) -> list[int]:
    """The offsets in ``sentence`` where a statement of the user's own may start (see ``_STARTS``
    and ``_own_voice``): the rules of the profile and of memory facts match there."""
    out: list[int] = []
    for m in _STARTS.finditer(sentence):
        if m.end() < len(sentence) and (not out or m.end() != out[-1]) and _own_voice(sentence[:m.start()]):
            out.append(m.end())
    return out


class ProfileStatement(BaseModel):
    """One recognised statement: its kind, the normalised object and the words it came from."""

    kind: StatementKind
    text: str
    span: str


def _clean_object(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"[\s,]*(?:please|thanks|thank you)?[\s.!;,]*$", "", text, flags=re.IGNORECASE)
    return text.strip()


def parse_profile_statements(text: str) -> list[ProfileStatement]:
    """Return the profile statements found anywhere in ``text``'s sentences, in order ("By the way,
    I prefer metric units", "…, and never use emojis"); questions, conditions, quotes and other
    people's words are never statements (``statement_starts``). A statement runs to the next one."""
    out: list[ProfileStatement] = []
    for body in statements(text, CLAUSE_ENDS):
        found: list[tuple[int, StatementKind, re.Match[str]]] = []
        for at in statement_starts(body):
            hit = next(((kind, m) for kind, p in _PATTERNS if (m := p.match(body, at))), None)
            if hit is not None and not (found and at < found[-1][2].start("x")):
                found.append((at, hit[0], hit[1]))
        clauses = [at for at in statement_starts(body) if _SUBJECT.match(body, at)]
        nexts = [at for at, _, _ in found[1:]] + [len(body)]
        for (_, kind, m), nxt in zip(found, nexts, strict=False):
            end = min([at for at in clauses if at > m.start("x")] + [nxt])
            obj = _clean_object(_JOINER.sub("", body[m.start("x"):end]))
            if content_stems(obj):
                out.append(ProfileStatement(kind=kind, text=obj, span=body[m.start():end].strip(" ,")))
    return out


# A clause with a subject of its own ends the statement before it ("I prefer tea, and I'm vegan").
_SUBJECT = re.compile(r"(?:i|i'm|i've|i'd|you|you're|we|we're|he|she|they|it's|my|our)\b", re.IGNORECASE)
_JOINER = re.compile(r"[\s,;:(\u2014\u2013-]*(?:\b(?:and|but|so|because|since|also|plus|btw|though|although|"
                     r"anyway|actually)\s*)?$", re.IGNORECASE)
_NOTE = re.compile(
    r"(?:(?:and|also|but|so|please|oh|ok|okay)[,]?\s+)*"
    r"(?:remember|note|keep\s+in\s+mind|bear\s+in\s+mind|don'?t\s+forget|do\s+not\s+forget|"
    r"make\s+a\s+note|for\s+the\s+record|fyi|just\s+so\s+you\s+know)\b(?:\s+that)?[\s:,]+\S",
    re.IGNORECASE,
)


def besides_statements(text: str) -> str:
    """The sentences of ``text`` that neither ask to remember or note a fact ("Remember that the
    launch is on Friday.", "Note: …", "Keep in mind …") nor state a profile rule ("Never deploy on
    Fridays."): what else the input asks or says ("What should I pack?"), joined by spaces."""
    pieces = (text[a:b].strip() for a, b in piece_spans(text.replace("\u2019", "'")))
    return " ".join(p for p in pieces if p.endswith("?") or not (
        _NOTE.match(p) or parse_profile_statements(p.rstrip(SENTENCE_ENDS))))


def to_remember(text: str) -> bool:
    """Whether ``text`` only states something to keep (``besides_statements`` leaves nothing).
    Such an input asks for no work, so it is never planned into steps (``app.core.engine.agent``)
    and ``pcm ask`` answers it as a turn; a question or an added request ("… Draft the
    announcement.") makes it work again."""
    return bool(statements(text, SENTENCE_ENDS)) and not besides_statements(text)


def _dedup(items: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for item in items:
        key = item.strip().lower()
        if key and key not in seen:
            seen[key] = item.strip()
    return list(seen.values())


class UserProfile(BaseModel):
    """Preferences, prohibitions and permissions, each a list of short statements."""

    preferences: list[str] = Field(default_factory=list)
    prohibitions: list[str] = Field(default_factory=list)
    permissions: list[str] = Field(default_factory=list)
    # statement (lower case) → [the evidence ids it was said in..., "" or the other session's title
    # last]: a profile line is bound to the message it came from (in any session)
    origins: dict[str, list[str]] = Field(default_factory=dict)

    def origin(self, statement: str) -> tuple[tuple[str, ...], str]:
        """(evidence ids, the other session's title or "") of a statement of this profile."""
        found = self.origins.get(statement.strip().lower())
        return ((), "") if not found else (tuple(found[:-1]), found[-1])

    def is_empty(self) -> bool:
        """True when the profile holds no statement at all."""
        return not (self.preferences or self.prohibitions or self.permissions)

    def with_statements(self, statements: Iterable[ProfileStatement], evidence_ids: tuple[str, ...] = (),
                        where: str = "") -> UserProfile:
        """Return a new profile with ``statements`` added; the latest statement wins a conflict.

        A new prohibition removes a permission with the same content words and vice versa.
        ``evidence_ids``/``where``: the message(s) the statements were made in, and the title of
        the other session they come from ("" for this one).
        """
        prefs, prohib, perms = list(self.preferences), list(self.prohibitions), list(self.permissions)
        statements = list(statements)
        for st in statements:
            key = content_stems(st.text)
            if st.kind == "prohibition":
                perms = [p for p in perms if content_stems(p) != key]
                prohib.append(st.text)
            elif st.kind == "permission":
                prohib = [p for p in prohib if content_stems(p) != key]
                perms.append(st.text)
            else:
                prefs.append(st.text)
        origins = dict(self.origins)
        if evidence_ids:
            origins.update({st.text.strip().lower(): [*evidence_ids, where] for st in statements})
        return UserProfile(preferences=_dedup(prefs), prohibitions=_dedup(prohib), permissions=_dedup(perms),
                           origins=origins)

    def updated_from(self, text: str, evidence_id: str = "") -> tuple[UserProfile, list[ProfileStatement]]:
        """Parse ``text`` (said in ``evidence_id``) and return (the updated profile, the statements
        that were recognised)."""
        statements = parse_profile_statements(text)
        if not statements:
            return self, []
        return self.with_statements(statements, (evidence_id,) if evidence_id else ()), statements

    def prohibition_hits(self, text: str) -> list[str]:
        """Return the prohibitions that ``text`` would break, in profile order."""
        return [p for p in self.prohibitions if statement_matches(p, text)]

    def permission_hits(self, text: str) -> list[str]:
        """Return the permissions that cover what ``text`` asks for, in profile order.

        Stricter than prohibitions (every content word must match): a wrong conflict only costs a
        question, a wrong permission would let an action through.
        """
        return [p for p in self.permissions if statement_matches(p, text, min_share=1.0)]
