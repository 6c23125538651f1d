"""The optional LLM signal of intent inference: the JSON schema, the prompt and normalisation.

``intent_messages`` builds the chat prompt that asks the local model for JSON matching
``INTENT_JSON_SCHEMA``; ``normalize_llm_intent`` turns whatever comes back into usable fields
(labels mapped through synonyms or dropped, wrong types ignored, strings trimmed) plus a list of
the problems found, one small step per kind of field; ``read_llm_output`` says how the output of
a turn fared (skipped, ok, invalid, late, error) and returns its fields. Nothing here raises: a
bad answer only degrades the LLM signal. Pure and deterministic.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from app.core.intent.model import DONE_STATUSES, MODES, TASK_TYPES, IntentContext, LlmReport, Risk, Urgency, r4
from app.core.text.words import dedup_texts

_STR_LIST = {"type": "array", "items": {"type": "string"}, "maxItems": 6}
INTENT_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": list(MODES)},
        "task_type": {"type": "string", "enum": list(TASK_TYPES)},
        "goal": {"type": "string"},
        "acceptance": _STR_LIST,
        "constraints": _STR_LIST,
        "prohibitions": _STR_LIST,
        "entities": _STR_LIST,
        "plan_hints": _STR_LIST,
        "sub_questions": _STR_LIST,
        "evidence": _STR_LIST,
        "uncertainty_reasons": _STR_LIST,
        "urgency": {"type": "string", "enum": [u.value for u in Urgency]},
        "risk": {"type": "string", "enum": [r.value for r in Risk]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "needs_clarification": {"type": "boolean"},
    },
    "required": ["mode", "task_type", "goal", "confidence"],
    "additionalProperties": False,
}
_LIST_FIELDS = ("acceptance", "constraints", "prohibitions", "entities", "plan_hints", "sub_questions",
                "evidence", "uncertainty_reasons")
_KEY_ALIASES = {"intent": "mode", "tasktype": "task_type", "type": "task_type", "planhints": "plan_hints",
                "subquestions": "sub_questions", "uncertaintyreasons": "uncertainty_reasons",
                "needsclarification": "needs_clarification", "evidence_spans": "evidence"}
_SYNONYMS: dict[str, dict[str, str]] = {
    "mode": {"question": "qa", "q&a": "qa", "qna": "qa", "answer": "qa", "query": "qa", "chat": "qa",
             "command": "task", "instruction": "task", "execute": "task", "execution": "task",
             "task_execution": "task", "action": "task", "request": "task", "interruption": "interrupt",
             "cancel": "interrupt", "stop": "interrupt", "amend": "interrupt", "notification": "push",
             "proactive": "push", "event": "push", "clarification": "clarify", "ambiguous": "clarify",
             "unclear": "clarify"},
    "task_type": {"search": "retrieval", "lookup": "retrieval", "question_answering": "retrieval",
                  "qa": "retrieval", "recall": "retrieval", "information": "retrieval", "write": "generation",
                  "writing": "generation", "summarization": "generation", "summary": "generation",
                  "code_generation": "generation", "creative": "generation", "translation": "generation",
                  "edit": "change", "modify": "change", "modification": "change", "code_change": "change",
                  "update": "change", "refactor": "change", "debug": "diagnostic", "debugging": "diagnostic",
                  "diagnosis": "diagnostic", "troubleshooting": "diagnostic", "plan": "planning",
                  "schedule": "planning", "scheduling": "planning"},
    "urgency": {"medium": "normal", "urgent": "high", "critical": "high", "none": "low"},
    "risk": {"normal": "medium", "moderate": "medium", "none": "low", "critical": "high"},
}
_ALLOWED = {"mode": MODES, "task_type": TASK_TYPES, "urgency": tuple(u.value for u in Urgency),
            "risk": tuple(r.value for r in Risk)}


def _label_of(value: Any, fld: str) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace("-", "_").replace(" ", "_")
    return v if v in _ALLOWED[fld] else _SYNONYMS[fld].get(v)


def normalize_llm_intent(raw: Any, max_items: int = 12) -> tuple[dict[str, Any], list[str]]:
    """Normalise the model's JSON: map or drop unknown labels, ignore wrong types, trim strings.

    Returns (the usable fields, the problems found). Never raises; an unusable value gives ({}, [...]).
    """
    obj, problem = _as_object(raw)
    if obj is None:
        return {}, [problem]
    flat = _flatten(obj)
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key in sorted(flat):
        norm = _field_name(key)
        value, problem_ = _normalise_field(norm, flat[key], max_items)
        if problem_ is not None:
            problems.append(problem_)
        if value is not None:
            out[norm] = value
    return out, problems


def read_llm_output(ctx: IntentContext, max_items: int, reasons: list[str]) -> tuple[LlmReport, dict[str, Any]]:
    """Return how the optional LLM output of ``ctx`` fared and its usable fields. Never raises.

    A late, failed or unusable output adds an ``llm_*`` reason to ``reasons`` and gives no fields;
    no output at all is "skipped" (or "invalid" when the status claims success).
    """
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
    fields, problems = normalize_llm_intent(ctx.llm_output, max_items)
    if not any(k in fields for k in ("mode", "task_type", "goal")):
        detail = "; ".join(problems) or "no usable field"
        reasons.append(f"llm_invalid: {detail}")
        return LlmReport(status="invalid", detail=detail), {}
    return LlmReport(status="ok", detail="; ".join(problems)), fields


# --------------------------------------------------------------------------- normalisation steps

_WRAPPERS = ("intentstruct", "intent_struct")


def _as_object(raw: Any) -> tuple[dict[Any, Any] | None, str]:
    """Return (the JSON object in ``raw``, "") or (None, why it is not one); a string is parsed first."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None, "not JSON"
    if not isinstance(raw, dict):
        return None, f"expected an object, got {type(raw).__name__}"
    return raw, ""


