"""The settings dialog on real widgets: a changed chat model is verified off the UI thread before
the dialog accepts; a bad file is refused with the error shown; Cancel changes nothing.

The verifier is the real header check of ``app.llm.gguf`` (what the app runs before probing a
file in a child process): a garbage file fails it, the real SmolLM2 GGUF passes.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog

from app.config import REPO_ROOT, Settings, default_models_dir
from app.llm.gguf import validate_gguf
from app.ui.dialogs import SettingsDialog

CHAT_MODELS = ["SmolLM2-135M-Instruct"]
EMBED_MODELS = ["all-MiniLM-L6-v2", "other-embedder"]


def _real_gguf() -> Path:
    found = sorted(default_models_dir().glob("*.gguf"))
    if not found:
        pytest.skip("no .gguf model in models/ (run `pcm models fetch`)")
    return found[0]


class Verifier:
    """The header check, recording the threads it ran on; optionally held until released."""

    def __init__(self, hold: bool = False) -> None:
        self.calls: list[str] = []
        self.threads: list[threading.Thread] = []
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def __call__(self, value: str) -> str | None:
        self.calls.append(value)
        self.threads.append(threading.current_thread())
        self.release.wait(10)
        try:
            validate_gguf(value)
        except Exception as exc:  # ModelError: one line naming the file and the fix
            return str(exc)
        return None


def _dialog(qtbot, settings: Settings, verify: Verifier) -> tuple[SettingsDialog, list[Settings]]:
    dialog = SettingsDialog(settings, chat_models=CHAT_MODELS, embed_models=EMBED_MODELS, verify_chat_model=verify)
    qtbot.addWidget(dialog)
    accepted: list[Settings] = []
    dialog.settings_accepted.connect(accepted.append)
    dialog.open()
    qtbot.waitExposed(dialog)
    return dialog, accepted


def test_fields_start_from_the_settings(qtbot, settings: Settings) -> None:
    dialog, _ = _dialog(qtbot, settings, Verifier())
    assert dialog.chat_model.currentText() == settings.chat_model
    assert dialog.embed_model.currentText() == settings.embed_model
    assert dialog.default_budget.value() == settings.default_budget
    assert (dialog.default_budget.minimum(), dialog.default_budget.maximum()) == (128, 32768)
    assert dialog.concurrency.value() == settings.max_concurrent_streams
    assert (dialog.concurrency.minimum(), dialog.concurrency.maximum()) == (1, 8)
    assert dialog.theme.currentData() == settings.theme
    assert dialog.data_dir.text() == str(settings.data_dir)
    assert dialog.isVisible() and not dialog.chat_error.isVisible()


def test_a_garbage_model_file_is_refused_with_the_error_shown(qtbot, settings: Settings, tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"\x00\x13garbage, not a model" * 50)
    verify = Verifier()
    dialog, accepted = _dialog(qtbot, settings, verify)
    dialog.chat_model.setCurrentText(str(bad))
    dialog.default_budget.setValue(2048)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.chat_error.isVisible(), timeout=5000)
    assert verify.calls == [str(bad)]
    assert "broken.gguf" in dialog.chat_error.text() and "not a GGUF file" in dialog.chat_error.text()
    assert dialog.error_text() == dialog.chat_error.text()
    assert dialog.chat_error.property("role") == "error"
    assert re.search(r"color:\s*#", dialog.chat_error.styleSheet())
    assert accepted == [] and dialog.isVisible() and dialog.result() != QDialog.DialogCode.Accepted
    assert dialog.save_button.isEnabled() and not dialog.progress_row.isVisible()
    assert settings.chat_model == "SmolLM2-135M-Instruct" and settings.default_budget == 1024
    dialog.chat_model.setCurrentText(str(bad) + "x")  # editing clears the stale error
    assert not dialog.chat_error.isVisible()


def test_a_good_model_is_verified_off_the_ui_thread_then_the_new_settings_are_emitted(
    qtbot, settings: Settings
) -> None:
    good = _real_gguf()
    verify = Verifier(hold=True)
    dialog, accepted = _dialog(qtbot, settings, verify)
    dialog.chat_model.setCurrentText(str(good))
    dialog.embed_model.setCurrentText("other-embedder")
    dialog.default_budget.setValue(4096)
    dialog.concurrency.setValue(4)
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    dialog.context_size.setValue(4096)
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    # while the verifier runs: progress shown, Save disabled, nothing emitted, the UI responsive
    qtbot.waitUntil(lambda: len(verify.calls) == 1, timeout=5000)
    assert dialog.verifying and not dialog.save_button.isEnabled()
    assert dialog.progress_row.isVisible() and "Verifying model" in dialog.progress_label.text()
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)  # a second click does nothing
    qtbot.wait(100)
    assert accepted == [] and dialog.isVisible()
    with qtbot.waitSignal(dialog.settings_accepted, timeout=5000):
        verify.release.set()
    assert verify.threads[0] is not threading.main_thread()
    assert len(verify.calls) == 1
    (new,) = accepted
    assert isinstance(new, Settings) and new is not settings
    assert (new.chat_model, new.embed_model, new.default_budget, new.max_concurrent_streams, new.theme,
            new.context_size) == (str(good), "other-embedder", 4096, 4, "dark", 4096)
    assert new.data_dir == settings.data_dir and new.models_dir == settings.models_dir
    assert settings.chat_model == "SmolLM2-135M-Instruct" and settings.default_budget == 1024
    assert dialog.result() == QDialog.DialogCode.Accepted and not dialog.isVisible()


def test_an_unchanged_chat_model_is_not_verified_again(qtbot, settings: Settings, tmp_path: Path) -> None:
    verify = Verifier()
    dialog, accepted = _dialog(qtbot, settings, verify)
    dialog.default_budget.setValue(512)
    dialog.data_dir.setText(str(tmp_path / "elsewhere"))
    with qtbot.waitSignal(dialog.settings_accepted, timeout=2000):
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert verify.calls == []
    assert accepted[0].default_budget == 512 and accepted[0].data_dir == tmp_path / "elsewhere"


def test_a_verifier_that_raises_is_reported_as_an_error(qtbot, settings: Settings) -> None:
    def boom(value: str) -> str | None:
        raise RuntimeError("the probe process could not start")

    dialog = SettingsDialog(settings, chat_models=CHAT_MODELS, embed_models=EMBED_MODELS, verify_chat_model=boom)
    qtbot.addWidget(dialog)
    accepted: list[Settings] = []
    dialog.settings_accepted.connect(accepted.append)
    dialog.open()
    dialog.chat_model.setCurrentText("/nowhere/model.gguf")
    dialog.save_button.click()
    qtbot.waitUntil(lambda: dialog.chat_error.isVisible(), timeout=5000)
    assert "could not start" in dialog.chat_error.text() and accepted == []


def test_cancel_changes_nothing_and_emits_nothing(qtbot, settings: Settings, tmp_path: Path) -> None:
    verify = Verifier()
    before = settings.model_dump()
    dialog, accepted = _dialog(qtbot, settings, verify)
    dialog.chat_model.setCurrentText(str(tmp_path / "whatever.gguf"))
    dialog.default_budget.setValue(300)
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    cancel = dialog.buttons.button(dialog.buttons.StandardButton.Cancel)
    qtbot.mouseClick(cancel, Qt.MouseButton.LeftButton)
    assert dialog.result() == QDialog.DialogCode.Rejected and not dialog.isVisible()
    qtbot.wait(50)
    assert accepted == [] and verify.calls == [] and settings.model_dump() == before


def test_cancel_while_verifying_abandons_the_result(qtbot, settings: Settings) -> None:
    good = _real_gguf()
    verify = Verifier(hold=True)
    dialog, accepted = _dialog(qtbot, settings, verify)
    dialog.chat_model.setCurrentText(str(good))
    dialog.save_button.click()
    qtbot.waitUntil(lambda: len(verify.calls) == 1, timeout=5000)
    dialog.buttons.button(dialog.buttons.StandardButton.Cancel).click()
    assert dialog.result() == QDialog.DialogCode.Rejected and not dialog.verifying
    verify.release.set()
    qtbot.wait(200)
    assert accepted == [] and settings.chat_model == "SmolLM2-135M-Instruct"


def test_browse_opens_a_non_modal_file_picker_that_fills_the_field(qtbot, settings: Settings) -> None:
    dialog, _ = _dialog(qtbot, settings, Verifier())
    dialog.browse.click()
    picker = dialog.file_dialog
    assert picker is not None and picker.isVisible()
    picker.fileSelected.emit("/models/picked.gguf")
    assert dialog.chat_model.currentText() == "/models/picked.gguf"
    picker.reject()


def test_no_modal_exec_in_the_ui_code_written_here() -> None:
    files = [REPO_ROOT / "app/ui/dialogs.py", REPO_ROOT / "app/ui/theme.py",
             *sorted((REPO_ROOT / "app/ui/panels").glob("*.py"))]
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\.exec_?\(", text), f"{path.name} calls exec()"
        assert "getOpenFileName" not in text and "getExistingDirectory" not in text, path.name
