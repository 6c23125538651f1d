"""Running from a PyInstaller bundle (``packaging/pcm_canvas.spec``): where the app's files are,
and how a child process runs Python code when there is no ``python`` to start.

The app starts short-lived Python children (the chat-template worker, the GGUF probe, the feed
parser) as ``sys.executable -P -c CODE``. In a bundle ``sys.executable`` is ``pcm-canvas`` or
``pcm``, which cannot run Python code by itself; ``python_command`` then names the bundle's
console executable (``pcm``: on Windows the windowed ``pcm-canvas.exe`` may have no standard
streams to pipe) with ``CHILD_FLAG`` first, and both frozen entry points
(``packaging/launch_*.py``) hand such a command line to ``run_child`` before anything else is
imported; ``child_options`` keeps that console child's window hidden on Windows. ``run_child`` reads the usual
interpreter options (``-P``, ``-I``, ``-u``, ``-c CODE``, ``-m MODULE``, ``FILE``) and runs the
code as ``python`` would, with the bundle's modules.

Standard library only: the frozen entry points import this module first.
"""

from __future__ import annotations

import runpy
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CHILD_FLAG = "--pcm-python"
CLI_NAME = "pcm"  # the bundle's console executable (packaging/bundle.ini: cli)
_IGNORED_OPTIONS = {"-P", "-I", "-E", "-s", "-S", "-u", "-B", "-O", "-OO", "-q"}


def is_frozen() -> bool:
    """True in a PyInstaller bundle (``sys.frozen`` is set by its bootloader)."""
    return bool(getattr(sys, "frozen", False))


def app_root() -> Path:
    """The folder that holds the ``app`` package, ``resources/`` and ``models/``: the bundle's
    contents folder (``sys._MEIPASS``, ``_internal/`` next to the executable) when frozen, else
    the repository root."""
    bundled = getattr(sys, "_MEIPASS", None)
    if is_frozen() and bundled:
        return Path(bundled)
    if is_frozen():  # a bootloader that sets no _MEIPASS: the files sit next to the executable
        return Path(sys.executable).resolve().parent
    return Path(__file__).resolve().parent.parent


def python_command(*args: str) -> list[str]:
    """A command line that runs ``python *args`` (e.g. ``"-P", "-c", CODE, ...``): this
    interpreter in a source checkout, this executable with ``CHILD_FLAG`` in a bundle."""
    if not is_frozen():
        return [sys.executable, *args]
    exe = Path(sys.executable)
    cli = exe.with_name(CLI_NAME + exe.suffix)
    return [str(cli if cli.is_file() else exe), CHILD_FLAG, *args]


def child_options() -> dict[str, Any]:
    """Extra ``subprocess`` arguments for ``python_command``'s process: in a Windows bundle the
    console executable's window is not shown."""
    if is_frozen() and sys.platform == "win32":
        return {"creationflags": getattr(subprocess, "CREATE_NO_WINDOW", 0)}
    return {}


def run_child(argv: Sequence[str]) -> int:
    """Run ``argv`` (what follows ``CHILD_FLAG``) as ``python argv`` would; the exit status.

    Options that change only the interpreter's start (``-P``, ``-I``, ``-u`` ...) are accepted
    and ignored: a bundle never puts the working folder on ``sys.path`` and its streams are
    flushed by the code that uses them. ``SystemExit`` ends the child with its code."""
    args = list(argv)
    while args and args[0] in _IGNORED_OPTIONS:
        args.pop(0)
    if not args:
        print(f"{CHILD_FLAG}: nothing to run (expected -c CODE, -m MODULE or FILE)", file=sys.stderr)
        return 2
    try:
        if args[0] == "-c" and len(args) >= 2:
            sys.argv = ["-c", *args[2:]]
            code = compile(args[1], "<string>", "exec")
            exec(code, {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: S102 - as python -c
        elif args[0] == "-m" and len(args) >= 2:
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        elif not args[0].startswith("-"):
            sys.argv = list(args)
            runpy.run_path(args[0], run_name="__main__")
        else:
            print(f"{CHILD_FLAG}: unsupported option {args[0]}", file=sys.stderr)
            return 2
    except SystemExit as done:
        return _exit_status(done.code)
    return 0


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def child_mode_or_none(argv: Sequence[str] | None = None) -> int | None:
    """For the frozen entry points: when the command line starts with ``CHILD_FLAG``, run the
    child and return its exit status; else None (start the app as usual)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != CHILD_FLAG:
        return None
    status = run_child(args[1:])
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    return status
