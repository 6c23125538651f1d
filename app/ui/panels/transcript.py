"""The Conversation dock: the selected branch read as a conversation, root first.

Each turn of the branch (the selected node's main chain, back along ``continues``) shows the
input and the answer, rendered as Markdown (code blocks stay code). A citation marker ``[n]`` in
an answer becomes a link only in prose, never inside code (``my_list = [1, 2, 3]`` stays as it
is); clicking it, or a turn's heading, emits ``turn_clicked`` so the window selects that turn.
Each fenced code block has a "Copy code" link above it that puts the code, as written, on the
clipboard. What the user typed or pasted keeps its line breaks and indentation (a pasted traceback
stays one line per line); an answer that did not end by itself says so under it: cut at its length
limit, stopped, interrupted or failed (``FINISH_MARKS``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QGuiApplication, QTextDocument
from PySide6.QtWidgets import QLabel, QTextBrowser, QVBoxLayout, QWidget

from app.core.types import NodeKind, Role

# GitHub's Markdown without raw HTML: what the user or the model wrote never becomes markup.
MARKDOWN = QTextDocument.MarkdownFeature(QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value
                                         | QTextDocument.MarkdownFeature.MarkdownNoHTML.value)
EMPTY = "Select a turn on the canvas to read its branch here as a conversation."
_CODE = re.compile(r"(```.*?(?:```|$)|`[^`\n]*`)", re.S)  # fenced blocks (even unclosed) and inline code
_CITE = re.compile(r"\[(\d{1,3})\]")
#: What an answer's finish reason (or its turn's stored status) adds under it; an answer that ended by
#: itself ("stop") adds nothing.
FINISH_MARKS = {
    "length": "cut at its length limit — “Continue the answer” in the Inspector goes on",
    "cancelled": "stopped before it finished",
    "stopped": "stopped before it finished",
    "interrupted": "interrupted: the app stopped while it answered",
    "error": "failed: the model reported an error",
    "failed": "failed: the model reported an error",
}
_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)(?:^\1[ \t]*$|\Z)", re.S | re.M)  # a fenced block, its code


def link_citations(markdown: str, turn_id: str) -> str:
    """``[n]`` outside code becomes a link to the turn (``turn:<id>#n``); code is left as written."""
    parts = _CODE.split(markdown)
    for i in range(0, len(parts), 2):  # even parts are prose, odd ones the code the split kept
        parts[i] = _CITE.sub(lambda m: f"[\\[{m.group(1)}\\]](turn:{turn_id}#{m.group(1)})", parts[i])
    return "".join(parts)


def with_copy_links(markdown: str, codes: list[str]) -> str:
    """A "Copy code" link (``copy:<n>``) above each fenced block; the code is appended to ``codes``."""
    def link(match: re.Match[str]) -> str:
        codes.append(match.group(2).rstrip("\n"))
        return f"\n[Copy code](copy:{len(codes) - 1})\n\n{match.group(0)}"

    return _FENCE.sub(link, markdown)


def keep_lines(text: str) -> str:
    """``text`` as typed, in Markdown: outside fenced code each line break stays a line break and
    leading spaces stay (non-breaking), so pasted lines are not merged into one paragraph."""
    parts = re.split(r"(^(?:```|~~~).*?(?:^(?:```|~~~)[ \t]*$|\Z))", text, flags=re.S | re.M)
    for i in range(0, len(parts), 2):
        lines = parts[i].split("\n")
        lines = [re.sub(r"^[ \t]+", lambda m: "\u00a0" * len(m.group(0).expandtabs(4)), line) for line in lines]
        parts[i] = "\n".join(line + "  " if line.strip() and k < len(lines) - 1 else line
                             for k, line in enumerate(lines))
    return "".join(parts)


def branch_markdown(state: Any, node_id: str, codes: list[str] | None = None,
                    finishes: Mapping[str, str] | None = None) -> str:
    """The branch ending at ``node_id`` as one Markdown document, root first (with ``codes``, a
    copy link above each code block, its code appended to the list; ``finishes``: turn id → how
    its answer ended, marked under the answer when it did not end by itself)."""
    chain = [n for n in state.graph.chain_back(node_id) if state.graph.node(n).kind == NodeKind.TURN]
    out = []
    for node in reversed(chain):
        turn_id = state.graph.node(node).ref_id
        view = state.turns.get(turn_id) if turn_id else None
        if view is None:
            continue
        out.append(f"#### [{view.at[:16].replace('T', ' ')}](turn:{turn_id})\n")  # no "---": front matter
        for mid in view.message_ids:
            message = state.messages.get(mid)
            if message is None:
                continue
            who = "You" if message.role == Role.USER else message.speaker.capitalize()
            text = link_citations(message.text, turn_id) if message.role == Role.ASSISTANT else keep_lines(message.text)
            if codes is not None:
                text = with_copy_links(text, codes)
            out.append(f"**{who}**\n\n{text}\n")
        mark = FINISH_MARKS.get((finishes or {}).get(turn_id or "", ""))
        if mark:
            out.append(f"*⚠ {mark}*\n")
    return "\n".join(out)


class TranscriptPanel(QWidget):
    """The branch of the selected turn as a conversation (see the module doc)."""

    turn_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view = QTextBrowser(self)
        self.view.setOpenLinks(False)
        self.view.setOpenExternalLinks(False)
        self.view.anchorClicked.connect(self._clicked)
        self.empty = QLabel(EMPTY, self)
        self.empty.setWordWrap(True)
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self.empty)
        box.addWidget(self.view, 1)
        self.node_id: str | None = None
        self.codes: list[str] = []  # the code blocks shown, by their copy link's number
        self.finishes: dict[str, str] = {}  # turn id → finish reason of answers that ended in this run
        self.stored: Callable[[], Mapping[str, str]] = dict  # turn id → stored status (interrupted, failed)
        self.show_branch(None, None)

    def show_branch(self, state: Any, node_id: str | None) -> None:
        """Show the branch ending at ``node_id`` (None: the hint)."""
        self.node_id = node_id
        shown = state is not None and node_id is not None and node_id in state.graph
        self.empty.setVisible(not shown)
        self.view.setVisible(shown)
        if shown:
            bar = self.view.verticalScrollBar()
            at_end = bar.value() >= bar.maximum() - 4
            self.codes = []
            finishes = {**self.stored(), **self.finishes}
            self.view.document().setMarkdown(branch_markdown(state, node_id, self.codes, finishes), MARKDOWN)
            if at_end:
                bar.setValue(bar.maximum())

    def _clicked(self, url: QUrl) -> None:
        if url.scheme() == "turn":
            self.turn_clicked.emit(url.path())
        elif url.scheme() == "copy" and url.path().isdigit() and int(url.path()) < len(self.codes):
            QGuiApplication.clipboard().setText(self.codes[int(url.path())])
