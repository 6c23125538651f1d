"""A capped child process for parsing outside content: the feed parser and the document readers.

Parsers of outside formats (feedparser, pypdf, python-docx, openpyxl) have no time bound of their
own and can be made to eat memory or recurse without end by a crafted file. So the parent hands the
bytes to a child Python process (:func:`run_capped`) that imports the very code of the parent (its
folder goes first on ``PYTHONPATH``), caps its own address space and arms an alarm, runs one
handler and writes JSON lines on stdout: ``{"progress": ...}`` lines while it works, then one
outcome object. The parent kills it when it runs past its time cap or when the caller cancels, and
turns every way it can end into one outcome with a one-line ``message``: ``timeout``, ``memory``,
``crashed``, ``cancelled``, or what the handler returned. It never raises.

The child side is :func:`child_main` with a handler ``(request, body, progress) -> dict``; its
module needs a ``main()`` that calls it (``python -P -c "from MODULE import main; main()"``).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from app.frozen import child_options, python_command

_APP_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the ``app`` package
_POLL_S = 0.05

Progress = Callable[[dict[str, Any]], None]
Handler = Callable[[dict[str, Any], bytes, Callable[..., None]], dict[str, Any]]


def _feed(stdin: Any, data: bytes) -> None:
    """Write ``data`` to the child's stdin and close it (in a thread: the pipe may fill)."""
    try:
        stdin.write(data)
        stdin.close()
    except OSError:  # the child died or was killed: the outcome says why
        pass


def _lines(stream: Any, out: queue.Queue[bytes | None]) -> None:
    for line in iter(stream.readline, b""):
        out.put(line)
    out.put(None)


class _Run:
    """One child process: its stdin fed and stdout read by two threads, its end awaited."""

    def __init__(self, module: str, request: Mapping[str, Any], body: bytes) -> None:
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(_APP_ROOT), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen(
            python_command("-P", "-c", f"import sys; from {module} import main; sys.exit(main())"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, **child_options())
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.err = b""
        self._threads = [
            threading.Thread(target=_feed, args=(self.proc.stdin, json.dumps(request).encode("ascii") + b"\n" + body),
                             daemon=True),
            threading.Thread(target=_lines, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _stderr(self) -> None:
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()[-4000:]

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.finish()

    def finish(self) -> None:
        self.proc.wait()
        for t in self._threads:
            t.join(timeout=2.0)


def run_capped(module: str, request: Mapping[str, Any], body: bytes = b"", *, what: str, timeout_s: float,
               memory_bytes: int, on_progress: Progress | None = None,
               cancelled: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Run ``module``'s handler on ``request`` and ``body`` in a child process killed after
    ``timeout_s`` seconds (or as soon as ``cancelled()`` is true), its address space capped at
    ``memory_bytes``; ``on_progress`` gets each progress object the child sends. Returns the
    handler's outcome, or ``{"kind": "timeout" | "memory" | "crashed" | "cancelled", "message"}``
    where ``message`` names ``what`` ("parsing http://x/feed", "reading report.pdf")."""
    full = {**request, "what": what, "memory_bytes": memory_bytes, "alarm_s": int(timeout_s) + 2}
    try:
        run = _Run(module, full, body)
    except OSError as exc:
        return {"kind": "crashed", "message": f"could not start a process for {what} ({exc})"}
    deadline = time.monotonic() + timeout_s
    outcome: dict[str, Any] | None = None
    while True:
        if cancelled is not None and cancelled():
            run.kill()
            return {"kind": "cancelled", "message": f"{what} was cancelled"}
        left = deadline - time.monotonic()
        if left <= 0:
            run.kill()
            return {"kind": "timeout", "message": f"{what} took longer than {timeout_s:g} s; stopped"}
        try:
            line = run.lines.get(timeout=min(_POLL_S, left))
        except queue.Empty:
            continue
        if line is None:
            break
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and "progress" in message and len(message) == 1:
            if on_progress is not None:
                on_progress(message["progress"])
        elif isinstance(message, dict):
            outcome = message
    run.finish()
    return outcome if outcome is not None else _ended(run, what, memory_bytes)


def _ended(run: _Run, what: str, memory_bytes: int) -> dict[str, Any]:
    """The outcome of a child that ended without sending one."""
    tail = " ".join(run.err.decode("utf-8", "replace").split())[-200:]
    if tail.endswith("MemoryError"):  # out of memory even while reporting it: the cap was the cause
        return {"kind": "memory", "message": f"{what} needed more than {memory_bytes >> 20} MB; stopped"}
    return {"kind": "crashed", "message": f"the process {what} ended with status {run.proc.returncode}"
                                          + (f" ({tail})" if tail else "")}


# --------------------------------------------------------------------------- the child side


def _limit_memory(limit: int) -> None:
    try:
        import resource
    except ImportError:  # Windows: the time cap still applies
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass


def _alarm(seconds: int) -> None:
    """SIGALRM at its default action: the kernel ends this process a little after the parent's
    cap even inside C code, should the parent be gone before it could kill it. POSIX only."""
    import signal

    if seconds > 0 and hasattr(signal, "alarm"):
        signal.alarm(seconds)


def peak_mb(field: str = "VmPeak") -> int:
    """This process's peak address space in MB (``VmPeak``: what the memory cap limits; ``VmHWM``:
    its peak resident memory); 0 where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) >> 10
    except (OSError, ValueError):
        pass
    return 0


def _send(obj: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def child_main(handler: Handler, failed: Callable[[dict[str, Any], BaseException], dict[str, Any]]) -> int:
    """The child: a JSON request line then the body on stdin; progress lines and one outcome line
    on stdout. ``failed(request, exc)`` turns an exception of the handler into its outcome (a
    ``MemoryError`` is always ``{"kind": "memory"}``)."""
    data = sys.stdin.buffer.read()
    head, _, body = data.partition(b"\n")
    request = json.loads(head)
    _limit_memory(int(request["memory_bytes"]))
    _alarm(int(request.get("alarm_s", 0)))
    # Made before the handler runs: once memory has run out, even this string may not be made.
    memory = {"kind": "memory", "message": f"{request['what']} needed more than "
                                           f"{int(request['memory_bytes']) >> 20} MB; stopped"}
    out_of_memory = False
    try:
        outcome = handler(request, body, lambda **values: _send({"progress": values}))
    except MemoryError:  # nothing allocated here: the handler's frames (and what they hold) go at its end
        out_of_memory = True
    except Exception as exc:  # noqa: BLE001 - reported as the input's error
        outcome = failed(request, exc)
    if out_of_memory:
        outcome = memory
    outcome["peak_mb"] = peak_mb()
    outcome["peak_rss_mb"] = peak_mb("VmHWM")
    _send(outcome)
    return 0
