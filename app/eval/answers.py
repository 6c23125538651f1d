"""``pcm eval answers``: how well a chat model answers from PCM's compiled context.

Each question of a LoCoMo-format folder (``messages.jsonl``, ``questions.jsonl``) gets PCM's
context at one budget (``Engine.build``, no generation; token counts by ceil(1.3 × words), so the
contexts do not depend on the model that answers them). Every model then answers the same
prompts, and each answer is scored against the gold answer:

- token F1 (after SQuAD: lower case, punctuation, articles and "and" dropped, bag of words);
- exact match, for the questions whose gold answer is a date or a number: the normalised gold
  answer appears whole in the normalised answer ("7 May 2023" in "She went on 7 May 2023.");
- adversarial questions (about things that never happened) have no gold answer: an answer counts
  as right when it says the conversation does not tell (``abstained``), reported apart and left
  out of the overall F1 and exact figures;
- first-token latency and tokens/s of every call.

The reusable parts (scoring, the answer cache) are plain functions that ``pcm eval report``
(``app.eval.report_run``) calls the same way; the paired bootstrap is ``app.eval.stats``'. Answers are cached on
disk by (context hash, model, parameters), so a second run, or another budget's run sharing a
context, asks the model only for what it has not answered yet.

Gold answers come from a question's ``answer`` field; the development copy of LoCoMo leaves them
out, so ``gold_answers`` also reads the original ``locomo10.json`` (matched by conversation,
position and question text), which stays outside the repository like the data itself.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.engine.facade import Engine
from app.core.ports import ChatMessage, ChatModel, GenerationParams, SessionGeneration
from app.eval.recall import ingest_conversations, load_dataset
from app.eval.stats import paired_bootstrap

#: The session's standing instruction during the evaluation (LoCoMo's short-answer setting).
INSTRUCTION = ("Answer the question from the conversation in the context, in a short phrase. "
               "If the conversation does not say, answer: not mentioned.")
ADVERSARIAL = "adversarial"  # questions about things that never happened: scored by abstention, apart
DEFAULT_PARAMS = GenerationParams(max_tokens=48, temperature=0.0, seed=0)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE_OR_NUMBER = re.compile(rf"^\W*(\d[\d,.]*|(\d{{1,2}}\s+)?({_MONTHS})(\s+\d{{1,2}})?,?\s+\d{{4}}|"
                             rf"\d{{4}}|(the\s+)?\w+\s+(before|after|of)\s+.*\d{{4}})\W*$", re.IGNORECASE)
_ABSTAIN = ("not mentioned", "no information", "not say", "doesn't say", "does not say", "don't know",
            "do not know", "not known", "unknown", "no mention", "not stated", "not specified", "cannot answer")


# --------------------------------------------------------------------------- scoring


def normalize(text: str) -> str:
    """Lower case, punctuation, articles and "and" removed, whitespace collapsed (after SQuAD's)."""
    text = str(text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall between the normalised texts (0 when either is empty)."""
    pred, ref = normalize(prediction).split(), normalize(gold).split()
    if not pred or not ref:
        return 0.0
    common: dict[str, int] = {}
    for tok in ref:
        common[tok] = common.get(tok, 0) + 1
    same = 0
    for tok in pred:
        if common.get(tok, 0) > 0:
            common[tok] -= 1
            same += 1
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(ref)
    return 2 * p * r / (p + r)


def is_date_or_number(gold: str) -> bool:
    """Whether a gold answer is a date, a year or a number (the questions ``exact`` is scored on)."""
    return bool(_DATE_OR_NUMBER.match(str(gold).strip()))


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised gold answer appears whole (on word boundaries) in the normalised answer."""
    ref = normalize(gold)
    return 1.0 if ref and re.search(rf"(^| ){re.escape(ref)}( |$)", normalize(prediction)) else 0.0


def abstained(prediction: str) -> bool:
    """Whether an answer says the conversation does not tell (right for an adversarial question)."""
    text = str(prediction).lower().replace("’", "'")
    return any(phrase in text for phrase in _ABSTAIN)


# --------------------------------------------------------------------------- gold answers


def gold_answers(questions: Sequence[Mapping[str, Any]], original: Path | None = None) -> dict[str, str | None]:
    """qid → gold answer text (None for an adversarial question without one). A question's own
    ``answer`` wins; else LoCoMo's ``locomo10.json`` (``original``) at the qid's position
    (``conv-26#7``: the 8th question of conv-26), when its question text is the same."""
    upstream: dict[str, list[dict[str, Any]]] = {}
    if original is not None:
        upstream = {c["sample_id"]: c["qa"] for c in json.loads(Path(original).read_text(encoding="utf-8"))}
    out: dict[str, str | None] = {}
    for q in questions:
        answer = q.get("answer")
        if answer is None and q.get("conversation") in upstream:
            qa = upstream[q["conversation"]]
            pos = int(str(q["qid"]).rsplit("#", 1)[-1])
            if pos < len(qa) and qa[pos]["question"].strip() == str(q["question"]).strip():
                answer = qa[pos].get("answer")
        out[str(q["qid"])] = None if answer is None else str(answer)
    return out


def spread_sample(items: Sequence[Any], limit: int | None) -> list[Any]:
    """``limit`` items spread evenly over ``items`` (every conversation and category represented,
    the same ones every run); all of them without a limit."""
    if not limit or limit >= len(items):
        return list(items)
    return [items[i * len(items) // limit] for i in range(limit)]


# --------------------------------------------------------------------------- the answer cache


def context_hash(messages: Sequence[ChatMessage]) -> str:
    """sha256 of a prompt (its messages as canonical JSON)."""
    return hashlib.sha256(json.dumps(list(messages), sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class AnswerCache:
    """Answers on disk (JSON lines, appended), keyed by (context hash, model, parameters)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._rows: dict[str, dict[str, Any]] = {}
        self.hits = self.misses = 0
        if path is not None and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self._rows[row["key"]] = row

    @staticmethod
    def key(context: str, model: str, params: GenerationParams) -> str:
        raw = json.dumps([context, model, params.model_dump(mode="json")], sort_keys=True)
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._rows.get(key)
        if row is None:
            self.misses += 1
        else:
            self.hits += 1
        return row

    def put(self, key: str, row: dict[str, Any]) -> None:
        row = {**row, "key": key}
        self._rows[key] = row
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")


def answer(model: ChatModel, messages: Sequence[ChatMessage], params: GenerationParams) -> dict[str, Any]:
    """One answer with its timing: text, finish, first-token ms, latency ms, completion tokens, tokens/s."""
    result = model.chat(messages, params=params, stage="eval")
    usage = result.usage
    first = usage.first_token_latency_ms
    decode_s = (usage.latency_ms - (first or 0.0)) / 1000
    rate = (usage.completion_tokens - 1) / decode_s if usage.completion_tokens > 1 and decode_s > 0 else None
    return {"text": result.text.strip(), "finish": result.finish_reason, "first_token_ms": first,
            "latency_ms": usage.latency_ms, "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens, "tokens_per_s": rate, "error": usage.error}


# --------------------------------------------------------------------------- the run


@dataclass
class Asked:
    """One question with its compiled prompt and gold answer."""

    qid: str
    category: str
    question: str
    gold: str | None
    prompt: list[ChatMessage]
    context: str  # context_hash(prompt)
    context_tokens: int


@dataclass
class ModelRun:
    """One model's answers to every ``Asked``, in order, and how long loading it took."""

    model: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    load_s: float = 0.0


async def compile_questions(engine: Engine, data_dir: Path, budget: int, *, limit: int | None = None,
                            original: Path | None = None,
                            progress: Callable[[str], None] | None = None) -> list[Asked]:
    """Ingest DIR's conversations and build each (sampled) question's prompt at ``budget``."""
    _, questions, _, by_conv = load_dataset(data_dir)
    golds = gold_answers(questions, original)
    chosen = spread_sample(questions, limit)
    sessions = await ingest_conversations(engine, {c: by_conv[c] for c in {q["conversation"] for q in chosen}},
                                          progress)
    for state in sessions.values():
        await engine.set_generation(state.session_id, SessionGeneration(system_prompt=INSTRUCTION))
    asked: list[Asked] = []
    for q in chosen:
        state = sessions[q["conversation"]]
        record, _ = await engine.build(state.session_id, q["question"], budget=budget, at=q.get("ts"))
        prompt = [dict(m) for m in record.prompt]
        asked.append(Asked(str(q["qid"]), str(q["category"]), str(q["question"]), golds.get(str(q["qid"])),
                           prompt, context_hash(prompt), record.context.tokens))
    return asked


def score(item: Asked, text: str) -> dict[str, Any]:
    """The figures of one answer: f1 and exact (None where they do not apply), abstained."""
    if item.gold is None or item.category == ADVERSARIAL:
        return {"f1": None, "exact": None, "abstained": abstained(text)}
    exact = exact_match(text, item.gold) if is_date_or_number(item.gold) else None
    return {"f1": token_f1(text, item.gold), "exact": exact, "abstained": abstained(text)}


def run_model(name: str, model: ChatModel, asked: Sequence[Asked], cache: AnswerCache,
              params: GenerationParams = DEFAULT_PARAMS, progress: Callable[[str], None] | None = None) -> ModelRun:
    """Every question answered by ``model`` (from the cache where it answered before) and scored."""
    run = ModelRun(name)
    for n, item in enumerate(asked, start=1):
        key = AnswerCache.key(item.context, name, params)
        got = cache.get(key)
        if got is None:
            got = {"model": name, "context": item.context, "params": params.model_dump(mode="json"),
                   **answer(model, item.prompt, params)}
            cache.put(key, got)
        run.rows.append({"qid": item.qid, "category": item.category, "question": item.question, "gold": item.gold,
                         "answer": got["text"], "finish": got["finish"], "first_token_ms": got["first_token_ms"],
                         "tokens_per_s": got["tokens_per_s"], "latency_ms": got["latency_ms"],
                         **score(item, got["text"])})
        if progress and n % 10 == 0:
            progress(f"{name}: {n}/{len(asked)} answered")
    return run


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(sum(vals) / len(vals), 4) if vals else None


def _quantile(values: Iterable[float | None], q: float) -> float | None:
    vals = sorted(v for v in values if v is not None)
    return round(vals[min(len(vals) - 1, int(round(q * (len(vals) - 1))))], 1) if vals else None


def summarize_run(run: ModelRun) -> dict[str, Any]:
    """A model's figures: n, f1 and exact over the answerable questions (adversarial apart), per
    category, abstention on adversarial questions, first-token latency and tokens/s (p50, p95)."""
    rows = run.rows
    answerable = [r for r in rows if r["f1"] is not None]
    cats = sorted({r["category"] for r in rows})
    by_cat = {c: {"n": sum(r["category"] == c for r in rows),
                  "f1": _mean(r["f1"] for r in rows if r["category"] == c),
                  "exact": _mean(r["exact"] for r in rows if r["category"] == c),
                  "abstained": _mean(float(r["abstained"]) for r in rows if r["category"] == c)} for c in cats}
    return {
        "model": run.model, "n": len(answerable), "questions": len(rows),
        "f1": _mean(r["f1"] for r in answerable), "exact": _mean(r["exact"] for r in answerable),
        "exact_n": sum(r["exact"] is not None for r in answerable),
        "adversarial_abstained": _mean(float(r["abstained"]) for r in rows if r["category"] == ADVERSARIAL),
        "by_category": by_cat, "load_s": round(run.load_s, 2),
        "first_token_ms": {"p50": _quantile((r["first_token_ms"] for r in rows), 0.5),
                           "p95": _quantile((r["first_token_ms"] for r in rows), 0.95)},
        "tokens_per_s": {"p50": _quantile((r["tokens_per_s"] for r in rows), 0.5),
                         "p95": _quantile((r["tokens_per_s"] for r in rows), 0.95)},
        "latency_ms": {"p50": _quantile((r["latency_ms"] for r in rows), 0.5),
                       "p95": _quantile((r["latency_ms"] for r in rows), 0.95)},
    }


def compare(first: ModelRun, second: ModelRun) -> dict[str, Any]:
    """The paired difference (second − first) of F1 and exact match over the questions both scored."""
    out: dict[str, Any] = {"a": first.model, "b": second.model}
    for metric in ("f1", "exact"):
        pairs = [(x[metric], y[metric]) for x, y in zip(first.rows, second.rows)
                 if x[metric] is not None and y[metric] is not None]
        if pairs:
            out[metric] = {k: round(v, 4) for k, v in
                           paired_bootstrap([a for a, _ in pairs], [b for _, b in pairs]).items()}
            out[metric]["n"] = len(pairs)
    return out


def report(runs: Sequence[ModelRun], asked: Sequence[Asked], budget: int, cache: AnswerCache) -> dict[str, Any]:
    """The JSON report: the first model's figures at the top (``model``, ``n``, ``f1``, ``exact``),
    every model under ``runs``, and the paired differences against the first under ``paired``."""
    summaries = [summarize_run(r) for r in runs]
    return {**summaries[0], "budget": budget, "context_tokens_mean": _mean(float(a.context_tokens) for a in asked),
            "runs": summaries, "paired": [compare(runs[0], r) for r in runs[1:]],
            "cache": {"hits": cache.hits, "misses": cache.misses},
            "answers": {r.model: r.rows for r in runs}}


def _fmt(value: float | None, digits: int = 3) -> str:
    return "  n/a" if value is None else f"{value:.{digits}f}"


def format_answer_report(rep: dict[str, Any]) -> str:
    """The table: per model, F1 / exact per category, adversarial abstention, latency; the paired CIs."""
    lines = [f"answers from PCM's context at budget {rep['budget']} (mean context {rep['context_tokens_mean']} "
             "tokens); F1 over answerable questions, exact over date/number answers"]
    for s in rep["runs"]:
        lines.append(f"{s['model']}: n={s['n']} F1 {_fmt(s['f1'])}  exact {_fmt(s['exact'])} (n={s['exact_n']})  "
                     f"adversarial abstained {_fmt(s['adversarial_abstained'])}  first token p50 "
                     f"{s['first_token_ms']['p50']} ms p95 {s['first_token_ms']['p95']} ms  tokens/s p50 "
                     f"{s['tokens_per_s']['p50']}  answer p50 {s['latency_ms']['p50']} ms")
        for cat, row in s["by_category"].items():
            lines.append(f"  {cat:<12} n={row['n']:<4} F1 {_fmt(row['f1'])}  exact {_fmt(row['exact'])}  "
                         f"abstained {_fmt(row['abstained'])}")
    for pair in rep["paired"]:
        for metric in ("f1", "exact"):
            if metric in pair:
                d = pair[metric]
                lines.append(f"{pair['b']} − {pair['a']} {metric}: {d['diff']:+.3f} (95% CI {d['low']:+.3f} … "
                             f"{d['high']:+.3f}, n={d['n']}, b better in {d['p_b_better']:.0%} of resamples)")
    lines.append(f"answer cache: {rep['cache']['hits']} hits, {rep['cache']['misses']} asked")
    return "\n".join(lines)


def default_cache_path() -> Path:
    """Where answers are cached between runs: the user cache folder (never the data folder)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("pcm-canvas", appauthor=False)) / "eval-answers.jsonl"


def timed_load(load: Callable[[], ChatModel]) -> tuple[ChatModel, float]:
    started = time.perf_counter()
    model = load()
    return model, time.perf_counter() - started
