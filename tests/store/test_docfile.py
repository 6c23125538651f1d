"""Hostile document files: every one ends in one ``ExchangeError`` line naming the file or the JSON
path, nothing is written, and export writes strict JSON only."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.errors import CoreError
from app.store.docfile import (
    MAX_DEPTH,
    ExchangeError,
    check_values,
    document_text,
    format_path,
    parse_document,
    read_document_file,
)
from app.store.exchange import export_session, import_session
from app.store.sqlite import SqliteStore
from tests.store.helpers import populate


@pytest.fixture
def exported(store: SqliteStore) -> dict[str, Any]:
    doc = export_session(store, populate(store).session_id)
    doc["session"]["session_id"] = "imported"
    return doc


@pytest.fixture
def target(tmp_path: Path) -> Iterator[SqliteStore]:
    """An empty store to import into."""
    s = SqliteStore(tmp_path / "target" / "pcm.sqlite3")
    yield s
    s.close()


def _error(call: Callable[[], object]) -> str:
    started = time.perf_counter()
    with pytest.raises(ExchangeError) as info:
        call()
    assert time.perf_counter() - started < 5
    message = str(info.value)
    assert isinstance(info.value, CoreError) and "\n" not in message and "Traceback" not in message
    assert info.value.__cause__ is None
    return message


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# Text edits of an exported document: (case, edit of the JSON text, the path and the reason named).
TEXT_CASES: list[tuple[str, Callable[[str], str], str]] = [
    ("10,000 levels in an unknown key", lambda t: t[:-1] + f', "x_deep": {_nested(10_000)}}}',
     "x_deep[0][0][0][0][0][0][0]…[0][0]: nested deeper than 64 levels"),
    ("300 levels in an unknown nested key", lambda t: t.replace('"summary": ', f'"x_deep": {_nested(300)}, "summary": ', 1),
     "session.x_deep[0][0][0][0][0][0]…[0][0]: nested deeper than 64 levels"),
    ("256 levels in a known record", lambda t: t.replace('"payload": {', f'"payload": {{"deep": {_nested(256)}, ', 1),
     "nested deeper than 64 levels"),
    ("a 5,000-digit integer", lambda t: t[:-1] + f', "x_big": {"9" * 5000}}}', "x_big: an integer of 5000 digits does not fit in 64 bits"),
    ("a 20-digit integer in a known field", lambda t: t.replace('"prompt_tokens": ', '"prompt_tokens": 99999999999999999999, "x": ', 1),
     "session.model_usage[0].prompt_tokens: an integer of 20 digits"),
    ("a lone surrogate in a message", lambda t: t.replace('"content": "', '"content": "\\ud800', 1),
     "session.messages[0].content: a lone surrogate \\ud800 at character 0 is not valid Unicode text"),
    ("a lone low surrogate in a key", lambda t: t[:-1] + ', "x_\\udfff": 1}', "a key: a lone surrogate \\udfff"),
    ("NaN", lambda t: t.replace('"latency_ms": ', '"latency_ms": NaN, "x": ', 1),
     "session.model_usage[0].latency_ms: NaN is not a JSON number; numbers must be finite"),
    ("Infinity", lambda t: t.replace('"latency_ms": ', '"latency_ms": Infinity, "x": ', 1),
     "session.model_usage[0].latency_ms: Infinity is not a JSON number"),
    ("-Infinity in an unknown key", lambda t: t[:-1] + ', "x_extra": {"v": [-Infinity]}}', "x_extra.v[0]: -Infinity is not a JSON number"),
    ("1e999", lambda t: t.replace('"latency_ms": ', '"latency_ms": 1e999, "x": ', 1),
     "session.model_usage[0].latency_ms: the number is infinite (out of range); numbers must be finite"),
    ("bad syntax", lambda t: t.replace('"messages": [', '"messages": [,', 1), "is not a JSON document (line 1 column"),
    ("empty", lambda _t: "", "is not a JSON document (line 1 column 1: Expecting value)"),
]


@pytest.mark.parametrize(("case", "edit", "expected"), TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_a_hostile_document_is_one_line_naming_the_path_and_nothing_is_written(
        tmp_path: Path, target: SqliteStore, exported: dict[str, Any], case: str, edit: Callable[[str], str],
        expected: str) -> None:
    text = json.dumps(exported, ensure_ascii=True)
    edited = edit(text)
    assert edited != text
    path = tmp_path / "hostile.json"
    path.write_text(edited, encoding="utf-8")
    message = _error(lambda: import_session(target, read_document_file(path)))
    assert message.startswith(str(path)) and expected in message, (case, message)
    assert target.list_sessions() == [] and target.count_rows("messages") == 0


def test_the_unedited_document_imports(tmp_path: Path, target: SqliteStore, exported: dict[str, Any]) -> None:
    path = tmp_path / "plain.json"
    path.write_text(document_text(exported), encoding="utf-8")
    assert import_session(target, read_document_file(path)) == "imported"


def test_raw_bytes_that_are_not_utf8_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "raw.json"
    path.write_bytes(b'{"a":\n "\xed\xa0\x80"}')  # a surrogate encoded as UTF-8 bytes
    assert "raw.json is not UTF-8 text (line 2, byte 8" in _error(lambda: read_document_file(path))


def test_a_byte_order_mark_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"a": 1}')
    assert read_document_file(path) == {"a": 1}


def test_files_that_are_not_documents_are_named(tmp_path: Path) -> None:
    folder = tmp_path / "folder.json"
    folder.mkdir()
    assert _error(lambda: read_document_file(folder)) == f"{folder} is a folder, not a JSON document; pick an exported .json file"
    assert _error(lambda: read_document_file(tmp_path / "gone.json")) == f"{tmp_path / 'gone.json'}: no such file"
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    assert "loop.json is a symbolic link loop" in _error(lambda: read_document_file(loop))
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # never waited on: no writer will come
    assert "pipe.json is not a regular file" in _error(lambda: read_document_file(fifo))
    assert "null is not a regular file" in _error(lambda: read_document_file("/dev/null"))


def test_an_unreadable_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.json"
    path.write_text("{}", encoding="utf-8")
    path.chmod(0)
    if os.geteuid() == 0:  # root reads it anyway: make the open fail as it would for a user
        real_open = os.open

        def denied(name: Any, *args: Any, **kwargs: Any) -> int:
            if Path(name) == path:
                raise PermissionError(13, "Permission denied", str(name))
            return real_open(name, *args, **kwargs)

        monkeypatch.setattr(os, "open", denied)
    message = _error(lambda: read_document_file(path, shown="secret.json"))
    assert message == "secret.json cannot be read (permission denied); check its permissions"


def test_the_depth_limit_is_exact() -> None:
    assert parse_document("[" * MAX_DEPTH + "]" * MAX_DEPTH)  # 64 containers: the deepest allowed
    assert "[0]…[0][0]: nested deeper than 64 levels" in _error(lambda: parse_document(_nested(MAX_DEPTH + 1)))
    for depth in (MAX_DEPTH + 1, 500, 990, 1_000, 5_000):  # under and over the parser's own recursion limit
        assert "nested deeper than 64 levels" in _error(lambda d=depth: parse_document(_nested(d)))


def test_the_path_of_a_deep_value_is_the_same_from_the_parser_and_the_scanner() -> None:
    doc = '{"a": [1, {"b,]\\"": 2, "c": %s}], "d": 3}'
    near = _error(lambda: parse_document(doc % _nested(100)))  # parsed, then walked
    far = _error(lambda: parse_document(doc % _nested(20_000)))  # too deep to parse: scanned
    assert near == far == 'the document: a[1].c[0][0][0][0][0]…[0][0]: nested deeper than 64 levels'


def test_check_values_accepts_ordinary_values() -> None:
    check_values({"a": [1, -2, 2**63 - 1, -(2**63), 1.5, True, None, "naïve ✓ 🙂", {"k": ""}]})
    with pytest.raises(ExchangeError, match=r"^b\[0\]: the integer does not fit in 64 bits$"):
        check_values({"b": [2**63]})


def test_format_path_shortens_only_long_paths() -> None:
    assert format_path(["session", "messages", 2, "role"]) == "session.messages[2].role"
    assert format_path([]) == "document"
    assert format_path(["a b", 0]) == '["a b"][0]'
    assert format_path(["x", *[0] * 20]) == "x[0][0][0][0][0][0][0]…[0][0]"


def test_export_writes_strict_json_and_refuses_non_finite_values(exported: dict[str, Any]) -> None:
    text = document_text(exported)
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} written")) == exported
    bad = json.loads(text)
    bad["session"]["model_usage"][0]["latency_ms"] = math.inf
    assert _error(lambda: document_text(bad)) == (
        "session.model_usage[0].latency_ms: the number is infinite (out of range); numbers must be finite")
    bad["session"]["model_usage"][0]["latency_ms"] = math.nan
    assert "NaN is not a JSON number" in _error(lambda: document_text(bad))
