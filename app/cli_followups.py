"""``pcm eval followups DIR``: does an input continue the conversation it follows up?

DIR is LoCoMo's folder (``../shared/data/locomo-dev``: the dev sessions are made from it in
memory, ``app.eval.followup_data``) or a folder with the ``sessions.jsonl`` that ``--write`` left.
``--fit A`` (or B) runs the builds on the gold graph, fits the follow-up weights on that half and
reports both halves with them; the app's weights are ``SESSION_DEFAULT``'s.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from app.config import Settings
from app.core.engine.facade import Engine
from app.core.routing.anchor import SESSION_DEFAULT
from app.eval.followup_data import make_sessions, read_sessions, write_sessions
from app.eval.followups import FITTED, fit_weights, format_followups_report, run_followups

#: The weights ``--fit`` tries for each fitted feature.
FIT_GRID = tuple(round(0.1 * k, 1) for k in range(16))


def cmd_eval_followups(args: argparse.Namespace, data_dir: Path) -> int:
    from app.cli_pipeline import _err, _with_engine

    if (data_dir / "sessions.jsonl").is_file():
        sessions = read_sessions(data_dir / "sessions.jsonl")
    elif (data_dir / "messages.jsonl").is_file():
        sessions = make_sessions(data_dir)
    else:
        _err(f"pcm: error: {data_dir} holds neither sessions.jsonl nor LoCoMo's messages.jsonl")
        return 2
    if args.write:
        _err(f"the dev sessions: {write_sessions(sessions, Path(args.write))}")
    fit = (args.fit or "").upper()
    if fit and fit not in {s.half for s in sessions}:
        _err(f"pcm: error: --fit takes a half of the sessions ({', '.join(sorted({s.half for s in sessions}))})")
        return 2
    settings = Settings.load(args.data_dir or tempfile.mkdtemp(prefix="pcm-eval-"))

    async def work(engine: Engine) -> int:
        engine.lab().set_ablation(("deadlines",))  # figures of the contexts, not of the machine's load
        report = await run_followups(engine, sessions, forced=bool(fit), out_path=Path(args.out) if args.out else None,
                                     progress=_err)
        print(format_followups_report(report))
        if fit:
            recorded = {name: SESSION_DEFAULT.weight(name) for name in FITTED}
            fitted = fit_weights(report["rows"], fit, recorded, SESSION_DEFAULT.tau_new, FIT_GRID)
            report["fit"] = fitted
            print(f"fitted on half {fit}: {fitted['weights']}; thread accuracy with them (gold graph): "
                  + ", ".join(f"half {h} {a:.1f}%" for h, a in fitted["accuracy"].items()))
        if args.report:
            Path(args.report).write_text(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=2),
                                         encoding="utf-8")
        return 0

    return _with_engine(args, work, settings=settings, chat=False, counter="words")