def _flatten(raw: dict[Any, Any]) -> dict[str, Any]:
    """Return the string-keyed fields of ``raw``, those of a wrapper object ("intentStruct") first."""
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(key, str) and key.lower() in _WRAPPERS and isinstance(value, dict):
            flat.update({k: v for k, v in value.items() if isinstance(k, str)})
    flat.update({k: v for k, v in raw.items() if isinstance(k, str) and k.lower() not in _WRAPPERS})
    return flat


def _field_name(key: str) -> str:
    """Return the schema field a key names: lower-cased, with camelCase and alias spellings mapped."""
    norm = key.strip().lower()
    return _KEY_ALIASES.get(norm.replace("_", ""), _KEY_ALIASES.get(norm, norm))


def _normalise_field(norm: str, value: Any, max_items: int) -> tuple[Any, str | None]:
    """Return (the usable value or None, the problem found or None) for the field ``norm``."""
    if norm in _ALLOWED:
        label = _label_of(value, norm)
        return label, None if label is not None else f"{norm}: unknown label {str(value)[:40]!r}"
    if norm == "goal":
        if isinstance(value, str) and value.strip():
            return re.sub(r"\s+", " ", value).strip()[:240], None
        return None, "goal: not a non-empty string"
    if norm in _LIST_FIELDS:
        return _text_list(norm, value, max_items)
    if norm == "confidence":
        return _confidence(value)
    if norm == "needs_clarification":
        if isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true", None
        return None, "needs_clarification: not a boolean"
    return None, f"unknown field {norm!r}"


def _text_list(norm: str, value: Any, max_items: int) -> tuple[list[str] | None, str | None]:
    """Return (the non-empty strings of a list field, a problem when items were dropped or it is no list).

    A single string or ``{"span": ...}`` object counts as a one-item list.
    """
    items = [value] if isinstance(value, (str, dict)) else value if isinstance(value, list) else None
    if items is None:
        return None, f"{norm}: not a list"
    texts = [i.get("span", "") if isinstance(i, dict) else i for i in items]
    kept = [s for s in texts if isinstance(s, str) and s.strip()]
    problem = f"{norm}: dropped {len(texts) - len(kept)} non-string item(s)" if len(kept) < len(texts) else None
    return dedup_texts(kept, max_items), problem


def _confidence(value: Any) -> tuple[float | None, str | None]:
    """Return (the confidence clipped to [0, 1], None) or (None, the problem).

    An object of per-field numbers gives their mean; "high", "medium" and "low" give 0.85, 0.6, 0.3.
    """
    if isinstance(value, dict):
        nums = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        value = sum(nums) / len(nums) if nums else None
    if isinstance(value, str):
        value = {"high": 0.85, "medium": 0.6, "low": 0.3}.get(value.strip().lower(), value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return r4(min(1.0, max(0.0, float(value)))), None
    return None, "confidence: not a number"


def intent_messages(text: str, ctx: IntentContext | None = None) -> list[dict[str, str]]:
    """Build the chat prompt that asks the local model for ``INTENT_JSON_SCHEMA`` JSON."""
    ctx = ctx or IntentContext()
    system = (
        "You analyse one input for a context manager. Reply with one JSON object only.\n"
        "mode: qa (a question to answer), task (do, make or change something), interrupt (addresses a "
        "running task: stop, pause, amend it, ask its status), push (reacting to an environment event), "
        "clarify (too vague to act on).\n"
        "task_type: retrieval, generation, change, diagnostic or planning.\n"
        "goal: what the user wants now, one sentence. acceptance: what counts as done. constraints and "
        "prohibitions: only what the user said. entities: names, files, dates, quoted terms. "
        "sub_questions: the parts of a compound question. evidence: exact words of the input that support "
        "your answer. uncertainty_reasons: what is missing or ambiguous; never guess missing facts.\n"
        "confidence: 0 to 1."
    )
    lines = [f"Input: {text.strip() or '(no user text)'}"]
    running = [t for t in ctx.running_tasks if t.status.lower() not in DONE_STATUSES]
    if running:
        lines.append("Running tasks: " + "; ".join(f"{t.name} [{t.status}]" for t in running))
    if ctx.recent_turns:
        lines.append("Recent turns: " + " | ".join(f"({t.mode}) {t.text[:160]}" for t in ctx.recent_turns[-3:]))
    if ctx.profile.prohibitions:
        lines.append("User prohibitions: " + "; ".join(ctx.profile.prohibitions))
    if ctx.recent_env_events:
        events = ctx.recent_env_events[-5:]
        lines.append("Environment events: " + "; ".join(f"{e.kind}: {e.title or e.uri}" for e in events))
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]
