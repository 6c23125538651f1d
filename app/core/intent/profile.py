"""The user profile ("who the user is" of the task-state contract): statements and matching.

A ``UserProfile`` holds three lists of short statements: preferences ("short answers"),
prohibitions ("delete files in /data") and permissions ("deploy to staging"). The engine keeps it
current by parsing user inputs with :func:`parse_profile_statements`, which recognises plain
statements such as "never X", "don't X", "I prefer X", "always X" and "you may X".

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

from app.core.text.sentences import CLAUSE_ENDS, SENTENCE_ENDS, statements
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

_LEAD = r"^(?:(?:and|also|but|so|please|oh|ok|okay)[,]?\s+)*"
_PATTERNS: tuple[tuple[StatementKind, re.Pattern[str]], ...] = (
    (
        "prohibition",
        re.compile(
            _LEAD + r"(?:you\s+(?:must|should)\s+)?(?:never(?:\s+ever)?|don'?t(?:\s+ever)?|"
            r"do\s+not(?:\s+ever)?|must\s+not|mustn't|should\s+not|shouldn't)\s+(?P<x>.+)$",
            re.IGNORECASE,
        ),
    ),
    (
        "preference",
        re.compile(
            _LEAD + r"(?:i\s+(?:would\s+|'d\s+)?(?:prefer|like)\s+|i\s+want\s+you\s+to\s+always\s+|"
            r"always\s+)(?P<x>.+)$",
            re.IGNORECASE,
        ),
    ),
    (
        "permission",
        re.compile(
            _LEAD + r"(?:you\s+(?:may|are\s+allowed\s+to|have\s+(?:my\s+)?permission\s+to)|"
            r"you're\s+allowed\s+to|feel\s+free\s+to|it'?s\s+ok(?:ay)?\s+to|"
            r"it\s+is\s+ok(?:ay)?\s+to)\s+(?P<x>.+)$",
            re.IGNORECASE,
        ),
    ),
)


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
    """Return the profile statements found in ``text``, in order; questions are never statements."""
    out: list[ProfileStatement] = []
    for body in statements(text, CLAUSE_ENDS):
        for kind, pattern in _PATTERNS:
            match = pattern.match(body)
            if match:
                obj = _clean_object(match.group("x"))
                if content_stems(obj):
                    out.append(ProfileStatement(kind=kind, text=obj, span=body))
                break
    return out


_NOTE = re.compile(
    _LEAD + r"(?:remember|note|keep\s+in\s+mind|bear\s+in\s+mind|don'?t\s+forget|do\s+not\s+forget|"
    r"make\s+a\s+note|for\s+the\s+record|fyi|just\s+so\s+you\s+know)\b(?:\s+that)?[\s:,]+\S",
    re.IGNORECASE,
)


def to_remember(text: str) -> bool:
    """Whether ``text`` only states something to keep: each of its sentences asks to remember or
    note a fact ("Remember that the launch is on Friday.", "Note: …", "Keep in mind …") or is a
    profile statement ("Never deploy on Fridays."). Such an input asks for no work, so it is never
    planned into steps (``app.core.engine.agent``) and ``pcm ask`` answers it as a turn; a
    question or an added request ("… Draft the announcement.") makes it work again."""
    parts = statements(text, SENTENCE_ENDS)
    return bool(parts) and len(parts) == len(statements(text.replace("?", "."), SENTENCE_ENDS)) and all(
        _NOTE.match(part) or parse_profile_statements(part) for part in parts)


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
