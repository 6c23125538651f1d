"""Names that can always be stored: ``safe_text`` writes out the lone surrogates of a name that
was not valid UTF-8, ``lossless_hex`` keeps its exact code points. Pure and deterministic."""

from __future__ import annotations

import re

_SURROGATES = re.compile("[\ud800-\udfff]")


def safe_text(text: str) -> str:
    """``text`` with lone surrogates written out: a byte of a name that was not UTF-8 (decoded
    with surrogateescape, U+DC80–U+DCFF) as ``\\xNN``, any other as ``\\uXXXX``; everything
    else unchanged. The result can always be encoded as UTF-8 (stored, indexed, embedded)."""
    if not _SURROGATES.search(text):
        return text

    def escape(m: re.Match[str]) -> str:
        code = ord(m.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"

    return _SURROGATES.sub(escape, text)


def lossless_hex(text: str) -> str | None:
    """The exact code points of ``text`` as hex (``utf-8`` with ``surrogatepass``) when
    ``safe_text`` would change it, else None; :func:`from_lossless_hex` gives ``text`` back, and
    ``os.fsencode`` of that gives a file name's original bytes."""
    return text.encode("utf-8", "surrogatepass").hex() if _SURROGATES.search(text) else None


def from_lossless_hex(value: str) -> str:
    """The string :func:`lossless_hex` wrote."""
    return bytes.fromhex(value).decode("utf-8", "surrogatepass")

