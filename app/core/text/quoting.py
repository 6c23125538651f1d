"""The one way outside text (files, feeds, API values, tool results, their labels) enters a
prompt: :func:`fence`, with :func:`neutralise` / :func:`quote_label` making the quotation
unforgeable, and :func:`history_text` keeping an answer that copied outside text from turning it
into plain history. Pure and deterministic: replay stays exact.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable

from app.core.text.names import safe_text

# --------------------------------------------------------------------------- outside text
#
# Outside text (a file's text and path, a feed item's title and body, an API value, a tool's
# result and label) reaches a prompt only as ``fence(header, content, label)``:
#
#     [file modified]            ← the header: the app's own words (kind, change, tool name)
#     <<< notes/plan.md          ← the opener, with the label folded onto it
#     …the content…
#     >>>                        ← the closer, always a line of its own
#
# The quotation cannot be forged from inside: ``neutralise`` turns every run of three or more
# angle brackets, look-alikes included (＞＞＞, ﹤﹤﹤, ‹‹‹, »>, ⋙; spaces, zero-width, bidi and
# combining characters between them are ignored), into ``&gt;``/``&lt;`` entities, so no line of
# outside text can read as an opener or a closer; line breaks of every kind become ``\n``,
# other control characters become visible ``\xNN`` escapes and invisible format characters are
# removed. ``quote_label`` does the same and folds the label onto one line.

FENCE_OPEN, FENCE_CLOSE = "<<<", ">>>"
LABEL_CHARS = 200  # a label is cut to this many characters
QUOTED_HEADER = "outside text quoted in this answer"

# Characters that read as an angle bracket: the ASCII ones, those NFKC maps to them (fullwidth,
# small) and the look-alikes (quotation marks, brackets, math relations); value: (direction,
# how many brackets it looks like).
_ANGLES: dict[str, tuple[str, int]] = {
    **{c: ("<", 1) for c in "<\ufe64\uff1c\u2039\u2329\u3008\u27e8\u276e\u276c\u2770\u02c2\u1438\u22d6\u227a\u29fc"},
    **{c: (">", 1) for c in ">\ufe65\uff1e\u203a\u232a\u3009\u27e9\u276f\u276d\u2771\u02c3\u1433\u22d7\u227b\u29fd"},
    **{c: ("<", 2) for c in "\u00ab\u300a\u27ea\u226a"},
    **{c: (">", 2) for c in "\u00bb\u300b\u27eb\u226b"},
    "\u22d8": ("<", 3), "\u22d9": (">", 3),
}
# Characters that may sit between the brackets of a run and still not separate them: spaces,
# zero-width and bidi controls, fillers, combining marks and variation selectors, tag characters.
_SEP = ("\t \u00a0\u00ad\u034f\u061c\u115f\u1160\u1680\u180e\u2000-\u200f\u202a-\u202f\u205f-\u206f"
        "\u2800\u3000\u3164\ufeff\uffa0\u0300-\u036f\u20d0-\u20ff\ufe00-\ufe0f\U000e0000-\U000e007f")
_SEP_RE = re.compile(f"[{_SEP}]")
_ANGLE_CLASS = "".join(re.escape(c) for c in _ANGLES)
_RUN = re.compile(f"[{_ANGLE_CLASS}](?:[{_SEP}]*[{_ANGLE_CLASS}])*")
_ANGLE = re.compile(f"[{_ANGLE_CLASS}]")  # whether a text holds any: a scan in C, not a loop over characters
_VISIBLE_SPACE = frozenset("\t \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000")
# Invisible format characters removed from outside text (zero-width joiner/non-joiner stay:
# emoji and several scripts need them; inside a bracket run they are dropped with the run's gaps).
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064"
                        "\u2066-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
                        "\U000e0001\U000e0020-\U000e007f]")
_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]")


def _escape_run(match: re.Match[str]) -> str:
    run = match.group()
    if sum(_ANGLES[c][1] for c in run if c in _ANGLES) < 3:
        return run
    out = []
    for ch in run:
        angle = _ANGLES.get(ch)
        if angle is not None:
            out.append(("&lt;" if angle[0] == "<" else "&gt;") * angle[1])
        elif ch in _VISIBLE_SPACE:
            out.append(" ")
    return "".join(out)


def neutralise(text: str) -> str:
    """Outside text made safe to quote: lone surrogates escaped (``safe_text``), every line break
    a ``\\n``, other control characters visible as ``\\xNN``, runs of three or more angle brackets
    or look-alikes (whatever invisible or space characters sit between them) written as
    ``&lt;``/``&gt;``, invisible format characters removed. Idempotent."""
    text = _BREAKS.sub("\n", safe_text(text))
    text = _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if _ANGLE.search(text):
        text = _RUN.sub(_escape_run, text)
    return _INVISIBLE.sub("", text)


def quote_label(text: str, max_chars: int = LABEL_CHARS) -> str:
    """A label of outside text (a title, a path, a URL) on one line: ``neutralise``d, every run
    of white space (line breaks included) one space, cut to ``max_chars``."""
    label = " ".join(neutralise(text).split())
    return label if len(label) <= max_chars else label[: max_chars - 1].rstrip() + "…"


def fence(header: str, content: str, label: str = "") -> str:
    """Outside text as a quotation: ``[header]``, then ``<<<`` (with the label folded onto it),
    the ``neutralise``d content, and ``>>>`` on a line of its own.

    ``header`` is the app's own words (e.g. "file modified", "tool read_file"); it is folded and
    stripped of brackets all the same. Nothing in ``label`` or ``content`` can close the
    quotation early or open another one.
    """
    head = quote_label(header, 80).replace("[", "(").replace("]", ")")
    opener = FENCE_OPEN + (f" {quote_label(label)}" if label.strip() else "")
    return f"[{head}]\n{opener}\n{neutralise(content).strip(chr(10))}\n{FENCE_CLOSE}"


_FENCED = re.compile(r"\[[^\[\]\n]*\]\n" + FENCE_OPEN + r"(?: ([^\n]*))?\n(.*?)\n" + FENCE_CLOSE + r"(?=\n|$)", re.S)


def unfence(text: str) -> str:
    """Every quotation ``fence`` made in ``text`` spliced in plainly: no header, no markers, the
    label (when there was one) on the line before the content. Only an evaluation's ablation of
    evidence boundaries (``Ablation.FENCES``) uses it; the app never does."""
    return _FENCED.sub(lambda m: f"{m.group(1)}\n{m.group(2)}" if m.group(1) else m.group(2), text)


# --------------------------------------------------------------------------- answers as history

_MARKER_PREFIX = re.compile(r"^(?:\[\d+\])?(<<<|>>>)")
# A line that speaks to the model as if it were an instruction: a role tag, a chat-template
# token, "ignore the previous instructions" and the like.
_INSTRUCTION = re.compile(
    r"^\W{0,3}(?:system|developer)\b"
    r"|^\W{0,3}(?:assistant|user|human|instructions?)(?:\s+(?:prompt|message|note|override))?\s*[:\]>|]"
    r"|\b(?:ignore|disregard|forget|override)\b.{0,40}\b(?:previous|prior|above|earlier|system|instructions?|rules)\b"
    r"|<\|[a-z_]+\|>|\[/?(?:inst|sys)\]|<</?sys>>|^#{2,}\s*(?:system|instruction|response)\b",
    re.IGNORECASE,
)
_MIN_MATCH_CHARS = 12  # shorter lines ("ok", "- item") are not matched against outside text


def _skeleton(line: str) -> str:
    """The line as its brackets read: look-alikes as ``<``/``>``, spaces and invisibles gone."""
    out = []
    for ch in unicodedata.normalize("NFKC", line):
        angle = _ANGLES.get(ch)
        if angle is not None:
            out.append(angle[0] * angle[1])
        elif not (ch.isspace() or _SEP_RE.match(ch)):
            out.append(ch)
    return "".join(out)


_EDGES = " \t-*•>#|\"'`“”‘’«»()[]:;,.!?"


def match_key(line: str) -> str:
    """How a line is compared with outside text: neutralised, NFKC, case-folded, spaces folded,
    list bullets, quote marks and end punctuation stripped."""
    return _folded(line).strip(_EDGES)


def _folded(line: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", neutralise(line)).casefold().split())


def _copies(key: str, outside: Collection[str]) -> bool:
    """Whether a line (its ``match_key``) repeats a line of outside text: the whole line, or what
    follows a lead-in such as "The file says: …"."""
    if key in outside:
        return True
    _, sep, rest = key.partition(": ")
    return bool(sep) and rest.strip(_EDGES) in outside


def fenced_lines(text: str) -> list[str]:
    """The ``match_key`` of every line of outside text in ``text``'s fences (labels included),
    leaving out lines too short to tell anything apart; for :func:`history_text`."""
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        if not inside and line.startswith(FENCE_OPEN):
            inside, line = True, line[len(FENCE_OPEN):]
        elif inside and line == FENCE_CLOSE:
            inside = False
            continue
        elif not inside:
            continue
        key = match_key(line)
        if len(key) >= _MIN_MATCH_CHARS:
            out.append(key)
    return out


def history_text(text: str, outside: Collection[str] = ()) -> str:
    """An assistant's answer as it enters a later context as conversation.

    The answer is the model's words, but it may have copied outside text. Quoted again, under
    ``[outside text quoted in this answer]``, are: the lines from a fence marker (or a look-alike,
    either way round) to the next one; lines that repeat a line of outside text the session holds
    (``outside``: ``fenced_lines`` keys; the whole line, or what follows a lead-in like "The file
    says:"; case, spacing, bullets and quote marks aside); and lines that address the model as an
    instruction (``SYSTEM`` at the start, a role tag such as ``user:``, a chat-template token,
    "ignore the previous instructions"). Every other line is ``neutralise``d, so no marker copied
    into the answer can open or close a fence. Pure: the same answer and ``outside`` give the
    same text, so replay stays exact.
    """
    out: list[str] = []
    quoted: list[str] = []
    inside = False

    def flush() -> None:
        if quoted:
            out.append(fence(QUOTED_HEADER, "\n".join(quoted)))
            quoted.clear()

    for line in _BREAKS.sub("\n", safe_text(text)).split("\n"):
        marker = _MARKER_PREFIX.match(_skeleton(line)) if _ANGLE.search(line) else None
        key = "" if inside or marker is not None else match_key(line)
        if marker is not None or inside:  # a marker either way round starts or ends a quotation
            quoted.append(line)
            inside = marker is None if inside else True
        elif _copies(key, outside) or _INSTRUCTION.search(_folded(line)):
            quoted.append(line)
        else:
            flush()
            out.append(neutralise(line))
    flush()
    return "\n".join(out)


def outside_keys(texts: Iterable[str]) -> set[str]:
    """The ``fenced_lines`` keys of several fenced texts (an ``outside`` for ``history_text``)."""
    keys: set[str] = set()
    for text in texts:
        keys.update(fenced_lines(text))
    return keys
