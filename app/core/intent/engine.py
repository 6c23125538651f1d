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

This module holds the weights, the fusion math, the prototype bank and the engine; the rest of
the stage lives beside it:

* :mod:`app.core.intent.model`  enums, ``Intent``, ``IntentContext`` and the audit records,
* :mod:`app.core.intent.cues`   cue tables, ``analyse_text``, ``extract_entities``, context readers,
* :mod:`app.core.intent.llm`    ``INTENT_JSON_SCHEMA``, ``intent_messages``, ``normalize_llm_intent``,
* :mod:`app.core.intent.profile` the user profile; word helpers are in :mod:`app.core.text`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from app.core.intent.cues import (
    ACCEPT_RE,
    CONSTRAINT_RE,
    ENV_ALERT_RE,
    PROHIB_RE,
    SAFE_SEND_RE,
    analyse_text,
    clean_goal,
    env_goal,
    extract_entities,
    target_task,
)
from app.core.intent.llm import normalize_llm_intent
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
    LlmReport,
    Mode,
    Risk,
    SignalRecord,
    TaskType,
    Urgency,
    r4,
)
from app.core.intent.profile import parse_profile_statements
from app.core.text import content_stems, dedup_texts, split_sub_questions, stem, tokenize


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
_LEVEL = {"low": 0, "normal": 1, "medium": 1, "high": 2}

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
        for f, mat in (vectors or {}).items():
            m = np.asarray(mat, dtype=np.float64)
            rows = list((labels or {}).get(f, []))
            if m.ndim != 2 or not m.size or m.shape[0] != len(rows):
                continue  # unusable field: no signal rather than an error
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            self._vectors[f] = m / np.where(norms == 0, 1.0, norms)
            self._labels[f] = rows

    @classmethod
    def from_embed(cls, embed_fn: Callable[[list[str]], np.ndarray],
                   prototypes: Mapping[str, Mapping[str, Sequence[str]]] = PROTOTYPES) -> PrototypeBank:
        """Embed every prototype sentence once (call on the embed executor) and return the bank."""
        labels: dict[str, list[str]] = {}
        vectors: dict[str, np.ndarray] = {}
        for f, per_label in prototypes.items():
            rows = [(label, s) for label, sents in per_label.items() for s in sents]
            if not rows:
                continue
            labels[f] = [label for label, _ in rows]
            vectors[f] = np.asarray(embed_fn([s for _, s in rows]))
        return cls(labels, vectors)

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

    def infer(self, text: str, ctx: IntentContext | None = None) -> Intent:
        """Return the structured intent of ``text`` (may be empty for an environment event)."""
        ctx = ctx or IntentContext()
        w = self.weights
        text = re.sub(r"\s+", " ", (text or "").replace("\u2019", "'")).strip()
        cues = analyse_text(text)
        records: list[SignalRecord] = []
        spans = list(cues.spans)
        reasons: list[str] = []
        hints: list[str] = list(cues.time_hints)

        def rec(name: str, fld: str, label: str, weight: float, score: float) -> None:
            records.append(SignalRecord(name=name, field=fld, label=label, weight=r4(weight), score=r4(score)))

        # (a) rules: the cue shares form the distribution, their total sets the weight
        statements = parse_profile_statements(text)
        if statements:  # "never X" / "I prefer X": an instruction about how to work
            cues.add(cues.mode, "task", 1.2, statements[0].span, "mode")
            hints.extend(f"profile_update:{s.kind}" for s in statements)
        for fld, table in (("mode", cues.mode), ("task_type", cues.task)):
            strength, shares = cue_distribution(table, FIELD_LABELS[fld])
            for label, share_ in shares.items():
                rec("rules", fld, label, w.rules * strength, share_)
        # (b) embedding similarity to prototypes
        if self.bank is not None and text and ctx.query_vector is not None:
            for fld, dist in self.bank.scores(ctx.query_vector, w.embed_temperature).items():
                strength = min(1.0, max(0.0, dist.get("_best", 0.0)))
                for label in FIELD_LABELS.get(fld, ()):
                    rec("embedding", fld, label, w.embedding * strength, dist.get(label, 0.0))
        # (c) interaction structure: follow-ups and running tasks
        running = [t for t in ctx.running_tasks if t.status.lower() not in DONE_STATUSES]
        head = stem(tokenize(cues.body)[0]) if tokenize(cues.body) else ""
        target, ambiguous, named = target_task(text, running, ctx.focus_task, head)
        prev = ctx.recent_turns[-1] if ctx.recent_turns else None
        follow_up = prev is not None and bool(text) and (
            cues.follow_up or (cues.control == "resume" and not running))
        if follow_up and prev is not None:
            prev_mode = next((t.mode for t in reversed(ctx.recent_turns) if t.mode in ("qa", "task")), "qa")
            rec("structure", "mode", prev_mode, w.structure, 1.0)
            strength, shares = cue_distribution(analyse_text(prev.text).task, TASK_TYPES)
            for label, share_ in shares.items():
                rec("structure", "task_type", label, 0.8 * w.structure * strength, share_)
            hints.append("follow_up")
            spans.append(EvidenceSpan(source="history", span=prev.text[:120], field="goal"))
        share = 0.0
        if running and text:
            if cues.control:
                share = 0.9
                hints.append(f"control:{cues.control}")
            elif cues.amend:
                share = 0.85
                hints.append("amend_running_task")
            elif cues.status_query:
                share = 0.8
                hints.append("status_query")
            elif cues.question:  # about the task when it names it or points back at it;
                share = 0.8 if named else 0.55 if cues.refers_back else 0.25  # else its own Q&A stream
            else:
                share = 0.6 if named else 0.2
            rec("structure", "mode", "interrupt", share, 1.0)
        # (e) environment
        events = list(ctx.recent_env_events)
        env_trigger = ctx.trigger == "env" or (not text and bool(events))
        env_entities: list[str] = []
        if env_trigger:
            rec("env", "mode", "push", w.env, 1.0)
            titles = " ".join(e.title for e in events)
            rec("env", "task_type", "diagnostic" if ENV_ALERT_RE.search(titles) else "retrieval", w.env, 1.0)
            env_entities = [e.uri for e in events[-5:] if e.uri] + extract_entities(titles)
            spans.extend(EvidenceSpan(source="env", span=(e.title or e.uri)[:120], field="goal") for e in events[-3:])
            hints.append("include_env_events")
        elif events and text:
            stems = set(content_stems(text))
            hits = [e for e in events if stems & set(content_stems(e.title + " " + e.uri))]
            if hits:
                hints.append("include_env_events")
                env_entities = [e.uri for e in hits if e.uri] + extract_entities(" ".join(e.title for e in hits))
        if not text and not env_trigger:
            rec("rules", "mode", "clarify", w.rules, 1.0)
            reasons.append("empty_input: no text and no environment event")
        # (f) the LLM's JSON, normalised; failure only degrades
        report, llm_fields = self._llm_signal(ctx, reasons)
        llm_conf = float(llm_fields.get("confidence", 0.6))
        for fld in ("mode", "task_type"):
            if fld in llm_fields:
                rec("llm", fld, llm_fields[fld], w.llm * (0.5 + 0.5 * llm_conf), 1.0)
                rule_table = cues.mode if fld == "mode" else cues.task
                if rule_table:
                    rule_top = argmax({k: rule_table.get(k, 0.0) for k in FIELD_LABELS[fld]})
                    if rule_top != llm_fields[fld] and saturate(rule_table[rule_top]) >= 0.6:
                        reasons.append(f"signal_conflict: {fld} rules={rule_top} llm={llm_fields[fld]}")
        # fusion
        mode_dist = fuse(records, "mode", MODE_PRIOR, w.prior)
        if share > 0:
            mode_dist = redirect(mode_dist, share, ("qa", "task"), "interrupt")
        task_dist = fuse(records, "task_type", TASK_PRIOR, w.prior)
        mode, task_type = Mode(argmax(mode_dist)), TaskType(argmax(task_dist))
        if mode == Mode.INTERRUPT and target is not None:
            hints.append(f"target_task:{target.task_id}")
        # goal and its confidence
        own_stems = content_stems(cues.body)
        entities = extract_entities(text)
        goal = clean_goal(cues.body)
        goal_conf = min(1.0, (len(own_stems) + 0.5 * len(entities)) / 4.0) * (0.4 if cues.vague else 1.0)
        if env_trigger:
            goal, goal_conf = env_goal(events) or goal, 0.8 if events else 0.3
        elif mode == Mode.INTERRUPT and cues.control:
            goal = f"{cues.control} the running task" + (f" '{target.name}'" if target else "")
            goal_conf = 0.9 if target else 0.5
        elif follow_up and prev is not None:
            goal = f"{goal} (follow-up to: {clean_goal(prev.text)[:160]})"
            goal_conf = max(goal_conf, 0.4 + 0.4 * min(1.0, len(content_stems(prev.text)) / 4.0))
            entities = entities + extract_entities(prev.text)
        elif cues.ack:
            goal, goal_conf = "acknowledge the reply", 0.7
        elif statements:
            goal = "remember: " + "; ".join(f"{s.kind} {s.text}" for s in statements)
            goal_conf = 0.8
        if goal and not env_trigger:
            spans.append(EvidenceSpan(span=cues.body[:200], field="goal"))
        if "goal" in llm_fields:
            goal = llm_fields["goal"]
            llm_goal = min(1.0, len(content_stems(goal)) / 4.0) * (0.5 + 0.5 * llm_conf)
            goal_conf = max(goal_conf, llm_goal)
        # structured fields from the text, the profile and the LLM
        acceptance = [m.group("x") for m in ACCEPT_RE.finditer(text)]
        constraints = [m.group("x") for m in CONSTRAINT_RE.finditer(text)]
        prohibitions = [m.group("x") for m in PROHIB_RE.finditer(text)]
        for fld, found in (("acceptance", acceptance), ("constraints", constraints), ("prohibitions", prohibitions)):
            spans.extend(EvidenceSpan(span=x.strip(), field=fld) for x in found)
        profile = ctx.profile
        prohibitions += profile.prohibitions
        constraints += [f"never {p}" for p in profile.prohibitions]
        hints += [f"prefer:{p}" for p in profile.preferences]
        conflicts = profile.prohibition_hits(text) if text else []
        permitted = profile.permission_hits(text) if text else []
        for hit in conflicts:
            rec("profile", "risk", "high", 1.0, 1.0)
            reasons.append(f"prohibition_conflict: never {hit}")
            spans.append(EvidenceSpan(source="profile", span=hit, field="prohibitions"))
        hints += [f"permitted:{p}" for p in permitted]
        if permitted:
            rec("profile", "risk", "medium", 1.0, 1.0)
        sub_questions = split_sub_questions(text)
        if sub_questions:
            hints.append(f"decompose:{len(sub_questions)}")
        for fld, target_list in (("acceptance", acceptance), ("constraints", constraints),
                                 ("prohibitions", prohibitions), ("entities", entities),
                                 ("plan_hints", hints), ("sub_questions", sub_questions)):
            target_list.extend(llm_fields.get(fld, []) if fld != "sub_questions" or not sub_questions else [])
        low = text.lower()
        spans.extend(EvidenceSpan(source="llm", span=s, field="llm") for s in llm_fields.get("evidence", [])
                     if s.lower() in low)
        reasons.extend(f"llm: {r}" for r in llm_fields.get("uncertainty_reasons", []))
        entities = entities + env_entities
        # urgency and risk
        urgency = cues.urgency
        if env_trigger and ENV_ALERT_RE.search(" ".join(e.title for e in events)):
            urgency = Urgency.HIGH
        if urgency == Urgency.NORMAL and "urgency" in llm_fields:
            urgency = Urgency(llm_fields["urgency"])
        acting = mode in (Mode.TASK, Mode.INTERRUPT) and not statements
        risk_words = [] if SAFE_SEND_RE.search(text) else cues.risk_words
        risk = Risk.MEDIUM if acting and task_type == TaskType.CHANGE else Risk.LOW
        if risk_words:
            risk = Risk.HIGH if acting else Risk.MEDIUM
            if permitted and risk == Risk.HIGH:
                risk = Risk.MEDIUM
        if conflicts:
            risk = Risk.HIGH
        if "risk" in llm_fields and _LEVEL[llm_fields["risk"]] > _LEVEL[risk.value]:
            risk = Risk(llm_fields["risk"])
        # confidence decomposition and clarification triggers
        conf = IntentConfidence(mode=decisiveness(mode_dist), task_type=decisiveness(task_dist), goal=r4(goal_conf))
        top2 = sorted(mode_dist, key=lambda k: (-mode_dist[k], MODES.index(k)))[:2]
        if mode == Mode.CLARIFY and not any(r.startswith("empty_input") for r in reasons):
            reasons.append(f"vague_goal: '{text[:60]}' names nothing to act on")
        if conf.mode < w.clarify_mode_below:
            reasons.append(f"low_mode_confidence: {top2[0]} vs {top2[1]} ({conf.mode})")
        if mode == Mode.TASK and conf.task_type < w.clarify_task_below:
            reasons.append(f"low_task_confidence: {conf.task_type}")
        control_goal = mode == Mode.INTERRUPT and cues.control is not None
        if goal_conf < w.clarify_goal_below and mode != Mode.CLARIFY and not env_trigger and not control_goal:
            reasons.append(f"vague_goal: goal confidence {conf.goal}")
        if w.confirm_high_risk and acting and risk_words and not permitted:
            reasons.append(f"high_risk_action: {', '.join(risk_words)}")
        if mode == Mode.INTERRUPT and ambiguous:
            reasons.append(f"ambiguous_task: {len(running)} running tasks, none named")
        if llm_fields.get("needs_clarification") is True:
            reasons.append("llm_flagged: the model asked for clarification")
        if acting and task_type in (TaskType.CHANGE, TaskType.GENERATION) and not acceptance:
            reasons.append("no_acceptance: no success criterion stated")
        reasons = dedup_texts(reasons, 3 * w.max_items)
        needs = any(r.split(":", 1)[0] in CLARIFY_CODES for r in reasons)
        return Intent(
            text=text, mode=mode, task_type=task_type, goal=goal,
            acceptance=dedup_texts(acceptance, w.max_items), constraints=dedup_texts(constraints, w.max_items),
            prohibitions=dedup_texts(prohibitions, w.max_items), entities=dedup_texts(entities, w.max_items),
            plan_hints=dedup_texts(hints, 2 * w.max_items), evidence_spans=_dedup_spans(spans),
            uncertainty_reasons=reasons, urgency=urgency, risk=risk, confidence=conf,
            needs_clarification=needs, sub_questions=dedup_texts(sub_questions, w.max_items),
            distribution={"mode": mode_dist, "task_type": task_dist}, signals=records, llm=report,
        )

    def _llm_signal(self, ctx: IntentContext, reasons: list[str]) -> tuple[LlmReport, dict[str, Any]]:
        """Normalise the optional LLM output; record how it fared. Never raises."""
        if ctx.llm_status in ("late", "error", "invalid"):
            detail = ctx.llm_detail or {"late": "arrived after the deadline", "error": "failed"}.get(
                ctx.llm_status, "unusable output")
            reasons.append(f"llm_{ctx.llm_status}: {detail}")
            return LlmReport(status=ctx.llm_status, detail=detail), {}
        if ctx.llm_output is None:
            if ctx.llm_status == "ok":
                reasons.append("llm_invalid: no output")
                return LlmReport(status="invalid", detail="no output"), {}
            return LlmReport(status="skipped"), {}
        fields, problems = normalize_llm_intent(ctx.llm_output, self.weights.max_items)
        if not any(k in fields for k in ("mode", "task_type", "goal")):
            detail = "; ".join(problems) or "no usable field"
            reasons.append(f"llm_invalid: {detail}")
            return LlmReport(status="invalid", detail=detail), {}
        return LlmReport(status="ok", detail="; ".join(problems)), fields


def _dedup_spans(spans: Sequence[EvidenceSpan]) -> list[EvidenceSpan]:
    seen: dict[tuple[str, str, str], EvidenceSpan] = {}
    for s in spans:
        if s.span:
            seen.setdefault((s.source, s.span.lower(), s.field), s)
    return list(seen.values())[:32]
