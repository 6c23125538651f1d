"""The folder sensor: watchdog on chosen folders → file changes; text read later, once per event.

Threads: watchdog's observer thread calls :class:`_FolderHandler.dispatch`, which only maps the
event to a :class:`RawChange` and calls the sink (no stat, no read). A file's text is read after
coalescing, on the intake's executor, by :func:`prepare_file_change` (the composition root passes
:func:`make_preparer` to ``EnvIntake(prepare=...)``): one read per event instead of one per raw
change, and only after the file has settled for the coalescing window. Every read goes through
the confined opener (:mod:`app.sensors.confined`): a symlink out of the watched folder becomes
an event that says "refused: link out of the watched folder" and carries none of the target's
text; a file with hard links is read and flagged (``payload["hard_links"]``).

A PDF, Word, OpenDocument or Excel file is read into parts by the document readers instead
(:mod:`app.sensors.documents.watched`, ``payload["document"]``); Markdown, code and HTML stay plain
text here: a burst of saves to code files must not start a reading process each.

Names that are not valid UTF-8 reach the sensor as ``os.fsdecode`` strings (surrogateescape) and
are kept that way until the intake turns the change into an event (``to_event``), which writes
them out display-safe and keeps the exact name in the payload (``raw_uri``).

Lost events: when the kernel's inotify queue overflows, watchdog (7.x) rebuilds its watches but
tells no handler. :class:`_OverflowAwareEmitter` wraps that path and queues a
:class:`QueueOverflowEvent`, which the handler turns into one rescan request for its folder; so
does a ``False`` from the sink (the intake dropped a change). The rescan thread diffs a fresh
snapshot against the folder's baseline and sends a change for each difference, then a ``rescan``
marker. Baselines are taken at start and re-taken when a folder has been quiet for
``refresh_quiet_s`` after activity, so a rescan reports what was lost recently, not everything
since start (a difference that was already reported may be reported again; nothing is missed).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from app.core.runtime.intake import RawChange
from app.sensors.base import Sink, SourceStatus, StatusBoard
from app.sensors.confined import REASONS, Missing, Refused, as_text, decode, open_in_folder, read_fd
from app.sensors.documents import document_format, is_binary_format
from app.sensors.documents.watched import WatchedDocument, read_watched_document
from app.sensors.scan import Snapshot, diff_snapshots, ignore_matcher, relative, scan_folder

log = logging.getLogger(__name__)

_MAX_DROPPED_RESCANS = 3


# --------------------------------------------------------------------------- reading text


@dataclass(frozen=True)
class FilePreview:
    """A file's text, or why it was not read. ``skipped``: missing | not_a_file | too_large |
    binary | undecodable | unreadable, or a refusal of the confined opener (link_out | outside |
    loop | changed) with ``message`` saying it for the user ("refused: link out of the watched
    folder"); ``text`` is None whenever ``skipped`` is set. ``links`` > 1: the file has other
    names (hard links), which may be outside the folder; ``hidden_removed``: hidden HTML
    elements left out of an HTML file's text."""

    path: str
    size: int | None
    mtime: str | None
    text: str | None
    skipped: str | None = None
    encoding: str = ""
    message: str = ""
    links: int = 1
    hidden_removed: int = 0


def _iso(ts_ns: int) -> str:
    return datetime.fromtimestamp(ts_ns / 1e9, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _refused(p: str, exc: Refused) -> FilePreview:
    try:
        st = os.lstat(p)  # the link itself, never its target
        size, mtime = st.st_size, _iso(st.st_mtime_ns)
    except OSError:
        size, mtime = None, None
    return FilePreview(p, size, mtime, None, exc.reason, message=REASONS[exc.reason])


def read_text_preview(path: str | os.PathLike[str], max_bytes: int, *,
                      root: str | os.PathLike[str] | None = None) -> FilePreview:
    """Read ``path`` as text if it is a regular file inside ``root`` (its watched folder; by
    default the folder it is in) of at most ``max_bytes`` that decodes as UTF-8 (or UTF-16 with
    a BOM) and has no NUL bytes; otherwise record size and mtime only. The file is opened by the
    confined opener (:func:`app.sensors.confined.open_in_folder`): a symlink out of the folder
    is refused, never read. An HTML file gives its visible text. Blocking: run it on an
    executor. Never reads more than ``max_bytes + 1`` bytes."""
    p = os.path.abspath(os.fspath(path))
    base = os.path.abspath(os.fspath(root)) if root is not None else os.path.dirname(p)
    try:
        opened = open_in_folder(base, relative(p, base))
    except Missing:
        return FilePreview(p, None, None, None, "missing")
    except Refused as exc:
        return _refused(p, exc)
    except OSError:
        return FilePreview(p, None, None, None, "unreadable")
    try:
        size, mtime = opened.st.st_size, _iso(opened.st.st_mtime_ns)
        if size > max_bytes:
            return FilePreview(p, size, mtime, None, "too_large", links=opened.links)
        data = read_fd(opened.fd, max_bytes + 1)
    except OSError:
        return FilePreview(p, None, None, None, "unreadable")
    finally:
        os.close(opened.fd)
    if len(data) > max_bytes:  # grew after the stat
        return FilePreview(p, len(data), mtime, None, "too_large", links=opened.links)
    text, encoding, why = decode(data)
    if text is None:
        return FilePreview(p, len(data), mtime, None, why, links=opened.links)
    text, hidden = as_text(opened.rel, text)
    return FilePreview(p, len(data), mtime, text, encoding=encoding, links=opened.links, hidden_removed=hidden or 0)


def prepare_file_change(change: RawChange, max_bytes: int) -> RawChange:
    """The change with the file's text as ``content`` (or, when not read, ``payload["skipped"]``
    saying why, and ``payload["message"]`` for a refusal) and ``size``/``mtime`` in the payload;
    ``hard_links`` when the file has more than one name. Deletions, rescan markers and non-file
    changes pass through unchanged. Blocking: the intake runs it on its executor."""
    if change.kind != "file" or change.change in ("deleted", "rescan"):
        return change
    folder = change.payload.get("folder")
    root = folder if isinstance(folder, str) and folder else None
    fmt = document_format(change.uri)
    if fmt is not None and is_binary_format(fmt):
        preview: FilePreview | WatchedDocument = read_watched_document(change.uri, fmt, root=root)
    else:
        preview = read_text_preview(change.uri, max_bytes, root=root)
    payload = {**change.payload, "size": preview.size, "mtime": preview.mtime}
    if isinstance(preview, WatchedDocument) and preview.document is not None:
        payload["document"] = preview.document
    if preview.links > 1:
        payload["hard_links"] = preview.links
    if preview.skipped is not None:
        payload["skipped"] = preview.skipped
        if preview.message:
            payload["message"] = preview.message
        return replace(change, content="", payload=payload)
    payload["encoding"] = preview.encoding
    if preview.hidden_removed:
        payload["hidden_removed"] = preview.hidden_removed
    return replace(change, content=preview.text or "", payload=payload)


def make_preparer(max_file_bytes: int) -> Callable[[RawChange], RawChange]:
    """The preparer the composition root gives ``EnvIntake(prepare=...)``: reads file text."""
    return lambda change: prepare_file_change(change, max_file_bytes)


# --------------------------------------------------------------------------- watchdog plumbing


class QueueOverflowEvent(FileSystemEvent):
    """Queued by :class:`_OverflowAwareEmitter` when the kernel dropped events for a watch."""

    event_type = "overflow"
    is_synthetic = True


_EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent, FileModifiedEvent, FileDeletedEvent, FileMovedEvent, DirCreatedEvent, DirDeletedEvent,
    QueueOverflowEvent,
]


@functools.cache
def _overflow_aware_emitter() -> type | None:
    """An InotifyEmitter subclass that reports queue overflows (None when not on inotify 7.x)."""
    try:
        from watchdog.observers.inotify import InotifyEmitter
    except Exception:  # noqa: BLE001 - not Linux, or no inotify: no overflow signal to hook
        return None

    class _OverflowAwareEmitter(InotifyEmitter):  # type: ignore[misc, valid-type]
        def on_thread_start(self) -> None:
            super().on_thread_start()
            group = getattr(self, "_inotify", None)
            original = getattr(group, "on_queue_overflow", None)
            if group is None or original is None:
                return

            def on_queue_overflow() -> None:
                original()
                self.queue_event(QueueOverflowEvent(self.watch.path))

            group.on_queue_overflow = on_queue_overflow  # the fd reader calls it on IN_Q_OVERFLOW

    return _OverflowAwareEmitter


def make_observer(timeout_s: float = 0.5) -> BaseObserver:
    """The platform's watchdog observer; on Linux with an emitter that reports overflows."""
    observer = Observer(timeout=timeout_s)
    emitter = _overflow_aware_emitter()
    if emitter is not None and type(observer).__name__ == "InotifyObserver" and hasattr(observer, "_emitter_class"):
        observer._emitter_class = emitter  # the one private seam watchdog leaves for this
    return observer


class _FolderHandler(FileSystemEventHandler):
    """Runs on watchdog's thread: maps events to changes and calls the sink, nothing else."""

    def __init__(self, sensor: FolderSensor, folder: str) -> None:
        self._sensor = sensor
        self._folder = folder

    def dispatch(self, event: FileSystemEvent) -> None:
        sensor, folder = self._sensor, self._folder
        if isinstance(event, QueueOverflowEvent):
            sensor.request_rescan(folder, "overflow")
            return
        if event.is_directory:  # watchdog reports the files inside new or moved folders itself
            sensor.touch(folder)
            if event.event_type == "deleted" and os.fsdecode(event.src_path) == folder:
                sensor.folder_gone(folder)
            return
        etype = event.event_type
        src = os.fsdecode(event.src_path)
        if etype == "moved":
            dest = os.fsdecode(event.dest_path)
            src_ignored, dest_ignored = sensor.ignored(folder, src), sensor.ignored(folder, dest)
            if src_ignored and dest_ignored:
                sensor.skip(folder)
                return
            if dest_ignored:
                sensor.emit(folder, dest_path=src, change="deleted")
            elif src_ignored:  # e.g. an editor's atomic save: write "x.tmp", rename to "x"
                sensor.emit(folder, dest_path=dest, change="moved", src_path=src, carry=False)
            else:
                sensor.emit(folder, dest_path=dest, change="moved", src_path=src)
        elif etype in ("created", "modified", "deleted"):
            if sensor.ignored(folder, src):
                sensor.skip(folder)
            else:
                sensor.emit(folder, dest_path=src, change=etype)


# --------------------------------------------------------------------------- the sensor


class FolderSensor:
    """Watches ``folders`` recursively and sends one :class:`RawChange` per file event.

    ``ignore_patterns`` are matched (fnmatch) against the path relative to its folder and
    against the file name. ``max_file_bytes`` is what :func:`make_preparer` should be built
    with; it is kept here so the composition root has one place to read it from.
    """

    name = "files"

    def __init__(
        self,
        folders: Iterable[str | os.PathLike[str]],
        sink: Sink,
        *,
        ignore_patterns: Sequence[str] = (),
        max_file_bytes: int = 1_000_000,
        recursive: bool = True,
        settle_s: float = 0.25,
        refresh_quiet_s: float = 10.0,
        observer_factory: Callable[[], BaseObserver] = make_observer,
    ) -> None:
        seen: dict[str, None] = {}
        for f in folders:
            seen.setdefault(os.path.abspath(os.path.expanduser(os.fspath(f))), None)
        self.folders: list[str] = list(seen)
        self.max_file_bytes = max_file_bytes
        self._sink = sink
        self._is_ignored = ignore_matcher(ignore_patterns)
        self._recursive = recursive
        self._settle_s = settle_s
        self._refresh_quiet_s = refresh_quiet_s
        self._observer_factory = observer_factory
        self._observer: BaseObserver | None = None
        self._board = StatusBoard(self.name, self.folders)
        # Written by watchdog's thread (plain assignments), read by the rescan thread.
        self._last_event: dict[str, float] = {f: 0.0 for f in self.folders}
        self._dirty: dict[str, bool] = {f: False for f in self.folders}
        self._cond = threading.Condition()
        self._requests: dict[str, str] = {}  # folder → reason; one queued rescan per folder
        self._generation: dict[str, int] = {f: 0 for f in self.folders}
        self._baseline: dict[str, Snapshot] = {}
        self._drop_streak: dict[str, int] = {}
        self._stop = threading.Event()
        self._rescanner: threading.Thread | None = None

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Schedule every existing folder on a new observer and start the rescan thread."""
        if self._observer is not None:
            return
        self._stop.clear()
        observer = self._observer_factory()
        for folder in self.folders:
            if not os.path.isdir(folder):
                self._board.error(folder, "not a folder (or not reachable)")
                continue
            try:
                observer.schedule(_FolderHandler(self, folder), folder, recursive=self._recursive, event_filter=_EVENT_FILTER)
            except OSError as exc:
                self._board.error(folder, f"cannot watch: {exc}")
                continue
            self._board.ok(folder)
        observer.start()
        self._observer = observer
        self._board.running = True
        self._rescanner = threading.Thread(target=self._rescan_loop, name="pcm-files-rescan", daemon=True)
        self._rescanner.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the observer and the rescan thread, joining both within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(max(0.0, deadline - time.monotonic()))
        if self._rescanner is not None:
            self._rescanner.join(max(0.0, deadline - time.monotonic()))
            self._rescanner = None
        self._board.running = False

    def status(self) -> list[SourceStatus]:
        """One record per folder: counts (changes, ignored, dropped, overflows, rescans, errors),
        detail (baseline_files, last_rescan_reason), last_ok / last_error."""
        return self._board.snapshot()

    # ---------------------------------------------------------------- called on watchdog's thread

    def ignored(self, folder: str, path: str) -> bool:
        return self._is_ignored(relative(path, folder))

    def skip(self, folder: str) -> None:
        """Count an event on an ignored path."""
        self._board.add(folder, "ignored")

    def folder_gone(self, folder: str) -> None:
        """The watched folder itself was deleted: watchdog stops its watch; say so in status."""
        self._board.error(folder, "the folder was deleted; no longer watched")

    def touch(self, folder: str) -> None:
        """Note activity in ``folder`` (for the quiet-period baseline refresh); no I/O."""
        self._last_event[folder] = time.monotonic()
        self._dirty[folder] = True

    def emit(self, folder: str, *, dest_path: str, change: str, src_path: str = "", carry: bool = True) -> None:
        """Send one change for ``dest_path``; a move carries its source key unless ``carry`` is False."""
        self.touch(folder)
        payload: dict[str, object] = {"folder": folder, "path": relative(dest_path, folder)}
        if src_path:
            payload["src_path"] = src_path
            if carry:
                payload["src_key"] = src_path
        self._send(RawChange(
            key=dest_path, kind="file", source=folder, uri=dest_path, change=change,
            title=relative(dest_path, folder), payload=payload,
        ), folder)

    def _send(self, change: RawChange, folder: str) -> bool:
        accepted = self._sink(change) is not False
        self._board.add(folder, "changes" if accepted else "dropped")
        if not accepted and change.change != "rescan":
            self.request_rescan(folder, "dropped")
        return accepted

    def request_rescan(self, folder: str, reason: str) -> None:
        """Queue one rescan of ``folder``, run once the folder has been quiet for ``settle_s``;
        requests arriving before it runs merge into it."""
        if reason == "overflow":
            self._board.add(folder, "overflows")
        # Counts as activity: a run of overflows (or drops) is answered by one rescan after it.
        self.touch(folder)
        with self._cond:
            self._generation[folder] = self._generation.get(folder, 0) + 1
            self._requests.setdefault(folder, reason)
            self._cond.notify_all()

    # ---------------------------------------------------------------- the rescan thread

    def _rescan_loop(self) -> None:
        for folder in self.folders:
            if self._stop.is_set():
                return
            if os.path.isdir(folder):
                self._baseline[folder] = scan_folder(folder, self._is_ignored, should_stop=self._stop.is_set)
                self._board.set_detail(folder, baseline_files=len(self._baseline[folder]))
        while not self._stop.is_set():
            with self._cond:
                if not self._requests:
                    self._cond.wait(timeout=min(1.0, self._refresh_quiet_s))
                due = self._due_requests()
            if self._stop.is_set():
                return
            for folder, reason in due:
                self._rescan(folder, reason)
            if not due:
                self._refresh_quiet_baselines()
                if self._requests:
                    self._stop.wait(self._settle_s / 2)

    def _due_requests(self) -> list[tuple[str, str]]:
        """Requests whose folder has been quiet for ``settle_s`` (called under the condition)."""
        now = time.monotonic()
        due = [(f, r) for f, r in self._requests.items() if now - self._last_event.get(f, 0.0) >= self._settle_s]
        for folder, _ in due:
            del self._requests[folder]
        return due

    def _rescan(self, folder: str, reason: str) -> None:
        if not os.path.isdir(folder):
            self._board.error(folder, "folder is gone")
            return
        snap = scan_folder(folder, self._is_ignored, should_stop=self._stop.is_set)
        if self._stop.is_set():
            return
        diffs = diff_snapshots(self._baseline.get(folder, {}), snap)
        all_sent = True
        for d in diffs:
            payload: dict[str, object] = {"folder": folder, "path": relative(d.path, folder), "rescan": True, "reason": reason}
            if d.src:
                payload["src_path"] = d.src
                payload["src_key"] = d.src
            all_sent &= self._send(RawChange(
                key=d.path, kind="file", source=folder, uri=d.path, change=d.change,
                title=relative(d.path, folder), payload=payload,
            ), folder)
        counts: dict[str, int] = {}
        for d in diffs:
            counts[d.change] = counts.get(d.change, 0) + 1
        marker = RawChange(
            key=f"rescan:{folder}", kind="file", source=folder, uri=folder, change="rescan",
            title=f"Rescanned {os.path.basename(folder) or folder}",
            content=f"{len(diffs)} differences found after {reason}: "
            + (", ".join(f"{n} {c}" for c, n in sorted(counts.items())) or "none"),
            payload={"folder": folder, "reason": reason, "differences": len(diffs), **counts},
        )
        self._send(marker, folder)
        if all_sent:  # a dropped difference must show up again in the next rescan
            self._baseline[folder] = snap
            self._drop_streak[folder] = 0
        else:
            self._drop_streak[folder] = self._drop_streak.get(folder, 0) + 1
            if self._drop_streak[folder] >= _MAX_DROPPED_RESCANS:
                # The intake keeps refusing (stopped, or far behind): stop re-queuing rescans.
                with self._cond:
                    self._requests.pop(folder, None)
                self._board.error(folder, "changes dropped by the intake; rescans given up")
        self._dirty[folder] = False
        self._board.add(folder, "rescans")
        self._board.set_detail(folder, baseline_files=len(self._baseline.get(folder, {})), last_rescan_reason=reason)
        log.info("rescanned %s after %s: %d differences", folder, reason, len(diffs))

    def _refresh_quiet_baselines(self) -> None:
        """Re-take the baseline of folders that saw events and have been quiet since."""
        now = time.monotonic()
        for folder in self.folders:
            if self._stop.is_set():
                return
            if not self._dirty.get(folder) or now - self._last_event.get(folder, 0.0) < self._refresh_quiet_s:
                continue
            if folder in self._requests or not os.path.isdir(folder):
                continue
            with self._cond:
                generation = self._generation.get(folder, 0)
            self._dirty[folder] = False
            snap = scan_folder(folder, self._is_ignored, should_stop=self._stop.is_set)
            with self._cond:
                # A rescan requested meanwhile must diff against the old baseline, or the
                # changes it is looking for would already be in the new one.
                if self._generation.get(folder, 0) == generation and folder not in self._requests:
                    self._baseline[folder] = snap
                    self._board.set_detail(folder, baseline_files=len(snap))
