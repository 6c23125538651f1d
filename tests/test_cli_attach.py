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
