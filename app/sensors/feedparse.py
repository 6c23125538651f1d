"""Parsing a fetched feed in a child process, bounded in time and memory, one entry at a time.

``feedparser`` has no time bound of its own (40,000 attributes in 0.43 MB took 34–47 s), raises out
of the whole document on a character reference to a lone surrogate (``&#xD800;``) or past U+10FFFF,
and reads HTML pages, empty bodies and JSON as feeds with no entries. So the parent hands the bytes
to a child Python process (:func:`parse_in_child`), which is killed when it runs past
its time cap and whose address space is capped (it imports this module, and so the very code of the
parent: its folder goes first on ``PYTHONPATH``); the child:

* replaces character references to invalid code points, and control characters XML forbids, by a
  marker, so that only the entries that hold one are refused, not the document; and writes HTML's
  named references that XML does not define (``&nbsp;``, ``&copy;``) as numeric ones (feeds use
  them freely, and one would make the whole document malformed);
* tells a feed from what is not one (:func:`not_a_feed`: an empty body, an HTML page, JSON, other
  XML, text);
* de-duplicates entries against the ids seen so far and turns each new one into the fields of a
  ``RawChange``, each in isolation: an entry that fails or holds something it may not (an invalid
  character, a field far longer than any real one) is skipped with its reason.

The result is a JSON object (see :func:`parse_feed`); the parent turns it into changes and status.
"""

from __future__ import annotations

import hashlib
import html.entities
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.sensors.child import child_main, run_capped
from app.sensors.text import html_to_text

PARSE_TIMEOUT_S = 10.0
PARSE_MEMORY_BYTES = 768 << 20
MAX_ENTRY_CHARS = 20_000
# Longer than any real one: an entry with such a field is refused, not cut.
FIELD_LIMITS = {"id": 2_000, "title": 2_000, "link": 8_000, "author": 1_000, "published": 200}
_MARKER = "\U0010fffd"  # stands for a character reference to an invalid code point
_CHARREF = re.compile(rb"&#(?:[xX]([0-9a-fA-F]{1,16})|([0-9]{1,24}));")
_NAMEDREF = re.compile(rb"&([A-Za-z][A-Za-z0-9]{1,31});")
_XML_NAMED = {b"amp", b"lt", b"gt", b"quot", b"apos"}
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # not allowed in XML 1.0, even as a reference


# --------------------------------------------------------------------------- entries


