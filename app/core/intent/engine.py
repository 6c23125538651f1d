"""Structured intent by multi-signal fusion (seed 000 §3.4, §3.6.1; seed 001 §2.2).

``IntentEngine.infer(text, ctx)`` turns one event into an auditable :class:`Intent`: mode, task
type, goal, acceptance, constraints, prohibitions, entities, plan hints, evidence spans and a
confidence per field. Evidence comes from six signals, each recorded as ``SignalRecord`` rows:

* ``rules``      cue words and sentence form of the text (always on: the fast path),
* ``embedding``  cosine similarity of the query vector to labelled prototypes (when vectors exist),
* ``structure``  running tasks and recent turns (interruptions, follow-ups),
* ``profile``    the user's prohibitions and permissions (constraints, risk, conflicts),
* ``env``        recent environment events (push mode, entities),
* ``llm``        the local model's schema-constrained JSON, normalised; any failure only degrades.

Mode is hierarchical: the additive signals give a speech-act distribution, then ``structure``
moves a share of the question/command mass to ``interrupt`` when the input is addressed to a
running task. Confidence per field is ``sqrt(p1 * (p1 - p2))`` of the fused distribution, so a
close second place lowers it as much as a weak first place. Output is deterministic: fixed label
order, fixed tie-breaks, floats rounded to 4 places.

This module holds the weights, the fusion math, the prototype bank and the engine, whose
``infer`` reads one signal per method (``_rules_signal``, ``_embedding_signal``,
``_structure_signal``, ``_env_signal``, ``_llm_signal``), fuses and decides mode and task type,
and assembles the intent. The rest of the stage lives beside it:

* :mod:`app.core.intent.model`    enums, ``Intent``, ``IntentContext`` and the audit records,
* :mod:`app.core.intent.cues`     cue tables, ``analyse_text``, ``extract_entities``, context readers,
* :mod:`app.core.intent.decision` the trace of one inference, the signals' readings, and what is
  decided after fusion: goal, structured fields (with the ``profile`` signal), urgency, risk,
* :mod:`app.core.intent.llm`      ``INTENT_JSON_SCHEMA``, ``intent_messages``, ``normalize_llm_intent``,
  ``read_llm_output``,
* :mod:`app.core.intent.profile`  the user profile; word helpers are in :mod:`app.core.text.words`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from app.core.intent.cues import ENV_ALERT_RE, SAFE_SEND_RE, TextCues, analyse_text, extract_entities, target_task
from app.core.intent.decision import (
    EnvReading,
    InputReading,
    IntentFields,
    LlmReading,
    StructureReading,
    Trace,
    dedup_spans,
    goal_of,
    llm_goal,
    risk_of,
    structured_fields,
    urgency_of,
)
from app.core.intent.llm import read_llm_output
from app.core.intent.model import (
    CLARIFY_CODES,
    DONE_STATUSES,
    FIELD_LABELS,
    MODES,
    TASK_TYPES,
    EvidenceSpan,
    Intent,
    IntentConfidence,
    IntentContext,
    Mode,
    RecentTurn,
    SignalRecord,
    TaskType,
    r4,
)
from app.core.intent.profile import ProfileStatement, besides_statements, parse_profile_statements
from app.core.text.words import content_stems, dedup_texts, stem


class IntentWeights(BaseModel):
    """Signal weights and decision thresholds: strategy as data."""

    prior: float = 0.5
    rules: float = 2.0
    embedding: float = 1.0
    structure: float = 2.5
    env: float = 3.0
    llm: float = 2.0
    embed_temperature: float = 0.1
    clarify_mode_below: float = 0.25
    clarify_task_below: float = 0.12
    clarify_goal_below: float = 0.3
    confirm_high_risk: bool = True
    max_items: int = 12


DEFAULT_WEIGHTS = IntentWeights()

MODE_PRIOR = {"qa": 0.4, "task": 0.3, "interrupt": 0.1, "push": 0.05, "clarify": 0.15}
TASK_PRIOR = {"retrieval": 0.3, "generation": 0.2, "change": 0.2, "diagnostic": 0.15, "planning": 0.15}

# --------------------------------------------------------------------------- fusion math


def saturate(raw: float) -> float:
    """Map accumulated cue strength in [0, inf) to [0, 1): ``1 - exp(-raw)``."""
    return 1.0 - math.exp(-max(0.0, raw))


def cue_distribution(raw: Mapping[str, float], labels: Sequence[str]) -> tuple[float, dict[str, float]]:
    """Turn raw cue strengths into (strength, shares): shares ∝ raw, strength = saturate(total)."""
    vals = {label: max(0.0, raw.get(label, 0.0)) for label in labels}
    total = sum(vals.values())
    if total <= 0:
        return 0.0, {}
    return saturate(total), {label: v / total for label, v in vals.items() if v > 0}


def fuse(
    records: Sequence[SignalRecord], field_name: str, prior: Mapping[str, float], prior_weight: float
) -> dict[str, float]:
    """Fuse ``prior_weight × prior + Σ weight × score`` per label, normalised, in prior's order."""
    totals = {label: prior_weight * p for label, p in prior.items()}
    for rec in records:
        if rec.field == field_name and rec.label in totals:
            totals[rec.label] += rec.weight * rec.score
    s = sum(totals.values())
    if s <= 0:
        return {label: r4(1.0 / len(totals)) for label in totals}
    return {label: r4(v / s) for label, v in totals.items()}


