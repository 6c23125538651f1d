"""Names that can always be stored (app/core/text/names.py): ``safe_text`` for names that are not
valid UTF-8, and their exact code points kept as ``lossless_hex``."""

from __future__ import annotations

import os

from app.core.text.names import from_lossless_hex, lossless_hex, safe_text
from app.core.text.quoting import neutralise


def test_names_that_are_not_utf8_are_kept_losslessly() -> None:
    raw = b"caf\xe9-\xff\xfe.txt"
    name = os.fsdecode(raw)  # surrogateescape, as watchdog and os.listdir give it
    shown = safe_text(name)
    assert shown == "caf\\xe9-\\xff\\xfe.txt" and shown.encode("utf-8")
    hexed = lossless_hex(name)
    assert hexed is not None and os.fsencode(from_lossless_hex(hexed)) == raw
    assert lossless_hex("plain.txt") is None and safe_text("plain.txt") == "plain.txt"
    assert safe_text("a\ud800b") == "a\\ud800b"  # a lone surrogate from JSON or a feed
    assert neutralise(name) == shown
