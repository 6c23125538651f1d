"""What the pipeline recalls besides messages: a memory object, an environment event, a profile
statement or a document part, as ``NoteView``.

A leaf of its own (the text package and the standard library only) so that what shows a note —
the desktop's Evidence tab, a document part — does not load the session state with it;
``app.core.session.state`` holds the notes of a session.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.core.text.quoting import FENCE_CLOSE


def _after(text: str, note: str) -> str:
    return f"{text}{chr(10) if text.endswith(FENCE_CLOSE) else ' '}{note}"


@dataclass(frozen=True, slots=True)
class NoteView:
    """A memory object or environment event the pipeline can recall."""

    note_id: str
    kind: str  # "memory" | "env" | "profile" (a profile statement made in another session, or added by hand)
    text: str
    at: str
    # When the session got it (an event's ``at`` is when it happened): ``as_of`` keeps the notes
    # a turn could have seen. "" = always there.
    added_at: str = ""
    valid_to: str = ""  # a memory no longer true since then (a newer fact closed it) ...
    closed_at: str = ""  # ... which the session learned at this moment
    removed_at: str = ""  # revoked by the user: never recalled after this moment
    origin: str = ""  # the title of the session it came from, when another one
    source_ids: tuple[str, ...] = ()  # the evidence a memory was taken from
    memory_type: str = ""  # a memory's type (fact, preference, prohibition, ...)
    key: str = ""  # a fact's subject ("city"): its earlier, closed values share it
    neighbours: tuple[str, ...] = ()  # another session's message: the notes of the messages next to it
    speaker: str = ""  # another session's message: who said it (the structured channel matches it)
    selector: str = ""  # a document part: where in its file it is (``page:12``; app.core.session.documents)
    uri: str = ""  # a document part: its file (the Evidence tab opens it there)

    def render(self) -> str:
        """The note's text with when it stopped being true and the session it came from; after a
        quotation these go on a line of their own (the closer stays a line of its own)."""
        text = self.text
        if self.valid_to:
            text = _after(text, f"(until {self.valid_to[:10]}; no longer true)")
        if self.origin:
            text = _after(text, f"(from session \u201c{self.origin}\u201d)")
        return text

    def as_of(self, at: str) -> "NoteView | None":
        """The note as a turn recorded at ``at`` saw it (None: it was not there, or revoked; a
        revoked ``profile`` note stays, revoked: the profile leaves the statement out, as it did)."""
        if self.added_at > at:
            return None
        if self.removed_at and self.removed_at <= at:
            return self if self.kind == "profile" else None
        if (self.valid_to and self.closed_at > at) or self.removed_at:
            open_then = self.closed_at > at
            return replace(self, valid_to="" if open_then else self.valid_to,
                           closed_at="" if open_then else self.closed_at, removed_at="")
        return self