def redirect(dist: Mapping[str, float], share: float, sources: Sequence[str], target: str) -> dict[str, float]:
    """Move ``share`` of each source label's probability to ``target`` (hierarchical mode)."""
    out = dict(dist)
    share = min(1.0, max(0.0, share))
    for src in sources:
        moved = out[src] * share
        out[src] -= moved
        out[target] += moved
    return {k: r4(v) for k, v in out.items()}


def decisiveness(dist: Mapping[str, float]) -> float:
    """Confidence of a distribution: ``sqrt(p1 × (p1 − p2))`` — top probability × margin."""
    ps = sorted(dist.values(), reverse=True)
    if not ps:
        return 0.0
    p1, p2 = ps[0], ps[1] if len(ps) > 1 else 0.0
    return r4(math.sqrt(max(0.0, p1 * (p1 - p2))))


def argmax(dist: Mapping[str, float]) -> str:
    """Return the label with the highest probability; ties go to the earlier label."""
    best, best_p = "", -1.0
    for label, p in dist.items():
        if p > best_p:
            best, best_p = label, p
    return best


# --------------------------------------------------------------------------- prototypes

PROTOTYPES: dict[str, dict[str, tuple[str, ...]]] = {
    "mode": {
        "qa": ("What is the difference between these two options?", "When did we last talk about this?",
               "Can you explain how this works?", "Who was responsible for that decision?"),
        "task": ("Write a short summary of the document.", "Please fix the failing function.",
                 "Create a checklist for the launch.", "Rename the variables and clean up the code."),
        "interrupt": ("Stop what you are doing.", "Wait, cancel that task.",
                      "While you're at it, also add a conclusion.", "How far along is the current job?"),
        "push": ("A watched file was modified.", "A new item arrived in the news feed.",
                 "The monitored value changed."),
        "clarify": ("Hmm.", "Do the thing.", "You know what I mean.", "That one."),
    },
    "task_type": {
        "retrieval": ("Find what we said about the budget.", "Look up the address in my notes.",
                      "What did she tell me last week?", "Show me the earlier results."),
        "generation": ("Write an email to the team.", "Draft a short story.",
                       "Summarize this article in three sentences.", "Translate the paragraph into French."),
        "change": ("Edit the introduction to be shorter.", "Refactor this function.",
                   "Replace the old value with the new one.", "Update the settings file."),
        "diagnostic": ("Why does the program crash with an error?", "Debug the failing test.",
                       "Something is broken, figure out what went wrong.", "Investigate why it is so slow."),
        "planning": ("Plan the next steps of the project.", "Make a schedule for next week.",
                     "Break the work down into milestones.", "How should we prioritize these tasks?"),
    },
}


