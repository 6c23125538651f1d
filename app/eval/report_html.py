"""The evaluation report as one self-contained HTML page (``OUT/index.html``) and ``OUT/summary.json``.

``write_report(out)`` reads ``OUT/pred`` (``app.eval.report_summary.summarize``), draws the plots
(``app.eval.report_plots``, inlined as data URIs) and writes both files; the same PRED files give
the same bytes. The page opens with the commit and the exact commands (the run, and the one that
regenerates it), then: each dialogue dataset's strategies at every budget (recall and answer F1
with their intervals, plotted), PCM against the control systems, the ablations with their verdicts
and the mechanisms that cost more than they give, the stratified tables, token efficiency, build
latency, conflict exposure and each stream dataset's purity.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.eval import report_plots as plots
from app.eval.conflicts import OUTCOMES
from app.eval.report_summary import summarize
from app.eval.strategies import STRATEGIES

_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:78em;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.85em}th,td{border:1px solid #ccc;padding:.25em .5em;
text-align:right}th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}code,pre{background:#f6f6f6}
pre{padding:.6em;white-space:pre-wrap}.better{background:#e3f1e3}.worse{background:#f8e0e0}img{max-width:100%}
.note{color:#555;font-size:.9em}"""


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return html.escape(str(value))


def _ci(cell: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not cell or cell.get("mean") is None:
        return "–"
    return f"{cell['mean']:.{digits}f} [{cell['low']:.{digits}f}, {cell['high']:.{digits}f}]"


def _diff(cell: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not cell or cell.get("diff") is None:
        return "–"
    return f"{cell['diff']:+.{digits}f} [{cell['low']:+.{digits}f}, {cell['high']:+.{digits}f}]"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(f"<tr class=\"{classes[i] if i < len(classes) else ''}\">" + "".join(f"<td>{c}</td>" for c in row)
                   + "</tr>" for i, row in enumerate(rows))
    return f"<table><tr>{head}</tr>{body}</table>"


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return ""
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}"></p>'


def _labels(summary: Mapping[str, Any]) -> dict[str, str]:
    return {n: s["label"] for n, s in summary["strategies"].items()}


# --------------------------------------------------------------------------- sections


def header(summary: Mapping[str, Any]) -> str:
    run = summary["run"]
    plan = run["plan"]
    lines = ["<h1>PCM evaluation report</h1>",
             f"<p>Commit <code>{html.escape(run.get('commit', '?'))}</code>"
             + (" (with uncommitted changes)" if run.get("dirty") else "") + f"; run {html.escape(run.get('started', ''))}"
             f" → {html.escape(run.get('finished', ''))}; {html.escape(run.get('machine', ''))}.</p>",
             "<p>Run:</p><pre>" + html.escape(run.get("command", "")) + "</pre>",
             "<p>Regenerate this page from the PRED files alone:</p><pre>" + html.escape(run.get("regenerate", ""))
             + "</pre>"]
    facts = [("budgets", ", ".join(str(b) for b in plan["budgets"])),
             ("token counter", "ceil(1.3 × words), the same for every strategy"),
             ("dialogue sample", str(plan["sample"] or "all questions")),
             ("answered sample", f"{plan['answer_sample']} questions × {', '.join(plan['answer_strategies'])} at "
              + ("every budget" if plan.get("answer_budgets") is None
                 else ", ".join(str(b) for b in plan["answer_budgets"]))),
             ("stream sample", str(plan["stream_sample"] or "all scored messages")),
             ("conflict items", str(plan["conflicts"])),
             ("answering model", f"{plan['model'] or '–'}; parameters {json.dumps(plan['params'], sort_keys=True)}"),
             ("data", "; ".join(f"{d['name']} ({d['kind']}): {d['path']}" for d in run["datasets"])),
             ("time", "; ".join(f"{k} {v} s" for k, v in run.get("seconds", {}).items()))]
    lines.append(_table(["", ""], [[html.escape(k), html.escape(v)] for k, v in facts]))
    lines += [f"<p class=\"note\">{html.escape(note)}</p>" for note in run.get("notes", [])]
    return "\n".join(lines)


def strategies_table(summary: Mapping[str, Any]) -> str:
    rows = [[f"<code>{html.escape(n)}</code>", html.escape(s["label"]), html.escape(s["kind"]), html.escape(s["about"])]
            for n, s in summary["strategies"].items()]
    return "<h2>Strategies</h2>" + _table(["name", "label", "kind", "what its context is"], rows)


def dialogue_section(name: str, part: Mapping[str, Any], budgets: Sequence[int], labels: Mapping[str, str]) -> str:
    out = [f"<h2>{html.escape(name)}: {part['questions']} questions"
           + (f", {part['answered']} answered by {html.escape(str(part['model']))}" if part["answered"] else "") + "</h2>"]
    rows = []
    for n, row in part["strategies"].items():
        rows.append([html.escape(labels.get(n, n))]
                    + [f"{_ci(row[str(b)]['recall'])}<br>F1 {_ci(row[str(b)]['answer_f1'])}" for b in budgets]
                    + [_num(part["latency"].get(n, {}).get("all", {}).get("p50"), 1)])
    out.append("<p>Evidence recall (gold turns carried, adversarial questions aside) and answer token F1, mean "
               "[95 % bootstrap interval], per budget; build p50 in ms over all budgets.</p>")
    out.append(_table(["strategy", *[f"budget {b}" for b in budgets], "build p50 ms"], rows))
    main = {n: r for n, r in part["strategies"].items() if _kind(n) in ("pcm", "control")}
    out.append(_img(plots.curves(main, "recall", budgets, labels, f"{name}: evidence recall", "recall"), "recall"))
    out.append(_img(plots.curves(main, "answer_f1", budgets, labels, f"{name}: answer token F1", "F1"), "answer F1"))
    out.append(vs_table(part["vs_pcm"], ("recall", "precision", "answer_f1", "exact"), budgets, labels,
                        "PCM against each other strategy (PCM − other; positive: PCM better; a verdict needs the "
                        "interval to exclude 0 and Wilcoxon p < .05)"))
    return "\n".join(out)


def _kind(name: str) -> str:
    return STRATEGIES[name].kind if name in STRATEGIES else "other"


def vs_table(vs: Mapping[str, Any], metrics: Sequence[str], budgets: Sequence[int], labels: Mapping[str, str],
             title: str, digits: int = 3) -> str:
    rows, classes = [], []
    for metric in metrics:
        for n, row in vs.get(metric, {}).items():
            for b in budgets:
                c = row.get(str(b))
                if not c or not c.get("n"):
                    continue
                rows.append([html.escape(metric), html.escape(labels.get(n, n)), str(b), str(c["n"]), _diff(c, digits),
                             _num(c["p"], 4), _num(c.get("p_holm"), 4), _num(c["d_z"], 2), _num(c["rank_biserial"], 2),
                             html.escape(c["verdict"])])
                classes.append("better" if c["verdict"] == "better" else "worse" if c["verdict"] == "worse" else "")
    if not rows:
        return ""
    return (f"<h3>{html.escape(title)}</h3>"
            + _table(["metric", "strategy", "budget", "n", "PCM − other [95 % CI]", "Wilcoxon p", "Holm p", "d_z",
                      "rank-biserial", "verdict"], rows, classes))


def ablation_section(summary: Mapping[str, Any], budgets: Sequence[int], labels: Mapping[str, str]) -> str:
    rows_ = summary.get("ablations", [])
    if not rows_:
        return ""
    out = ["<h2>Ablations: where the gain comes from</h2>",
           "<p>Each mechanism closed alone, the rest unchanged. A contribution is PCM − PCM without it "
           "(positive: the mechanism helps), with its 95 % interval; “distinguishable from zero” (≠0) when the "
           "interval excludes 0 and the Wilcoxon signed-rank p is below .05. Cost: what the mechanism adds to a build (paired build ms, context tokens).</p>"]
    table = []
    for r in rows_:
        shown = "; ".join(f"{c['data']} {c['metric']}@{c['budget']} {_diff(c)}"
                          + (" ≠0" if c["verdict"] != "no difference" else "") for c in r["contributions"])
        same = ", ".join(f"{s:.0%}" for s in r["identical_to_pcm"])
        table.append([html.escape(r["mechanism"]), html.escape(r["closes"]), f"<b>{html.escape(r['verdict'])}</b>",
                      shown or "–", same or "–", html.escape("; ".join(r["costs_without_gain"])) or "–",
                      "yes" if r["costs_more_than_it_gives"] else "no"])
    out.append(_table(["mechanism", "closing it", "verdict", "contributions (PCM − without) [95 % CI]",
                       "contexts identical to PCM", "cost with CI > 0", "costs more than it gives"], table))
    costly = [r["mechanism"] for r in rows_ if r["costs_more_than_it_gives"]]
    out.append("<p><b>Mechanisms that cost more than they give:</b> " + (html.escape(", ".join(costly)) or "none")
               + ".</p>")
    for data, part in summary.get("dialogue", {}).items():
        for metric, title in (("recall", "evidence recall"), ("answer_f1", "answer F1")):
            rows = [(labels.get(n, n), part["vs_pcm"][metric].get(n, {})) for n in part["vs_pcm"][metric]
                    if _kind(n) == "ablation"]
            out.append(_img(plots.deltas(rows, budgets, f"{data}: contribution to {title} (PCM − without)",
                                         f"Δ {title}"), f"ablation deltas {metric}"))
    return "\n".join(out)


def strata_section(name: str, part: Mapping[str, Any], budgets: Sequence[int], labels: Mapping[str, str]) -> str:
    out = [f"<h3>{html.escape(name)}: stratified</h3>"]
    titles = {"category": "evidence recall by question category", "length": "evidence recall by conversation length",
              "back": "evidence recall by how far back the evidence lies",
              "answer_category": "answer F1 by question category"}
    for key, title in titles.items():
        table = part["strata"].get(key, {})
        cells = sorted({c for row in table.values() for per in row.values() for c in per})
        if not cells:
            continue
        rows = []
        for n, row in table.items():
            for b in budgets:
                per = row.get(str(b), {})
                rows.append([html.escape(labels.get(n, n)), str(b)]
                            + [f"{per[c]['mean']:.3f} (n={per[c]['n']})" if c in per else "–" for c in cells])
        out.append(f"<p>{html.escape(title)}</p>" + _table(["strategy", "budget", *cells], rows))
    return "\n".join(out)


def efficiency_section(name: str, part: Mapping[str, Any], budgets: Sequence[int], labels: Mapping[str, str]) -> str:
    eff = part["efficiency"]
    rows = []
    for n, e in eff["strategies"].items():
        rows.append([html.escape(labels.get(n, n))]
                    + [f"{_num(e['tokens'].get(str(b)), 0)} · {_num(e['recall_per_1k'].get(str(b)), 3)}" for b in budgets]
                    + [_num(e["tokens_for_pcm_recall"].get(str(b)), 0) for b in budgets])
    targets = ", ".join(f"{b}: {_num(eff['targets'].get(str(b)))}" for b in budgets)
    return (f"<h3>{html.escape(name)}: token efficiency</h3><p>Mean context tokens · recall per 1,000 tokens at each "
            f"budget; then the tokens each strategy needs to reach PCM's recall at that budget ({targets}), linear "
            "between its measured budgets (– : not reached).</p>"
            + _table(["strategy", *[f"@{b}" for b in budgets], *[f"tokens for PCM@{b}" for b in budgets]], rows))


def latency_section(name: str, part: Mapping[str, Any], series: Mapping[str, Any], budgets: Sequence[int],
                    labels: Mapping[str, str]) -> str:
    rows = [[html.escape(labels.get(n, n))] + [f"{_num(row[str(b)]['p50'], 1)} / {_num(row[str(b)]['p95'], 1)}"
                                               for b in budgets]
            + [f"{_num(row['all']['p50'], 1)} / {_num(row['all']['p95'], 1)}"] for n, row in part["latency"].items()]
    build = series["per"]["build_ms"]
    values = {n: [v for v in vals.values() if v > 0] for n, vals in build.items()}
    return (f"<h3>{html.escape(name)}: build latency (ms, p50 / p95)</h3>"
            "<p>PCM's builds and its ablations' run back to back per question (same load); a control's time is "
            "making its context (B3: with its vector query).</p>"
            + _table(["strategy", *[f"@{b}" for b in budgets], "all"], rows)
            + _img(plots.distributions(values, labels, f"{name}: build time per context", "ms (log)"), "latency"))


def conflict_section(part: Mapping[str, Any] | None, budgets: Sequence[int], labels: Mapping[str, str]) -> str:
    if not part:
        return ""
    rows = []
    for n, row in part["strategies"].items():
        for b in budgets:
            cell = row[str(b)]
            rows.append([html.escape(labels.get(n, n)), str(b), _ci(cell["exposed"])]
                        + [f"{cell['outcomes'][o]:.2f}" for o in OUTCOMES])
    last = str(budgets[len(budgets) // 2])
    shares = {n: row[last]["outcomes"] for n, row in part["strategies"].items()}
    return ("<h2>Conflict exposure</h2>"
            f"<p>{part['items']} generated sessions in which the user changes a fact (app.eval.conflicts). "
            "exposed: both the current value and its predecessor, their order stated (dated lines, a conflict line, "
            "or the old one marked as no longer true); unordered: both, nothing says which is current; current: "
            "the current value alone; stale: an earlier value without the current one.</p>"
            + _table(["strategy", "budget", "exposed [95 % CI]", *OUTCOMES], rows)
            + _img(plots.outcome_bars(shares, OUTCOMES, labels, f"conflict outcomes at budget {last}"), "outcomes")
            + vs_table(part["vs_pcm"], ("exposed",), budgets, labels, "Conflict exposure: PCM − other"))


def stream_section(name: str, part: Mapping[str, Any], budgets: Sequence[int], labels: Mapping[str, str]) -> str:
    rows = []
    for n, row in part["strategies"].items():
        for b in budgets:
            c = row[str(b)]
            rows.append([html.escape(labels.get(n, n)), str(b), _ci(c["purity"]), _ci(c["thread_recall"]),
                         _num(c["leak_words"]["mean"], 1), _num(c["empty"]["mean"])])
    return (f"<h2>{html.escape(name)}: context purity ({part['messages']} scored messages)</h2>"
            "<p>purity: words of the message's own conversation among the cited words of known conversation "
            "(1 − purity is the false-context rate); thread recall: the share of its thread's last 5 messages carried; "
            "leak words: words of other conversations; empty: new conversations given no other conversation's words.</p>"
            + _table(["strategy", "budget", "purity [95 % CI]", "thread recall [95 % CI]", "leak words", "empty (new)"],
                     rows)
            + _img(plots.curves(part["strategies"], "purity", budgets, labels, f"{name}: purity", "purity"), "purity")
            + vs_table(part["vs_pcm"], ("purity", "thread_recall"), budgets, labels, "PCM − other"))


# --------------------------------------------------------------------------- the page


def render(summary: Mapping[str, Any], series: Mapping[str, Any]) -> str:
    budgets = [int(b) for b in summary["run"]["plan"]["budgets"]]
    labels = _labels(summary)
    parts = [header(summary), strategies_table(summary)]
    for name, part in summary["dialogue"].items():
        parts.append(dialogue_section(name, part, budgets, labels))
    parts.append(ablation_section(summary, budgets, labels))
    for name, part in summary["dialogue"].items():
        parts += [strata_section(name, part, budgets, labels), efficiency_section(name, part, budgets, labels),
                  latency_section(name, part, series["dialogue"][name], budgets, labels)]
    parts.append(conflict_section(summary.get("conflicts"), budgets, labels))
    for name, part in summary["stream"].items():
        parts.append(stream_section(name, part, budgets, labels))
    body = "\n".join(p for p in parts if p)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>PCM evaluation report</title>"
            f"<style>{_CSS}</style></head><body>\n{body}\n</body></html>\n")


def write_report(out: Path) -> dict[str, Any]:
    """``out/index.html`` and ``out/summary.json`` from ``out/pred``; returns the summary."""
    summary, series = summarize(out / "pred")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "index.html").write_text(render(summary, series), encoding="utf-8")
    return summary
