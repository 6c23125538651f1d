"""What the Plan and Intent tabs say first, in plain words: one or two sentences on what was
decided and why, before the fields themselves (which sit under a "Details" expander)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QToolButton, QVBoxLayout, QWidget

CHANNEL_WORDS = {
    "structured": "facts you stated", "vector": "similar passages", "fulltext": "matching words",
    "graph": "the branch this continues", "recent": "the latest turns", "memory": "saved notes",
}
MODE_WORDS = {
    "qa": "a question", "task": "a request to do something", "interrupt": "a change to running work",
    "push": "a change in the environment", "clarify": "an answer to a question the app asked",
}
TASK_WORDS = {
    "retrieval": "looking something up", "generation": "writing something", "change": "changing something",
    "diagnostic": "finding out what is wrong", "planning": "making a plan",
}
SEARCH_WORDS = {
    "tight": "a narrow search (the input looked specific)",
    "balanced": "an ordinary search",
    "wide": "a wide search (the input looked open or unsure)",
}


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def plan_sentence(plan: dict[str, Any], used_tokens: int) -> str:
    """What the plan decided, in plain words (HTML-free text)."""
    intent = plan.get("intent", {})
    retrieval, rerank, budget = plan.get("retrieval", {}), plan.get("rerank", {}), plan.get("budget", {})
    what = MODE_WORDS.get(str(intent.get("mode")), "an input")
    kind = TASK_WORDS.get(str(intent.get("task_type")), "")
    sources = [CHANNEL_WORDS.get(c, c) for c, n in (retrieval.get("channels") or {}).items() if n]
    parts = [f"This read as {what}{f' ({kind})' if kind else ''}, so the app ran "
             f"{SEARCH_WORDS.get(str(plan.get('strategy')), 'a search')}"
             + (f" over {_join(sources)}" if sources else "") + "."]
    span = retrieval.get("date_range")
    if span:
        parts.append(f"Only what dates from {span.get('start', '…')} to {span.get('end', '…')} was searched.")
    if rerank:
        parts.append(f"It kept at most {rerank.get('top_k', '?')} pieces of evidence and left out anything "
                     f"scoring under {float(rerank.get('relevance_threshold', 0)):.2f} for relevance.")
    if budget:
        parts.append(f"The context used {used_tokens:,} of {int(budget.get('total_tokens', 0)):,} tokens, "
                     f"keeping {int(budget.get('answer_reserve', 0)):,} for the answer.")
    if plan.get("needs_clarification"):
        parts.append(f"It asks you first: “{plan.get('clarification_question') or 'which one do you mean?'}”")
    tools = plan.get("tools") or {}
    offered = tools.get("allowed") or []
    if offered:
        parts.append(f"It offered the model {len(offered)} tool{'s' if len(offered) != 1 else ''}, the most "
                     f"relevant first: {_names(offered)}.")
    blocked = tools.get("blocked") or []
    if blocked:
        parts.append(f"Not allowed for this turn: {_names(blocked)}.")
    return " ".join(parts)


def _names(names: list[str], shown: int = 5) -> str:
    """The first ``shown`` names, and how many more."""
    head = ", ".join(names[:shown])
    return head + (f" and {len(names) - shown} more" if len(names) > shown else "")


def intent_sentence(intent: dict[str, Any]) -> str:
    """What the app took the input to be, and how sure it was, in plain words."""
    mode = MODE_WORDS.get(str(intent.get("mode")), "an input")
    kind = TASK_WORDS.get(str(intent.get("task_type")), "")
    confidence = intent.get("confidence") or {}
    scores = [float(confidence[k]) for k in ("mode", "task_type") if isinstance(confidence.get(k), (int, float))]
    parts = [f"The app took this as {mode}{f', about {kind}' if kind else ''}."]
    if intent.get("goal"):
        parts.append(f"Goal: {intent['goal']}.")
    if scores:
        sure = min(scores)
        parts.append("It was fairly sure." if sure >= 0.6 else "It was somewhat sure." if sure >= 0.35
                     else "It was unsure, which widens the search.")
    if intent.get("needs_clarification"):
        parts.append("It needs to ask you something first.")
    return " ".join(parts)


def evidence_sentence(query: str, candidates: int, kept: int, gate: Any | None) -> str:
    """What recall found and kept for the input, and what the relevance gate left out."""
    parts = [f"The app looked for “{query}” and found {candidates} passage{'s' if candidates != 1 else ''}; "
             f"{kept} {'was' if kept == 1 else 'were'} kept as evidence."]
    if gate is not None and gate.graded:
        parts.append(f"{gate.passed} of {gate.graded} were relevant enough to use (relevance bar "
                     f"{gate.threshold:.2f}); the others were left out as unrelated.")
        if gate.unlisted:
            parts.append(f"{gate.unlisted} more passage{'s' if gate.unlisted != 1 else ''} next to weak matches "
                         f"{'were' if gate.unlisted != 1 else 'was'} too far below the best to consider.")
        if gate.insufficient:
            parts.append("Nothing found answers it, so the context says the evidence is missing.")
        if gate.uncovered:
            parts.append(f"Not covered by any evidence: {'; '.join(gate.uncovered)}.")
    return " ".join(parts)


class Details(QWidget):
    """A "Details" button that shows or hides the widgets under it (hidden at first)."""

    def __init__(self, widgets: list[QWidget], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.button = QToolButton(self)
        self.button.setCheckable(True)
        self.button.setText("Details ▸")
        self.body = QWidget(self)
        inner = QVBoxLayout(self.body)
        inner.setContentsMargins(0, 0, 0, 0)
        for widget in widgets:
            inner.addWidget(widget)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.button)
        box.addWidget(self.body)
        self.body.setVisible(False)
        self.button.toggled.connect(self.set_open)

    def set_open(self, shown: bool) -> None:
        self.body.setVisible(shown)
        self.button.setText("Details ▾" if shown else "Details ▸")
        if self.button.isChecked() != shown:
            self.button.setChecked(shown)
