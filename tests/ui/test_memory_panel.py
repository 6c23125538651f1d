"""The Memory dock on the real engine (real SQLite + LanceDB, scripted model): a turn's memories
are listed with their session, the profile filter, search, edit as a new version, pin, revoke
with a second click (kept, shown as revoked), the memory node on the canvas, and adding to the
profile from the dock."""

from __future__ import annotations

from app.config import Settings
from app.core.types import NodeKind
from app.ui.window import MainWindow
from tests.ui.conftest import answer, drive, fake_services, until


def _texts(window: MainWindow) -> list[str]:
    panel = window.memory
    return [panel.list.item(n).text().split("\n")[0] for n in range(panel.list.count())]


def test_memory_dock_lists_edits_pins_and_revokes(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services(["Noted."] * 4))
    qtbot.addWidget(window)
    window.show()
    c, panel = window.controller, window.memory
    assert drive(aloop, c.load())
    drive(aloop, answer(window, "Never send emails to customers. We decided to use Postgres for the store."))
    window.docks["memory"].raise_()
    drive(aloop, until(lambda: len(_texts(window)) == 2, 30, "the memories listed"))
    assert _texts(window) == ["decision: use Postgres for the store", "prohibition: send emails to customers"]
    assert panel.list.item(1).text().split("\n")[1].endswith(" · holds")  # its session · since … · holds
    assert [n.label for n in c.state.graph.nodes() if n.kind == NodeKind.MEMORY] == [
        "prohibition: send emails to customers", "decision: use Postgres for the store"]

    panel.kind.setCurrentText("Your profile")
    assert _texts(window) == ["prohibition: send emails to customers"]
    panel.kind.setCurrentText("All memories")
    panel.search.setText("postgres")
    assert _texts(window) == ["decision: use Postgres for the store"]
    panel.search.clear()

    panel.list.setCurrentRow(0)  # the decision
    assert "Applies to its session" in panel.details.text()
    panel.edit_button.click()
    panel.edit_box.setText("use Postgres 16 for the store")
    panel.edit_box.returnPressed.emit()
    drive(aloop, until(lambda: _texts(window)[0] == "decision: use Postgres 16 for the store", 30, "the edit"))
    panel.list.setCurrentRow(0)
    assert "Earlier version" in panel.details.text() and "use Postgres for the store" in panel.details.text()
    panel.pin_button.click()
    drive(aloop, until(lambda: "pinned" in panel.list.item(0).text(), 30, "the pin"))

    panel.list.setCurrentRow(1)  # the prohibition
    panel.revoke_button.click()
    assert panel.revoke_button.text() == "Click again to revoke for good"
    panel.revoke_button.click()
    drive(aloop, until(lambda: _texts(window) == ["decision: use Postgres 16 for the store"], 30, "the revocation"))
    panel.closed_box.setChecked(True)
    assert any("revoked" in panel.list.item(n).text() for n in range(panel.list.count()))  # kept, marked
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))


def test_memory_dock_adds_to_the_profile(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services(["Noted."] * 2))
    qtbot.addWidget(window)
    window.show()
    c, panel = window.controller, window.memory
    assert drive(aloop, c.load())
    window.docks["memory"].raise_()
    assert not panel.profile_button.isEnabled()  # nothing typed yet
    panel.profile_box.setText("What do you prefer?")
    assert panel.profile_button.isEnabled()
    panel.profile_button.click()
    drive(aloop, until(lambda: panel.profile_note.isVisible(), 30, "the note"))
    assert panel.profile_note.text().startswith("Nothing to add: say it as \u201cI prefer\u2026\u201d")
    assert panel.profile_box.text() == "What do you prefer?"  # kept, to be said another way

    panel.kind.setCurrentText("Facts")  # the new statement is not a fact: the dock shows the profile
    panel.profile_box.setText("Never send emails to customers.")
    assert not panel.profile_note.isVisible()  # typing again clears the note
    panel.profile_box.returnPressed.emit()  # Enter adds
    drive(aloop, until(lambda: panel.selected() is not None, 30, "the new memory selected"))
    memory = panel.selected()
    assert (memory.type, memory.content) == ("prohibition", "send emails to customers")
    assert panel.kind.currentText() == "Your profile" and panel.profile_box.text() == ""
    assert panel.profile_note.text() == "Added to your profile: prohibition \u201csend emails to customers\u201d."
    assert "added by the user in the Memory panel" in panel.details.text()
    assert panel.list.currentItem().text().split("\n")[1].startswith("added by you · since ")
    assert "Applies to every session" in panel.details.text()
    assert c.engine.profile(c.state).prohibitions == ["send emails to customers"]  # the open session's profile

    panel.profile_box.setText("You may send emails to customers")
    panel.profile_button.click()
    drive(aloop, until(lambda: panel.selected() is not None and panel.selected().type == "permission", 30, "the permission"))
    assert "It replaces the earlier prohibition \u201csend emails to customers\u201d." in panel.profile_note.text()
    assert _texts(window) == ["permission: send emails to customers"]  # the prohibition is closed
    assert c.engine.profile(c.state).prohibitions == [] and c.engine.profile(c.state).permissions == [
        "send emails to customers"]
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))


def test_memory_dock_accepts_a_proposal_from_outside(qtbot, aloop, settings: Settings) -> None:
    """A prohibition an MCP client proposed is listed as not accepted and is no one's profile; Accept
    makes it the user's own (then it applies to the open session)."""
    window = MainWindow(settings, fake_services(["Noted."]))
    qtbot.addWidget(window)
    window.show()
    c, panel = window.controller, window.memory
    assert drive(aloop, c.load())
    window.docks["memory"].raise_()
    drive(aloop, c.engine.add_profile("Never send emails to customers.", c.state.session_id, origin="agent"))
    panel.reload()
    drive(aloop, until(lambda: _texts(window) == ["prohibition: send emails to customers"], 30, "the proposal listed"))
    panel.list.setCurrentRow(0)
    assert panel.list.item(0).text().split("\n")[1].endswith("proposed by an agent, not accepted")
    assert panel.accept_button.isVisible() and c.engine.profile(c.state).prohibitions == []
    assert panel.details.text().startswith("prohibition proposed by an MCP client\nApplies to no session until you "
                                           "accept it")
    panel.accept_button.click()
    drive(aloop, until(lambda: c.engine.profile(c.state).prohibitions == ["send emails to customers"], 30,
                       "the accepted prohibition in the profile"))
    drive(aloop, until(lambda: panel.list.count() == 1 and "added by you" in panel.list.item(0).text(), 30,
                       "the user's own statement listed"))
    assert not panel.accept_button.isVisible()
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
