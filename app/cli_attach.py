"""``pcm attach FILE``: attach a local text file to a session, as the window's "Attach file…" does.

The file's text becomes evidence recalled like a watched file's (an env event, indexed), and an
artifact node "Attached: name vN" stands for it on the canvas; a question about a line deep in
the file gets that line with its selector. The same path attached again with changed text is the
next version; with the same text nothing is recorded and the line says so. The session is
``--session`` (an id, its first characters, or 'last'), else the last used one, else a new one.
A file that cannot be attached (missing, a folder, not text, empty, too large) is one plain line
with exit status 2, before any model loads when it is missing or a folder.

A document — PDF, Word (.docx), OpenDocument text (.odt), Excel (.xlsx), CSV, Markdown, HTML,
source code — is read into parts cited by page, section, sheet range or lines. A large one shows
its progress on stderr ("reading report.pdf: 120/300 pages", then "indexing: 300/612 parts");
Ctrl+C cancels it and records nothing (exit status 2, one line). An encrypted PDF, a scan
without a text layer, a zip bomb or a file past the reader's time or memory cap is one line too.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

from app.core.errors import AttachError
from app.core.ports import CancelToken


class ProgressLine:
    """Progress on stderr: one line rewritten in place on a terminal, else a line per tenth."""

    def __init__(self, name: str, stream: Any = None) -> None:
        self.name, self.stream = name, stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown: tuple[str, int] = ("", -1)
        self.last = 0.0

    def __call__(self, progress: dict[str, Any]) -> None:
        stage, done, total = str(progress.get("stage", "")), int(progress.get("done", 0)), int(progress.get("total", 0))
        what = f"reading {self.name}" if stage == "reading" else "indexing"
        line = f"{what}: {done}/{total} {progress.get('unit', '')}".rstrip()
        tenth = done * 10 // max(1, total)
        if self.tty:
            if time.monotonic() - self.last >= 0.1 or done == total:
                self.last = time.monotonic()
                self.stream.write("\r\x1b[K" + line + ("\n" if done == total else ""))
                self.stream.flush()
        elif (stage, tenth) != self.shown:
            self.shown = (stage, tenth)
            self.stream.write(line + "\n")
            self.stream.flush()


def cmd_attach(args: argparse.Namespace) -> int:
    """Attach ``args.file`` to the session ``ask`` would continue (module doc)."""
    from app.cli_pipeline import _session_to_continue, _with_engine

    path = Path(args.file).expanduser()
    if not path.exists():
        raise AttachError(f"{args.file}: no such file")
    if path.is_dir():
        raise AttachError(f"{args.file} is a folder: attach a file (watch a folder from the window)")
    session_id = _session_to_continue(args)

    async def work(engine: Any) -> int:
        state = await engine.open_session(session_id, title=f"Attached {path.name}"[:40])
        cancel = CancelToken()
        loop = asyncio.get_running_loop()
        try:  # Ctrl+C cancels the reading or indexing; nothing is recorded
            loop.add_signal_handler(signal.SIGINT, cancel.cancel)
        except (NotImplementedError, RuntimeError):  # not on this platform's loop: Ctrl+C interrupts
            pass
        try:
            done = await engine.attach_file(state.session_id, path, on_progress=ProgressLine(path.name), cancel=cancel)
        finally:
            try:
                loop.remove_signal_handler(signal.SIGINT)
            except (NotImplementedError, RuntimeError):
                pass
        if done.changed:
            size = (f"{done.parts} parts" + (f" of {done.pages} pages" if done.pages else "")) if done.parts \
                else f"{done.lines} lines"
            print(f"attached {done.name} v{done.version} ({size}, {done.size} bytes) to session "
                  f"{done.session_id}; evidence {done.evidence_id}")
        else:
            print(f"unchanged: {done.name} v{done.version} is already attached to session {done.session_id} "
                  "with this text")
        return 0

    return _with_engine(args, work, chat=False, counter="words")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("attach", help="attach a local file or document to a session as evidence (a new version when "
                       "it changed); Ctrl+C cancels a long one")
    p.add_argument("file", metavar="FILE", help="a text file (UTF-8, UTF-16 with a BOM) or a document: PDF, .docx, "
                   ".odt, .xlsx, CSV, Markdown, HTML, source code")
    p.add_argument("--session", metavar="ID", help="the session to attach it to (an id, its first characters, or "
                   "'last'; default: the last used session)")
    p.add_argument("--new", action="store_true", help="attach it to a new session")
    p.set_defaults(func=cmd_attach)