def entry_id(entry: Mapping[str, Any]) -> str:
    """The entry's id, else its link, else a hash of its title and date. An id or link longer than
    its field limit is replaced by its hash: ids are kept (``seen``), and must stay small."""
    for key in ("id", "link"):
        value = entry.get(key)
        if value:
            text = str(value)
            if len(text) > FIELD_LIMITS[key]:
                return "sha1:" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
            return text
    basis = f"{entry.get('title', '')}\x1f{entry.get('published', entry.get('updated', ''))}"
    return "sha1:" + hashlib.sha1(basis.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def plain(detail: Mapping[str, Any] | None, value: str) -> str:
    """A feed text field as plain text (HTML stripped unless it is declared text/plain)."""
    kind = str((detail or {}).get("type", "text/html"))
    return value.strip() if kind == "text/plain" else html_to_text(value)


def entry_text(entry: Mapping[str, Any], feed_title: str = "", *, max_chars: int = MAX_ENTRY_CHARS) -> str:
    """Labelled plain text of an entry: Title/Feed/Published/Link/Author lines, a blank line, and
    the longest of its content and summary with the HTML stripped."""
    title = plain(entry.get("title_detail"), str(entry.get("title", "")))
    body = ""
    candidates: list[tuple[Mapping[str, Any] | None, str]] = [
        (c, str(c.get("value", ""))) for c in entry.get("content", []) or []
    ]
    if entry.get("summary"):
        candidates.append((entry.get("summary_detail"), str(entry["summary"])))
    if candidates:
        detail, value = max(candidates, key=lambda c: len(c[1]))
        body = plain(detail, value)
    labels = [
        ("Title", title),
        ("Feed", feed_title),
        ("Published", str(entry.get("published") or entry.get("updated") or "")),
        ("Link", str(entry.get("link", ""))),
        ("Author", str(entry.get("author", ""))),
    ]
    head = "\n".join(f"{k}: {v}" for k, v in labels if v)
    text = f"{head}\n\n{body}" if body else head
    return text[:max_chars]


class BadEntry(Exception):
    """An entry that is skipped; ``str()`` is the reason."""


def _check_text(field: str, value: str, refs: Sequence[str]) -> None:
    if _MARKER in value:
        shown = ", ".join(refs[:3]) or "an invalid one"
        raise BadEntry(f"its {field} has a character reference to an invalid code point ({shown})")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise BadEntry(f"its {field} holds a lone surrogate (U+{ord(value[err.start]):04X})") from None


def _check_entry(entry: Mapping[str, Any], refs: Sequence[str]) -> None:
    """``BadEntry`` when a field is absurdly long or holds an invalid character."""
    dates = {"published": str(entry.get("published") or entry.get("updated") or "")}
    fields = {key: str(entry.get(key) or "") for key in ("id", "title", "link", "author")} | dates
    for key, value in fields.items():
        if len(value) > FIELD_LIMITS[key]:
            raise BadEntry(f"its {key} is {len(value):,} characters (limit {FIELD_LIMITS[key]:,})")
        _check_text(key, value, refs)
    for i, content in enumerate(entry.get("content", []) or []):
        _check_text(f"content #{i + 1}", str(content.get("value", "")), refs)
    _check_text("summary", str(entry.get("summary", "")), refs)
    for tag in entry.get("tags", []) or []:
        _check_text("tag", str(tag.get("term", "")), refs)


def change_fields(url: str, eid: str, entry: Mapping[str, Any], feed_title: str,
                  refs: Sequence[str] = ()) -> dict[str, Any]:
    """The fields of the ``RawChange`` for a new entry; ``BadEntry`` when it must be skipped."""
    _check_entry(entry, refs)
    link = str(entry.get("link", ""))
    payload = {
        "entry_id": eid,
        "feed": url,
        "feed_title": feed_title,
        "link": link,
        "published": str(entry.get("published") or entry.get("updated") or ""),
        "author": str(entry.get("author", "")),
        "tags": [str(t.get("term", "")) for t in entry.get("tags", []) or [] if t.get("term")],
    }
    return {
        "key": f"feed:{url}#{eid}", "kind": "feed", "source": url, "uri": link or url, "change": "new",
        "title": plain(entry.get("title_detail"), str(entry.get("title", ""))) or link or url,
        "content": entry_text(entry, feed_title), "payload": payload,
    }


# --------------------------------------------------------------------------- the document


def mark_invalid_references(body: bytes) -> tuple[bytes, list[str]]:
    """``body`` with every numeric character reference to a code point that is not a Unicode
    scalar value (a surrogate, or past U+10FFFF), and every control character XML forbids,
    replaced by a reference to the marker; HTML's named references XML lacks written as numeric
    ones (a name no one defines, as text); and the replaced references and characters, in order."""
    found: list[str] = []

    def swap(match: re.Match[bytes]) -> bytes:
        hex_digits, decimal = match.groups()
        code = int(hex_digits, 16) if hex_digits else int(decimal)
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF or (code < 0x20 and code not in (0x09, 0x0A, 0x0D)):
            found.append(match.group().decode("ascii"))
            return b"&#x10FFFD;"
        return match.group()

    def control(match: re.Match[bytes]) -> bytes:
        found.append(f"control character U+{match.group()[0]:04X}")
        return b"&#x10FFFD;"

    def named(match: re.Match[bytes]) -> bytes:
        name = match.group(1)
        code = html.entities.name2codepoint.get(name.decode("ascii"))
        if name in _XML_NAMED:
            return match.group()
        return b"&amp;" + match.group()[1:] if code is None else b"&#%d;" % code  # unknown: shown as written

    body = _CONTROL.sub(control, body)
    return _NAMEDREF.sub(named, _CHARREF.sub(swap, body)), found


def not_a_feed(body: bytes, parsed: Mapping[str, Any]) -> str | None:
    """What ``body`` is when feedparser found no feed in it ("an empty response", "an HTML
    page", ...), else None. A document feedparser recognises (RSS, Atom, RDF, CDF) is a feed, even
    with no entries; one it does not is no feed, even if its loose parser found "entries" in it."""
    if parsed.get("version"):  # feedparser names every format it recognises ("rss", "atom", ...)
        return None
    head = body.lstrip(b"\xef\xbb\xbf \t\r\n")[:512].lower()
    if not head:
        return "an empty response"
    if head.startswith((b"<!doctype html", b"<html")) or b"<html" in head or b"<body" in head:
        return "an HTML page"
    if head[:1] in (b"{", b"["):
        return "JSON (JSON Feed is not read; use the site's RSS or Atom feed)"
    if head.startswith(b"<"):
        return "XML without an RSS, Atom or RDF feed in it"
    return "text that is not XML"


def _benign(exc: object) -> bool:
    import feedparser

    return isinstance(exc, (feedparser.CharacterEncodingOverride, feedparser.NonXMLContentType))


def parse_feed(body: bytes, *, url: str, content_type: str = "", seen: Sequence[str] = (), emit: bool = True,
               max_entries: int = 100) -> dict[str, Any]:
    """Parse ``body`` (in the child): ``{"kind": "not_a_feed" | "malformed", "message"}`` or
    ``{"kind": "ok", "feed_title", "entries_in_feed", "fresh" (new ids, newest first), "changes"
    (the fields of a RawChange per emitted entry, oldest first), "skipped" ([{entry_id, title,
    reason}])}``. With ``emit`` false nothing is emitted (a baseline poll)."""
    import feedparser

    marked, refs = mark_invalid_references(body)
    headers = {"content-type": content_type} if content_type else None
    # A stream, never the bytes themselves: given bytes, feedparser first tries them as a file
    # name, so a server answering "/etc/passwd" would make it read a local file.
    # No sanitizer: it keeps hidden elements' text (see app.sensors); app.sensors.text strips.
    parsed = feedparser.parse(io.BytesIO(marked), response_headers=headers, sanitize_html=False)
    what = not_a_feed(body, parsed)
    if what is not None:
        return {"kind": "not_a_feed", "message": f"not a feed: {url} answered with {what}"}
    if parsed.get("bozo") and not _benign(parsed.get("bozo_exception")):
        return {"kind": "malformed", "message": f"malformed feed: {parsed.get('bozo_exception') or 'unknown parse error'}"}
    feed_title = html_to_text(str(parsed.feed.get("title", "")))
    if _MARKER in feed_title or len(feed_title) > FIELD_LIMITS["title"]:
        feed_title = ""
    known = set(seen)
    fresh: list[tuple[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for number, entry in enumerate(parsed.entries, 1):
        try:
            eid = entry_id(entry)
        except Exception as exc:  # noqa: BLE001 - one entry never blocks the feed
            skipped.append({"entry_id": f"#{number}", "title": "", "reason": f"no usable id ({type(exc).__name__})"})
            continue
        if eid not in known:
            known.add(eid)
            fresh.append((eid, entry))
    changes: list[dict[str, Any]] = []
    for eid, entry in reversed(fresh[:max_entries] if emit else []):  # feeds list newest first
        try:
            changes.append(change_fields(url, eid, entry, feed_title, refs))
        except BadEntry as bad:
            title = str(entry.get("title", ""))[:80].replace(_MARKER, "\ufffd")
            skipped.append({"entry_id": eid[:200], "title": title, "reason": str(bad)})
        except Exception as exc:  # noqa: BLE001 - one entry never blocks the feed
            skipped.append({"entry_id": eid[:200], "title": "", "reason": f"{type(exc).__name__}: {str(exc)[:200]}"})
    return {"kind": "ok", "feed_title": feed_title, "entries_in_feed": len(parsed.entries),
            "fresh": [eid for eid, _ in fresh], "changes": changes, "skipped": skipped}


# --------------------------------------------------------------------------- the child process


def parse_in_child(body: bytes, *, url: str, content_type: str = "", seen: Sequence[str] = (), emit: bool = True,
                   max_entries: int = 100, timeout_s: float = PARSE_TIMEOUT_S,
                   memory_bytes: int = PARSE_MEMORY_BYTES) -> dict[str, Any]:
    """:func:`parse_feed` in a capped child process (:func:`app.sensors.child.run_capped`), killed
    after ``timeout_s`` seconds, its address space capped at ``memory_bytes``. Adds ``{"kind":
    "timeout" | "memory" | "crashed", "message"}`` to the outcomes; never raises."""
    request = {"url": url, "content_type": content_type, "seen": list(seen), "emit": emit, "max_entries": max_entries}
    outcome = run_capped(__name__, request, body, what=f"parsing {url}", timeout_s=timeout_s,
                         memory_bytes=memory_bytes)
    if outcome.get("kind") == "timeout":
        outcome["message"] += " (a pathological document?)"
    return outcome


def _handle(request: dict[str, Any], body: bytes, _progress: Any) -> dict[str, Any]:
    return parse_feed(body, url=request["url"], content_type=request["content_type"], seen=request["seen"],
                      emit=request["emit"], max_entries=request["max_entries"])


def _failed(_request: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    return {"kind": "malformed", "message": f"malformed feed: {type(exc).__name__}: {str(exc)[:200]}"}


def main() -> int:
    """The child: a JSON request line then the body on stdin; one JSON line on stdout."""
    return child_main(_handle, _failed)
