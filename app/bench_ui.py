"""``pcm bench ui``: how responsive the desktop app stays (DESIGN.md §3, §6).

Two measurements in one process, each against an idle baseline measured in the same run:

- **streaming**: the real window on the configured models; an answer streams while a precise
  5 ms timer measures how late the UI event loop serves it (lag = actual gap − 5 ms);
- **canvas**: 5,000 nodes panned and zoomed across levels of detail; the frame time of each
  forced repaint and the loop lag meanwhile (``app.ui.canvas.bench``);
- **burst** (``--burst N``): another process writes N files into a watched folder while the
  window runs; raw changes vs events stored, loop lag and resident memory.

Run it as ``pcm bench ui`` (which starts ``python -m app.bench_ui`` so the headless CLI never
imports Qt) or directly. Use ``QT_QPA_PLATFORM=offscreen`` or ``xvfb-run`` without a display.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PROMPTS = (
    "Write a detailed packing list for a week of hiking in the Alps in September.",
    "Explain step by step how a hash table handles collisions, with an example.",
    "Describe the plot of a short mystery story set on a night train.",
)


def summary(samples: Sequence[float]) -> dict[str, float]:
    """p50, p95 and max of ``samples`` (ms), rounded; zeros when empty."""
    if not samples:
        return {"p50": 0.0, "p95": 0.0, "max": 0.0, "n": 0}
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"p50": round(statistics.median(ordered), 2), "p95": round(p95, 2), "max": round(ordered[-1], 2), "n": len(ordered)}


async def measure_streaming(data_dir: Path, runs: int) -> dict[str, Any]:
    """Lag of the UI loop while answers stream into the real window (the Conversation dock open
    on the branch being answered), and while idle."""
    from app import desktop
    from app.config import Settings
    from app.ui.lag import LagProbe
    from app.ui.window import MainWindow

    settings = Settings.load(data_dir)
    window = MainWindow(settings, desktop.services())
    window.show()
    try:
        started = time.perf_counter()
        if not await window.controller.load():
            raise SystemExit("the models did not load; run `pcm models verify`")
        load_s = time.perf_counter() - started
        if "conversation" in window.docks:  # the transcript re-renders the branch as answers land
            window.docks["conversation"].raise_()
        probe = LagProbe()
        probe.start()
        await asyncio.sleep(2.0)
        idle = probe.stop()
        lags: list[float] = []
        first_tokens: list[float] = []
        tokens = 0
        stream_s = 0.0
        for i in range(runs):
            c = window.controller
            window.composer.edit.setPlainText(PROMPTS[i % len(PROMPTS)])
            probe.start()
            t0 = time.perf_counter()
            window.composer.send.click()
            while not c.live:
                await asyncio.sleep(0.005)
            (live,) = c.live.values()
            while c.busy():
                await asyncio.sleep(0.01)
            stream_s += time.perf_counter() - t0
            lags.extend(probe.stop())
            record = await c.record(live.turn_id)
            await window.show_turn(live.turn_id)  # the next answer continues the branch shown
            if record is not None and record.timing.first_token_ms is not None:
                first_tokens.append(record.timing.first_token_ms)
                tokens += int(record.usage.get("completion_tokens", 0))
        return {
            "load_s": round(load_s, 2),
            "idle_lag_ms": summary(idle),
            "streaming_lag_ms": summary(lags),
            "first_token_ms": summary(first_tokens),
            "tokens_per_s": round(tokens / stream_s, 1) if stream_s else 0.0,
            "answers": runs,
        }
    finally:
        window.close()
        while not window._shut:
            await asyncio.sleep(0.05)


_WRITER = """
import sys, pathlib
root, n = pathlib.Path(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    p = root / f"d{i % 20:02d}" / f"note-{i:05d}.md"
    p.parent.mkdir(exist_ok=True)
    p.write_text(f"note {i}: draft", encoding="utf-8")
    p.write_text(f"note {i}: final text about item {i}", encoding="utf-8")
"""


async def measure_burst(data_dir: Path, n_files: int) -> dict[str, Any]:
    """A burst of ``n_files`` new files (created, then edited) in a watched folder, written by
    another process, while the real window runs: UI loop lag, raw changes vs events stored, RSS."""
    import subprocess

    from app import desktop
    from app.config import Settings
    from app.ui.lag import LagProbe
    from app.ui.window import MainWindow, resident_memory_mb

    folder = data_dir / "watched"
    folder.mkdir(parents=True, exist_ok=True)
    settings = Settings.load(data_dir / "data").model_copy(update={"watched_folders": [folder]})
    window = MainWindow(settings, desktop.services())
    window.show()
    c = window.controller
    try:
        if not await c.load():
            raise SystemExit("the models did not load; run `pcm models verify`")
        if "conversation" in window.docks:  # the transcript re-renders the branch as answers land
            window.docks["conversation"].raise_()
        probe = LagProbe()
        probe.start()
        await asyncio.sleep(2.0)
        idle = probe.stop()
        rss_before = resident_memory_mb() or 0.0
        rss_peak = rss_before
        probe.start()
        t0 = time.perf_counter()
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(folder), str(n_files)])
        last, quiet_since = -1, time.perf_counter()
        while True:
            await asyncio.sleep(0.1)
            rss_peak = max(rss_peak, resident_memory_mb() or 0.0)
            stats = c.intake.stats() if c.intake is not None else None
            done = stats.events if stats else 0
            if done != last or (stats and (stats.inbox or stats.pending)) or writer.poll() is None:
                last, quiet_since = done, time.perf_counter()
            elif time.perf_counter() - quiet_since > 3.0:
                break
            if time.perf_counter() - t0 > 900:
                break
        settle_s = time.perf_counter() - t0 - 3.0
        lags = probe.stop()
        stats = c.intake.stats() if c.intake is not None else None
        stored = await c.engine.env_events(c.session_id)
        return {
            "files": n_files,
            "raw_changes": stats.raw if stats else 0,
            "events_stored": len(stored),
            "batches": stats.batches if stats else 0,
            "dropped": stats.dropped if stats else 0,
            "rescans": stats.rescans if stats else 0,
            "max_pending": stats.max_pending_seen if stats else 0,
            "seconds_to_settle": round(settle_s, 1),
            "idle_lag_ms": summary(idle),
            "burst_lag_ms": summary(lags),
            "rss_mb": {"before": round(rss_before, 1), "peak": round(rss_peak, 1),
                       "after": round(resident_memory_mb() or 0.0, 1)},
            "canvas_nodes": window.scene.node_count() if hasattr(window.scene, "node_count") else None,
        }
    finally:
        window.close()
        while not window._shut:
            await asyncio.sleep(0.05)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from app.ui.app import application, run_on_qt_loop
    from app.ui.canvas.bench import measure_pan_zoom

    app = application()
    report: dict[str, Any] = {}
    if not args.skip_canvas:
        report["canvas"] = measure_pan_zoom(n_nodes=args.nodes, frames=args.frames)
    if not args.skip_streaming:
        with tempfile.TemporaryDirectory(prefix="pcm-bench-ui-") as tmp:
            data_dir = Path(args.data_dir) if args.data_dir else Path(tmp)
            report["streaming"] = run_on_qt_loop(measure_streaming(data_dir, args.runs))
    if args.burst:
        with tempfile.TemporaryDirectory(prefix="pcm-bench-burst-") as tmp:
            report["burst"] = run_on_qt_loop(measure_burst(Path(tmp), args.burst))
    app.processEvents()
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = []
    if "canvas" in report:
        c = report["canvas"]
        lines.append(f"canvas: {int(c.get('n_nodes', 0))} nodes, {int(c.get('n_edges', 0))} edges, layout {c.get('layout_ms', 0):.0f} ms")
        lines.append(f"  pan/zoom frame ms  p50 {c.get('frame_ms_p50', 0):.2f}  p95 {c.get('frame_ms_p95', 0):.2f}  max {c.get('frame_ms_max', 0):.2f}   (target p95 < 16)")
        lines.append(f"  loop lag ms        p50 {c.get('loop_lag_ms_p50', 0):.2f}  p95 {c.get('loop_lag_ms_p95', 0):.2f}  max {c.get('loop_lag_ms_max', 0):.2f}")
    if "streaming" in report:
        s = report["streaming"]
        for key, label in (("idle_lag_ms", "idle loop lag ms"), ("streaming_lag_ms", "streaming loop lag ms"),
                           ("first_token_ms", "first token ms")):
            v = s[key]
            lines.append(f"{label:<24} p50 {v['p50']:.2f}  p95 {v['p95']:.2f}  max {v['max']:.2f}  (n={v['n']})")
        base = s["idle_lag_ms"]["p95"]
        ratio = s["streaming_lag_ms"]["p95"] / base if base else float("nan")
        lines.append(f"streaming/idle lag p95 ratio {ratio:.2f}; {s['tokens_per_s']} tok/s over {s['answers']} answers; models loaded in {s['load_s']} s  (target lag p95 < 50)")
    if "burst" in report:
        b = report["burst"]
        lines.append(f"burst: {b['files']} files → {b['raw_changes']} raw changes → {b['events_stored']} events stored "
                     f"({b['raw_changes'] / max(1, b['events_stored']):.1f}:1) in {b['batches']} batches, "
                     f"{b['dropped']} dropped, {b['rescans']} rescans, settled in {b['seconds_to_settle']} s")
        for key, label in (("idle_lag_ms", "  idle loop lag ms"), ("burst_lag_ms", "  burst loop lag ms")):
            v = b[key]
            lines.append(f"{label:<24} p50 {v['p50']:.2f}  p95 {v['p95']:.2f}  max {v['max']:.2f}  (n={v['n']})")
        r = b["rss_mb"]
        lines.append(f"  RSS MB before {r['before']}  peak {r['peak']}  after {r['after']}; max pending keys {b['max_pending']}  (target lag p95 < 50)")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pcm bench ui", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000, help="canvas nodes (default 5000)")
    parser.add_argument("--frames", type=int, default=300, help="pan/zoom frames (default 300)")
    parser.add_argument("--runs", type=int, default=3, help="streamed answers (default 3)")
    parser.add_argument("--data-dir", help="data folder for the streaming run (default: a temporary one)")
    parser.add_argument("--skip-canvas", action="store_true")
    parser.add_argument("--skip-streaming", action="store_true")
    parser.add_argument("--burst", type=int, default=0, metavar="N",
                        help="also write N files into a watched folder while the window runs (e.g. 10000)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from app.desktop import limit_malloc_arenas

    args = build_parser().parse_args(argv)
    limit_malloc_arenas()  # as the app does
    report = run(args)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
