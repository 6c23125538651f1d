"""``pcm attach FILE``: attach a local text file to a session, as the window's "Attach file…" does.

The file's text becomes evidence recalled like a watched file's (an env event, indexed), and an
artifact node "Attached: name vN" stands for it on the canvas; a question about a line deep in
the file gets that line with its selector. The same path attached again with changed text is the
next version; with the same text nothing is recorded and the line says so. The session is
``--session`` (an id, its first characters, or 'last'), else the last used one, else a new one.
A file that cannot be attached (missing, a folder, not text, empty, too large) is one plain line
with exit status 2, before any model loads when it is missing or a folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.core.errors import AttachError


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
        done = await engine.attach_file(state.session_id, path)
        if done.changed:
            print(f"attached {done.name} v{done.version} ({done.lines} lines, {done.size} bytes) to session "
                  f"{done.session_id}; evidence {done.evidence_id}")
        else:
            print(f"unchanged: {done.name} v{done.version} is already attached to session {done.session_id} "
                  "with this text")
        return 0

    return _with_engine(args, work, chat=False, counter="words")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("attach", help="attach a local text file to a session as evidence (a new version when it changed)")
    p.add_argument("file", metavar="FILE", help="a local text file (UTF-8, UTF-16 with a BOM, or HTML)")
    p.add_argument("--session", metavar="ID", help="the session to attach it to (an id, its first characters, or "
                   "'last'; default: the last used session)")
    p.add_argument("--new", action="store_true", help="attach it to a new session")
    p.set_defaults(func=cmd_attach)
