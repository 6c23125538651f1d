"""``pcm attach FILE`` over a real SQLite store and LanceDB index with the real embedder: the file
becomes evidence of the last used session, the same text again records nothing, changed text is
the next version, and a missing file or a folder is one line before any model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.store.sqlite import SqliteStore

pytestmark = pytest.mark.model  # the real embedder indexes the file's text


def test_attach_a_file_to_the_last_used_session_and_version_it(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    notes = tmp_path / "gate.txt"
    notes.write_text("\n".join(f"Entry {i}: shelf {i % 7} counted." for i in range(200))
                     + "\nThe spare key is in the blue toolbox.\n", encoding="utf-8")
    assert main([*data, "attach", str(notes), "--new"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("attached gate.txt v1 (201 lines,") and "evidence " in out
    session = out.split("to session ")[1].split(";")[0]

    assert main([*data, "attach", str(notes)]) == 0  # the last used session; the same text
    assert capsys.readouterr().out.startswith(f"unchanged: gate.txt v1 is already attached to session {session}")
    notes.write_text(notes.read_text(encoding="utf-8") + "The gate code changed to 4711.\n", encoding="utf-8")
    assert main([*data, "attach", str(notes), "--session", session[:8]]) == 0
    assert capsys.readouterr().out.startswith("attached gate.txt v2 (202 lines,")

    store = SqliteStore(tmp_path / "data" / "pcm.sqlite3")
    try:
        texts = [e.content for e in store.list_env_events(session)]
    finally:
        store.close()
    assert len(texts) == 2 and "4711" in texts[1] and "blue toolbox" in texts[0]

    assert main([*data, "attach", str(tmp_path / "nope.txt")]) == 2
    assert "nope.txt: no such file" in capsys.readouterr().err
    assert main([*data, "attach", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_attach_a_pdf_with_progress_and_refuse_a_scan_in_one_line(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from tests.sensors.pdfs import scanned_pdf, text_pdf

    data = ["--data-dir", str(tmp_path / "data")]
    report = tmp_path / "report.pdf"
    report.write_bytes(text_pdf([f"Page {n}: the budget line {n} is {n * 100} euros. " * 6 for n in range(1, 21)]))
    assert main([*data, "attach", str(report), "--new"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("attached report.pdf v1 (20 parts of 20 pages,")
    assert "reading report.pdf: 20/20 pages" in captured.err and "indexing: 20/20 parts" in captured.err
    scan = tmp_path / "scan.pdf"
    scan.write_bytes(scanned_pdf())
    assert main([*data, "attach", str(scan)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "pcm: error: scan.pdf has no text layer (a scan?); OCR is not supported"
