"""Query-aware compression: the lines or sentences a query needs, with exact selectors."""

from __future__ import annotations

import math

from app.core.context.compress import compress, units_of
from app.core.text.quoting import fence


def _count(text: str) -> int:
    return math.ceil(1.3 * len(text.split()))


def _file(n: int = 2000) -> str:
    rows = ["region,month,revenue,units"] + [f"north,m{i % 12},{1000 + i},{i}" for i in range(n - 1)]
    if n > 399:
        rows[399] = "south,apr,98765,42 record quarter for the Lisbon office"
    return "\n".join(rows)


def test_a_fact_on_line_400_of_a_long_file_reaches_the_context_with_its_selector() -> None:
    text = fence("tool read_file: sales.csv", _file())
    cut = compress(text, "What revenue did the Lisbon office make?", 120, _count)
    assert cut is not None and _count(cut.text) <= 120
    lines = text.split("\n")
    assert "Lisbon" in cut.text and "region,month,revenue,units" in cut.text  # the fact and the header
    spans = [tuple(int(x) for x in s.removeprefix("lines:").split("-")) for s in cut.selector.split(",")]
    fact_line = next(n for n, line in enumerate(lines, start=1) if "Lisbon" in line)
    assert fact_line == 402 and any(a <= fact_line <= b for a, b in spans)  # fence label and "<<<" come first
    assert (1, 4) in spans and spans[-1] == (len(lines), len(lines))  # label, fence and header; closing fence
    kept = {n for a, b in spans for n in range(a, b + 1)}
    omitted = {n for s in cut.omitted for a, b in [s.removeprefix("lines:").split("-")] for n in range(int(a), int(b) + 1)}
    assert kept | omitted == set(range(1, len(lines) + 1)) and not kept & omitted
    assert "[… lines 5-400 …]" in cut.text  # the gap is marked


def test_a_labelled_fence_keeps_its_header_opener_and_closer() -> None:
    """``fence`` folds the label onto the opener ("<<< sales.csv"): still a frame, always kept,
    so compressed outside text never enters a context unfenced."""
    text = fence("file attached", _file(), "sales.csv")
    cut = compress(text, "What revenue did the Lisbon office make?", 120, _count)
    assert cut is not None
    kept = cut.text.split("\n")
    assert kept[:2] == ["[file attached]", "<<< sales.csv"] and kept[-1] == ">>>"
    assert cut.selector.startswith("lines:1-") and cut.selector.endswith(f"lines:{len(text.splitlines())}-{len(text.splitlines())}")


def test_sentences_of_prose_and_char_selectors() -> None:
    prose = "Kyoto is lovely. " * 3 + "The Python error was a KeyError in the parser. " + "We saw temples. " * 20
    cut = compress(prose, "why the python error?", 40, _count)
    assert cut is not None and "KeyError" in cut.text
    start, end = (int(x) for x in cut.selector.split(",")[0].removeprefix("chars:").split("-"))
    assert "KeyError" in prose[start:end]


def test_nothing_relevant_keeps_the_beginning_and_short_text_is_left_alone() -> None:
    cut = compress(_file(50), "zebra migration", 30, _count)
    assert cut is not None and not cut.matched and cut.selector.startswith("lines:1-")
    assert compress("short text", "anything", 30, _count) is None
    assert units_of("one line")[0] == "chars"
