"""The Memory dock: what PCM remembers across sessions — browse, search, add to your profile,
edit, pin, revoke, accept.

Every memory of the workspace is listed (newest first) with its type, the session it came from
and whether it still holds; "Your profile" shows the preferences, prohibitions and permissions
that apply to every session. The line at the top adds to that profile: a statement such as
"I prefer short answers", "Never send emails" or "You may delete files in /tmp" is stored for
every session (``Engine.add_profile``; it may replace an earlier statement of the same words),
then listed and selected; text that states none gets a plain note saying how to phrase it.
Selecting a memory shows its context, links (with their reasons), source and earlier versions.
Edit writes a new version (the old text is kept); Revoke asks once more, then closes the memory
for good (it is kept, and never reaches a context again); Pin keeps it out of consolidation.
A memory from outside — an imported session's, or one an MCP client proposed — is listed as not
accepted: it is nobody's profile and no other session sees it until Accept makes it yours
(``Engine.accept_memory``). Nothing is deleted from here.

It talks to the engine facade (``controller.engine``) through ``controller.spawn``; it reads
again when shown, after each answered turn, and after each action.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

FILTERS = {"All memories": (), "Your profile": ("preference", "prohibition", "permission"), "Facts": ("fact",),
           "Decisions": ("decision",), "Commitments": ("commitment",), "Events": ("event",),
           "Notes": ("note", "summary")}
ID_ROLE = Qt.ItemDataRole.UserRole
#: What the profile line says when the text states no preference, prohibition or permission.
NOTHING_TO_ADD = ("Nothing to add: say it as \u201cI prefer\u2026\u201d, \u201cAlways\u2026\u201d, "
                  "\u201cNever\u2026\u201d, \u201cDon't\u2026\u201d or \u201cYou may\u2026\u201d (not as a question).")


_PENDING = {"imported": "from an import, not accepted", "agent": "proposed by an agent, not accepted"}


def memory_state(memory: Any) -> str:
    """One of: holds; from an import / proposed by an agent, not accepted; accepted as yours;
    closed DATE (a newer fact replaced it); merged into a note; replaced by an edit; revoked."""
    if memory.pending and not memory.valid_to:
        return _PENDING.get(memory.origin, "not accepted")
    if memory.accepted_at and memory.superseded_by:
        return "accepted as yours"
    if memory.revoked_at:
        return "replaced by an edit" if memory.superseded_by else "revoked"
    if memory.valid_to:
        return f"closed {memory.valid_to[:10]}" if memory.closed_at else "merged into a note"
    return "holds"


def added_here(memory: Any) -> bool:
    """A profile statement the user added in this dock (no message of any session says it)."""
    return memory.type in FILTERS["Your profile"] and not memory.source_evidence_ids and not memory.origin


def current(memory: Any) -> bool:
    """Shown without "Show closed and revoked": it holds, or it waits for the user to accept it."""
    return memory_state(memory) == "holds" or (memory.pending and not memory.valid_to)


def row_text(memory: Any, title: str) -> str:
    """Two lines: type and content; where it came from (the session, or this dock), since when,
    and whether it holds."""
    pin = " · pinned" if memory.pinned else ""
    where = "added by you" if added_here(memory) else " ".join((title or "untitled session").split())
    text = " ".join(memory.content.split())  # one line, whatever an import or an agent wrote
    return f"{memory.type}: {text}\n{where} · since {memory.valid_from[:10]} · {memory_state(memory)}{pin}"


def added_text(result: Any) -> str:
    """One line on what ``Engine.add_profile`` did: added, already there, and what it replaced."""
    quote = lambda m: f"{m.type} \u201c{m.content}\u201d"  # noqa: E731
    parts = []
    if result.added:
        parts.append("Added to your profile: " + "; ".join(map(quote, result.added)) + ".")
    if result.held:
        parts.append("Already in your profile: " + "; ".join(map(quote, result.held)) + ".")
    if result.closed:
        parts.append("It replaces the earlier " + "; ".join(map(quote, result.closed)) + ".")
    return " ".join(parts)


def details_text(memory: Any, contents: dict[str, str]) -> str:
    """The selected memory: context, scope, keywords, links with their reasons, sources, versions."""
    applies = "every session" if memory.scope == "workspace" else "its session"
    if memory.pending:
        applies = "no session until you accept it"
    lines = [memory.context or memory.type,
             f"Applies to {applies}; "
             f"used {memory.access_count} time(s)"
             + (f", last {memory.last_accessed_at[:16].replace('T', ' ')}" if memory.last_accessed_at else "")]
    if memory.entities:
        lines.append("Names: " + ", ".join(memory.entities))
    for link in memory.links:
        lines.append(f"Linked ({link['reason']}): {contents.get(link['memory_id'], link['memory_id'])[:80]}")
    if memory.source_evidence_ids:
        lines.append("From evidence " + ", ".join(i[:8] for i in memory.source_evidence_ids))
    for rev in memory.revisions:
        if "content" in rev:
            lines.append(f"Earlier version ({str(rev.get('at', ''))[:10]}): {rev['content']}")
    return "\n".join(lines)


class MemoryPanel(QWidget):
    """Filter, search, the list, the selected memory's details, and the actions on it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller: Any = None
        self.rows: list[tuple[str, Any]] = []
        self.titles: dict[str, str] = {}
        self._confirm_revoke: str | None = None

        self.profile_box = QLineEdit(self)
        self.profile_box.setPlaceholderText("Add to your profile: \u201cNever\u2026\u201d, \u201cI prefer\u2026\u201d")
        self.profile_box.setToolTip("A preference (\u201cI prefer\u2026\u201d, \u201cAlways\u2026\u201d), a prohibition "
                                    "(\u201cNever\u2026\u201d, \u201cDon't\u2026\u201d) or a permission "
                                    "(\u201cYou may\u2026\u201d): it applies to every session. Enter adds it.")
        self.profile_button = QPushButton("Add to profile", self)
        self.profile_note = QLabel(self)
        self.profile_note.setWordWrap(True)
        self.profile_note.setVisible(False)
        self.kind = QComboBox(self)
        self.kind.addItems(list(FILTERS))
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search memories")
        self.search.setClearButtonEnabled(True)
        self.closed_box = QCheckBox("Show closed and revoked", self)
        self.list = QListWidget(self)
        self.list.setWordWrap(True)
        self.list.setAlternatingRowColors(True)
        self.list.setSpacing(2)
        self.empty = QLabel("Nothing remembered yet: memories are written after each answered turn.", self)
        self.empty.setWordWrap(True)
        self.details = QLabel(self)
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.edit_box = QLineEdit(self)
        self.edit_box.setPlaceholderText("New text — Enter saves a new version, Esc cancels")
        self.edit_box.setVisible(False)
        self.edit_button = QPushButton("Edit", self)
        self.pin_button = QPushButton("Pin", self)
        self.revoke_button = QPushButton("Revoke…", self)
        self.accept_button = QPushButton("Accept", self)
        self.accept_button.setToolTip("Make this memory from an import or an agent yours: a preference, "
                                      "prohibition or permission then applies to every session")
        actions = QHBoxLayout()
        for button in (self.accept_button, self.edit_button, self.pin_button, self.revoke_button):
            actions.addWidget(button)

        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self.profile_box)
        add = QHBoxLayout()
        add.addWidget(self.profile_note, 1)
        add.addStretch()
        add.addWidget(self.profile_button, 0, Qt.AlignmentFlag.AlignTop)
        box.addLayout(add)
        top = QHBoxLayout()
        top.addWidget(self.kind)
        top.addWidget(self.closed_box)
        box.addLayout(top)
        box.addWidget(self.search)
        box.addWidget(self.list, 1)
        box.addWidget(self.empty)
        box.addWidget(self.details)
        box.addWidget(self.edit_box)
        box.addLayout(actions)

        self.profile_box.textChanged.connect(self._on_profile_text)
        self.profile_box.returnPressed.connect(self._add_profile)
        self.profile_button.clicked.connect(self._add_profile)
        self._on_profile_text("")
        self.kind.currentIndexChanged.connect(self._refill)
        self.closed_box.toggled.connect(self._refill)
        self.search.textChanged.connect(self._refill)
        self.list.currentItemChanged.connect(self._on_selected)
        self.edit_button.clicked.connect(self._start_edit)
        self.edit_box.returnPressed.connect(self._save_edit)
        self.pin_button.clicked.connect(self._toggle_pin)
        self.revoke_button.clicked.connect(self._revoke)
        self.accept_button.clicked.connect(self._accept)
        self._on_selected(None, None)

    # ------------------------------------------------------------------ the engine side

    def bind(self, controller: Any) -> None:
        """Read through ``controller.engine``; read again after every answered turn."""
        self.controller = controller
        controller.turn_finished.connect(self._on_turn_finished)
        controller.session_opened.connect(self._on_turn_finished)

    def _on_turn_finished(self, *_args: Any) -> None:
        QTimer.singleShot(1500, self.reload)  # the writer runs just after the answer

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.reload()

    def reload(self) -> None:
        if self.controller is None or self.controller.engine is None or not self.isVisible():
            return
        self.controller.spawn(self.refresh(), "Reading memories")

    async def refresh(self) -> None:
        engine = self.controller.engine
        self.rows = list(reversed(await engine.memories()))
        self.titles = {s["session_id"]: s["title"] for s in await engine.list_sessions(archived=True)}
        self._refill()

    def _act(self, work: Any, what: str) -> None:
        async def run() -> None:
            await work
            await self.refresh()

        self.controller.spawn(run(), what)

    # ------------------------------------------------------------------ the list

    def shown(self) -> list[tuple[str, Any]]:
        """The rows the filter, the search and the closed box let through."""
        types = FILTERS[self.kind.currentText()]
        text = self.search.text().strip().lower()
        closed = self.closed_box.isChecked()
        return [(sid, m) for sid, m in self.rows
                if (not types or m.type in types) and (closed or current(m))
                and (not text or text in m.content.lower() or text in self.titles.get(sid, "").lower())]

    def _refill(self) -> None:
        current = self.selected_id()
        self.list.clear()
        for sid, memory in self.shown():
            item = QListWidgetItem(row_text(memory, self.titles.get(sid, "")))
            item.setData(ID_ROLE, memory.fragment_id)
            self.list.addItem(item)
            if memory.fragment_id == current:
                self.list.setCurrentItem(item)
        self.empty.setVisible(self.list.count() == 0)

    def selected_id(self) -> str | None:
        item = self.list.currentItem()
        return None if item is None else str(item.data(ID_ROLE))

    def selected(self) -> Any | None:
        wanted = self.selected_id()
        return next((m for _, m in self.rows if m.fragment_id == wanted), None)

    def _on_selected(self, *_args: Any) -> None:
        memory = self.selected()
        self._confirm_revoke = None
        self.revoke_button.setText("Revoke…")
        self.edit_box.setVisible(False)
        for button in (self.edit_button, self.pin_button, self.revoke_button):
            button.setEnabled(memory is not None and not memory.revoked_at)
        self.accept_button.setVisible(memory is not None and memory.pending and not memory.valid_to)
        self.pin_button.setText("Unpin" if memory is not None and memory.pinned else "Pin")
        contents = {m.fragment_id: m.content for _, m in self.rows}
        self.details.setText("" if memory is None else details_text(memory, contents))

    # ------------------------------------------------------------------ actions

    def _start_edit(self) -> None:
        memory = self.selected()
        if memory is not None:
            self.edit_box.setText(memory.content)
            self.edit_box.setVisible(True)
            self.edit_box.setFocus()

    def _save_edit(self) -> None:
        memory, text = self.selected(), self.edit_box.text().strip()
        self.edit_box.setVisible(False)
        if memory is not None and text and text != memory.content:
            self._act(self.controller.engine.edit_memory(memory.fragment_id, text), "Saving the memory")

    def keyPressEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        if event.key() == Qt.Key.Key_Escape and self.edit_box.isVisible():
            self.edit_box.setVisible(False)
            return
        super().keyPressEvent(event)

    def _on_profile_text(self, text: str) -> None:
        self.profile_button.setEnabled(bool(text.strip()))
        self.profile_note.setVisible(False)

    def _add_profile(self) -> None:
        text = self.profile_box.text().strip()
        if not text or self.controller is None:
            return
        if self.controller.engine is None or self.controller.session_id is None:
            self._say("The models are still loading: add it once a session is open.")
            return
        self.controller.spawn(self._added(text, self.controller.session_id), "Adding to your profile")

    async def _added(self, text: str, session_id: str) -> None:
        result = await self.controller.engine.add_profile(text, session_id)
        if result is None:  # the text stays, to be said again another way
            self._say(NOTHING_TO_ADD)
            return
        self.profile_box.clear()
        await self.refresh()
        shown = (result.added or result.held)[:1]
        if shown and shown[0].fragment_id not in {m.fragment_id for _, m in self.shown()}:
            self.kind.setCurrentText("Your profile")  # the filter or search hid it
            self.search.clear()
        if shown:
            self.select(shown[0].fragment_id)
        self._say(added_text(result))

    def _say(self, line: str) -> None:
        self.profile_note.setText(line)
        self.profile_note.setVisible(bool(line))

    def select(self, memory_id: str) -> None:
        """Select (and scroll to) the memory's row, when the list shows it."""
        for n in range(self.list.count()):
            item = self.list.item(n)
            if item.data(ID_ROLE) == memory_id:
                self.list.setCurrentItem(item)
                self.list.scrollToItem(item)
                return

    def _toggle_pin(self) -> None:
        memory = self.selected()
        if memory is not None:
            self._act(self.controller.engine.pin_memory(memory.fragment_id, not memory.pinned), "Pinning the memory")

    def _accept(self) -> None:
        """The selected memory from outside becomes the user's own (then selected: a statement
        is a new memory of the user's, which replaces it)."""
        memory = self.selected()
        if memory is None or not memory.pending:
            return

        async def run() -> None:
            stands = await self.controller.engine.accept_memory(memory.fragment_id)
            await self.refresh()
            self.select(stands.fragment_id)

        self.controller.spawn(run(), "Accepting the memory")

    def _revoke(self) -> None:
        """First click asks; the second revokes (kept, never recalled again)."""
        memory = self.selected()
        if memory is None:
            return
        if self._confirm_revoke != memory.fragment_id:
            self._confirm_revoke = memory.fragment_id
            self.revoke_button.setText("Click again to revoke for good")
            return
        self._act(self.controller.engine.revoke_memory(memory.fragment_id), "Revoking the memory")