class PrototypeBank:
    """Labelled prototype vectors per field; ``scores`` is a softmax over max-cosine per label."""

    def __init__(self, labels: Mapping[str, Sequence[str]] | None = None,
                 vectors: Mapping[str, np.ndarray] | None = None) -> None:
        self._labels: dict[str, list[str]] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._set(labels or {}, vectors or {})

    def _set(self, labels: Mapping[str, Sequence[str]], vectors: Mapping[str, np.ndarray]) -> None:
        """Hold the usable fields of ``vectors`` (rows normalised), labelled by ``labels``."""
        kept_labels: dict[str, list[str]] = {}
        kept: dict[str, np.ndarray] = {}
        for f, mat in vectors.items():
            m = np.asarray(mat, dtype=np.float64)
            rows = list(labels.get(f, []))
            if m.ndim != 2 or not m.size or m.shape[0] != len(rows):
                continue  # unusable field: no signal rather than an error
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            kept[f] = m / np.where(norms == 0, 1.0, norms)
            kept_labels[f] = rows
        self._labels = kept_labels  # first: ``scores`` reads the labels of the vectors it finds
        self._vectors = kept

    @classmethod
    def from_embed(cls, embed_fn: Callable[[list[str]], np.ndarray],
                   prototypes: Mapping[str, Mapping[str, Sequence[str]]] = PROTOTYPES) -> PrototypeBank:
        """Embed every prototype sentence once (call on the embed executor) and return the bank."""
        bank = cls()
        bank.fill(embed_fn, prototypes)
        return bank

    def fill(self, embed_fn: Callable[[list[str]], np.ndarray],
             prototypes: Mapping[str, Mapping[str, Sequence[str]]] = PROTOTYPES) -> None:
        """Embed every prototype sentence once (call on the embed executor) into this bank: an
        engine's bank is filled when the engine starts (until then it gives no signal)."""
        labels: dict[str, list[str]] = {}
        vectors: dict[str, np.ndarray] = {}
        for f, per_label in prototypes.items():
            rows = [(label, s) for label, sents in per_label.items() for s in sents]
            if not rows:
                continue
            labels[f] = [label for label, _ in rows]
            vectors[f] = np.asarray(embed_fn([s for _, s in rows]))
        self._set(labels, vectors)

    @classmethod
    def empty(cls) -> PrototypeBank:
        return cls()

    def is_empty(self) -> bool:
        return not any(m.size for m in self._vectors.values())

    def scores(self, query_vector: Sequence[float] | np.ndarray | None,
               temperature: float = 0.1) -> dict[str, dict[str, float]]:
        """Return ``{field: {label: p}}`` plus ``{field: {"_best": cosine}}`` strength; {} if unusable."""
        if query_vector is None:
            return {}
        q = np.asarray(query_vector, dtype=np.float64).ravel()
        qn = float(np.linalg.norm(q))
        if qn == 0 or not np.all(np.isfinite(q)):
            return {}
        out: dict[str, dict[str, float]] = {}
        for f, mat in self._vectors.items():
            if mat.shape[1] != q.shape[0]:
                continue
            sims = mat @ (q / qn)
            best: dict[str, float] = {}
            for label, s in zip(self._labels[f], sims.tolist(), strict=True):
                best[label] = max(best.get(label, -1.0), s)
            order = list(FIELD_LABELS.get(f, ())) or list(best)
            logits = np.array([best.get(label, -1.0) for label in order]) / max(temperature, 1e-6)
            exp = np.exp(logits - logits.max())
            probs = exp / exp.sum()
            dist = {label: r4(p) for label, p in zip(order, probs.tolist(), strict=True)}
            dist["_best"] = r4(max(best.values()))
            out[f] = dist
        return out


# --------------------------------------------------------------------------- engine


class IntentEngine:
    """Fuses rules, embeddings, structure, profile, environment and (optional) LLM JSON into an Intent.

    Pure and deterministic: the same text and context always give an identical ``Intent``.
    """

    def __init__(self, bank: PrototypeBank | None = None, weights: IntentWeights = DEFAULT_WEIGHTS) -> None:
        self.bank = bank
        self.weights = weights

    def read(self, text: str) -> InputReading:
        """What the rules read from ``text`` alone (the fast path): read once per input and given
        to every inference about it."""
        text = re.sub(r"\s+", " ", (text or "").replace("\u2019", "'")).strip()
        cues = analyse_text(text)
        trace = Trace(spans=list(cues.spans), hints=list(cues.time_hints))
        statements = self._rules_signal(text, cues, trace)
        return InputReading(text=text, cues=cues, statements=tuple(statements), records=tuple(trace.records),
                            spans=tuple(trace.spans), hints=tuple(trace.hints))

    def infer(self, text: str | InputReading, ctx: IntentContext | None = None) -> Intent:
        """Return the structured intent of ``text`` or of its ``read`` (may be empty: an env event).

        The signals add their evidence to one trace in a fixed order (rules, embedding, structure,
        env, llm); the fused distributions decide mode and task type; then come the goal, the
        structured fields with the profile signal, urgency, risk and the clarification reasons.
        """
        ctx = ctx or IntentContext()
        w = self.weights
        reading = text if isinstance(text, InputReading) else self.read(text)
        text, cues, statements = reading.text, reading.cues, list(reading.statements)
        trace = Trace(records=list(reading.records), spans=list(reading.spans), hints=list(reading.hints))
        self._embedding_signal(text, ctx, trace)
        structure = self._structure_signal(text, cues, ctx, trace)
        env = self._env_signal(text, ctx, trace)
        if not text and not env.trigger:
            trace.rec("rules", "mode", "clarify", w.rules, 1.0)
            trace.reasons.append("empty_input: no text and no environment event")
        llm = self._llm_signal(ctx, cues, trace)
        mode_dist, task_dist = self._fuse(trace.records, structure.share)
        mode, task_type = Mode(argmax(mode_dist)), TaskType(argmax(task_dist))
        if mode == Mode.INTERRUPT and structure.target is not None:
            trace.hints.append(f"target_task:{structure.target.task_id}")
        goal, goal_conf, entities = goal_of(text, cues, mode, statements, structure, env, trace)
        goal, goal_conf = llm_goal(goal, goal_conf, llm)
        fields = structured_fields(text, ctx.profile, entities, llm, trace)
        acting = mode in (Mode.TASK, Mode.INTERRUPT) and not statements
        risk_words = [] if SAFE_SEND_RE.search(text) else cues.risk_words
        conf = IntentConfidence(mode=decisiveness(mode_dist), task_type=decisiveness(task_dist), goal=r4(goal_conf))
        self._clarity_reasons(text, mode, mode_dist, conf, goal_conf, cues, env, trace)
        self._action_reasons(mode, task_type, acting, risk_words, structure, fields, llm, trace)
        reasons = dedup_texts(trace.reasons, 3 * w.max_items)
        return Intent(
            text=text, mode=mode, task_type=task_type, goal=goal,
            acceptance=dedup_texts(fields.acceptance, w.max_items),
            constraints=dedup_texts(fields.constraints, w.max_items),
            prohibitions=dedup_texts(fields.prohibitions, w.max_items),
            entities=dedup_texts(fields.entities + env.entities, w.max_items),
            plan_hints=dedup_texts(trace.hints, 2 * w.max_items), evidence_spans=dedup_spans(trace.spans),
            uncertainty_reasons=reasons, urgency=urgency_of(cues, env, llm),
            risk=risk_of(task_type, acting, risk_words, fields, llm), confidence=conf,
            needs_clarification=any(r.split(":", 1)[0] in CLARIFY_CODES for r in reasons),
            sub_questions=dedup_texts(fields.sub_questions, w.max_items),
            dependence=r4(cues.dependence), topic_shift=r4(cues.topic_shift),
            distribution={"mode": mode_dist, "task_type": task_dist}, signals=trace.records, llm=llm.report,
        )

    # ----------------------------------------------------------------------- the signals

    def _rules_signal(self, text: str, cues: TextCues, trace: Trace) -> list[ProfileStatement]:
        """Record the text's cue shares (their total sets the weight); return its profile statements.

        A statement such as "never X" or "I prefer X" is an instruction about how to work: it adds
        a ``profile_update`` hint and, when the input says nothing else, task cue strength (to
        ``cues`` itself); beside a question or a request, the mode cues are that part's alone.
        """
        statements = parse_profile_statements(text)
        if statements:
            rest = besides_statements(text)
            if rest:  # the statements ride along a question or a request: that one decides the mode
                cues.mode.clear()
                cues.mode.update(analyse_text(rest).mode)
            else:
                cues.add(cues.mode, "task", 1.2, statements[0].span, "mode")
            trace.hints.extend(f"profile_update:{s.kind}" for s in statements)
        for fld, table in (("mode", cues.mode), ("task_type", cues.task)):
            strength, shares = cue_distribution(table, FIELD_LABELS[fld])
            for label, share in shares.items():
                trace.rec("rules", fld, label, self.weights.rules * strength, share)
        return statements

    def _embedding_signal(self, text: str, ctx: IntentContext, trace: Trace) -> None:
        """Record the query vector's similarity to the labelled prototypes (nothing without both)."""
        if self.bank is None or not text or ctx.query_vector is None:
            return
        for fld, dist in self.bank.scores(ctx.query_vector, self.weights.embed_temperature).items():
            strength = min(1.0, max(0.0, dist.get("_best", 0.0)))
            for label in FIELD_LABELS.get(fld, ()):
                trace.rec("embedding", fld, label, self.weights.embedding * strength, dist.get(label, 0.0))

    def _structure_signal(self, text: str, cues: TextCues, ctx: IntentContext, trace: Trace) -> StructureReading:
        """Record follow-ups and running-task interruptions; return what the structure says."""
        running = [t for t in ctx.running_tasks if t.status.lower() not in DONE_STATUSES]
        head = stem(cues.body_words[0]) if cues.body_words else ""
        target, ambiguous, named = target_task(text, running, ctx.focus_task, head)
        followed = self._follow_up_signal(text, cues, ctx, bool(running), trace)
        share = _interrupt_signal(text, cues, bool(running), named, trace)
        return StructureReading(running=running, target=target, ambiguous=ambiguous, followed=followed, share=share)

    def _follow_up_signal(self, text: str, cues: TextCues, ctx: IntentContext, running: bool,
                          trace: Trace) -> RecentTurn | None:
        """Record a follow-up ("and Berlin?"): the last qa/task mode and the previous turn's task type.

        Returns the previous turn when the input follows it up, else None.
        """
        if not ctx.recent_turns or not text or not (cues.follow_up or (cues.control == "resume" and not running)):
            return None
        prev = ctx.recent_turns[-1]
        w = self.weights
        prev_mode = next((t.mode for t in reversed(ctx.recent_turns) if t.mode in ("qa", "task")), "qa")
        trace.rec("structure", "mode", prev_mode, w.structure, 1.0)
        strength, shares = cue_distribution(analyse_text(prev.text).task, TASK_TYPES)
        for label, share in shares.items():
            trace.rec("structure", "task_type", label, 0.8 * w.structure * strength, share)
        trace.hints.append("follow_up")
        trace.spans.append(EvidenceSpan(source="history", span=prev.text[:120], field="goal"))
        return prev

    def _env_signal(self, text: str, ctx: IntentContext, trace: Trace) -> EnvReading:
        """Record a push when the turn reacts to environment events; note events the text mentions.

        Returns the events, whether they trigger the turn, and the entities they contribute.
        """
        w = self.weights
        events = list(ctx.recent_env_events)
        trigger = ctx.trigger == "env" or (not text and bool(events))
        entities: list[str] = []
        if trigger:
            trace.rec("env", "mode", "push", w.env, 1.0)
            titles = " ".join(e.title for e in events)
            trace.rec("env", "task_type", "diagnostic" if ENV_ALERT_RE.search(titles) else "retrieval", w.env, 1.0)
            entities = [e.uri for e in events[-5:] if e.uri] + extract_entities(titles)
            trace.spans.extend(EvidenceSpan(source="env", span=(e.title or e.uri)[:120], field="goal")
                               for e in events[-3:])
            trace.hints.append("include_env_events")
        elif events and text:
            stems = set(content_stems(text))
            hits = [e for e in events if stems & set(content_stems(e.title + " " + e.uri))]
            if hits:
                trace.hints.append("include_env_events")
                entities = [e.uri for e in hits if e.uri] + extract_entities(" ".join(e.title for e in hits))
        return EnvReading(events=events, trigger=trigger, entities=entities)

    def _llm_signal(self, ctx: IntentContext, cues: TextCues, trace: Trace) -> LlmReading:
        """Record the LLM's mode and task type, and a conflict with strong rule cues; return its fields."""
        report, fields = read_llm_output(ctx, self.weights.max_items, trace.reasons)
        conf = float(fields.get("confidence", 0.6))
        for fld in ("mode", "task_type"):
            if fld not in fields:
                continue
            trace.rec("llm", fld, fields[fld], self.weights.llm * (0.5 + 0.5 * conf), 1.0)
            rule_table = cues.mode if fld == "mode" else cues.task
            if rule_table:
                rule_top = argmax({k: rule_table.get(k, 0.0) for k in FIELD_LABELS[fld]})
                if rule_top != fields[fld] and saturate(rule_table[rule_top]) >= 0.6:
                    trace.reasons.append(f"signal_conflict: {fld} rules={rule_top} llm={fields[fld]}")
        return LlmReading(report=report, fields=fields, conf=conf)

    # ----------------------------------------------------------------------- fusion and decision

    def _fuse(self, records: Sequence[SignalRecord], share: float) -> tuple[dict[str, float], dict[str, float]]:
        """Return the fused (mode, task type) distributions; ``share`` of qa/task moves to interrupt."""
        w = self.weights
        mode_dist = fuse(records, "mode", MODE_PRIOR, w.prior)
        if share > 0:
            mode_dist = redirect(mode_dist, share, ("qa", "task"), "interrupt")
        return mode_dist, fuse(records, "task_type", TASK_PRIOR, w.prior)

    def _clarity_reasons(self, text: str, mode: Mode, mode_dist: Mapping[str, float], conf: IntentConfidence,
                         goal_conf: float, cues: TextCues, env: EnvReading, trace: Trace) -> None:
        """Add the reasons of an unclear input: nothing to act on, low mode/task/goal confidence."""
        w = self.weights
        if mode == Mode.CLARIFY and not any(r.startswith("empty_input") for r in trace.reasons):
            trace.reasons.append(f"vague_goal: '{text[:60]}' names nothing to act on")
        if conf.mode < w.clarify_mode_below:
            top2 = sorted(mode_dist, key=lambda k: (-mode_dist[k], MODES.index(k)))[:2]
            trace.reasons.append(f"low_mode_confidence: {top2[0]} vs {top2[1]} ({conf.mode})")
        if mode == Mode.TASK and conf.task_type < w.clarify_task_below:
            trace.reasons.append(f"low_task_confidence: {conf.task_type}")
        control_goal = mode == Mode.INTERRUPT and cues.control is not None
        if goal_conf < w.clarify_goal_below and mode != Mode.CLARIFY and not env.trigger and not control_goal:
            trace.reasons.append(f"vague_goal: goal confidence {conf.goal}")

    def _action_reasons(self, mode: Mode, task_type: TaskType, acting: bool, risk_words: Sequence[str],
                        structure: StructureReading, fields: IntentFields, llm: LlmReading, trace: Trace) -> None:
        """Add the reasons to check before acting: risk, an ambiguous task, the LLM's flag, no criterion."""
        if self.weights.confirm_high_risk and acting and risk_words and not fields.permitted:
            trace.reasons.append(f"high_risk_action: {', '.join(risk_words)}")
        if mode == Mode.INTERRUPT and structure.ambiguous:
            trace.reasons.append(f"ambiguous_task: {len(structure.running)} running tasks, none named")
        if llm.fields.get("needs_clarification") is True:
            trace.reasons.append("llm_flagged: the model asked for clarification")
        if acting and task_type in (TaskType.CHANGE, TaskType.GENERATION) and not fields.acceptance:
            trace.reasons.append("no_acceptance: no success criterion stated")


# --------------------------------------------------------------------------- structure signal helper


def _interrupt_signal(text: str, cues: TextCues, running: bool, named: bool, trace: Trace) -> float:
    """Record how strongly the input addresses a running task; return the share moved to interrupt.

    Control words, amendments and status questions address the task; another question does when
    it names the task or points back at it, else it is its own Q&A stream. 0.0 with no task running.
    """
    if not (running and text):
        return 0.0
    if cues.control:
        share = 0.9
        trace.hints.append(f"control:{cues.control}")
    elif cues.amend:
        share = 0.85
        trace.hints.append("amend_running_task")
    elif cues.status_query:
        share = 0.8
        trace.hints.append("status_query")
    elif cues.question:
        share = 0.8 if named else 0.55 if cues.refers_back else 0.25
    else:
        share = 0.6 if named else 0.2
    trace.rec("structure", "mode", "interrupt", share, 1.0)
    return share


