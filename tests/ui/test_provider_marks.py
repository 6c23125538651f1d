"""A turn answered off the machine says so in the Timing tab and under its answer; one answered
here says where, too (the provider registry's usage record, through a real engine turn)."""

from __future__ import annotations

from typing import Any

from app.llm.fakes import ScriptedProvider
from app.llm.providers import LocalProvider, ProviderRegistry, ProviderSettings
from app.llm.providers.settings import ProviderConfig, local_provider
from app.ui.panels.timing_tab import TimingTabWidget
from app.ui.panels.turn import finish_line


def _answered(make_engine: Any, registry: ProviderRegistry) -> Any:
    async def body(engine: Any) -> Any:
        state = await engine.open_session(None)
        return await (await engine.submit(state.session_id, "hello")).done

    return make_engine.run(body, chat=registry)


def _cells(widget: TimingTabWidget) -> list[str]:
    table = widget.answer
    return [table.item(r, c).text() for r in range(table.rowCount()) for c in range(table.columnCount())
            if table.item(r, c) is not None]


def test_an_answer_from_off_the_machine_is_marked(qtbot: Any, make_engine: Any) -> None:
    cloud = ScriptedProvider("cloud", ["From afar."], price_in_per_1k=1.0)
    config = ProviderConfig(id="cloud", kind="openai", base_url="https://api.example.com/v1", model="big",
                            price_in_per_1k=1.0, off_machine_confirmed=True)
    local = LocalProvider(ScriptedProvider("inner", ["Here."]))
    record = _answered(make_engine, ProviderRegistry([(cloud, config), (local, local_provider())], ProviderSettings()))
    assert record.usage["off_machine"] is True
    widget = TimingTabWidget()
    qtbot.addWidget(widget)
    widget.show_record(record)
    cells = _cells(widget)
    assert "cloud" in cells and "OFF THE MACHINE (the prompt was sent out)" in cells and "cost" in cells
    assert finish_line(record, record.output).endswith("answered off the machine by cloud")


def test_an_answer_from_this_machine_says_so_and_notes_the_fallback(qtbot: Any, make_engine: Any) -> None:
    lab = ScriptedProvider("lab", ["never"])
    lab.available = False
    config = ProviderConfig(id="lab", kind="openai", base_url="http://127.0.0.1:9/v1", model="m")
    local = LocalProvider(ScriptedProvider("inner", ["Here."]))
    registry = ProviderRegistry([(lab, config), (local, local_provider())], ProviderSettings(check_every_s=0))
    record = _answered(make_engine, registry)
    widget = TimingTabWidget()
    qtbot.addWidget(widget)
    widget.show_record(record)
    cells = _cells(widget)
    assert "on this machine" in cells and "skipped lab: lab is not reachable at http://127.0.0.1:9/v1" in cells
    assert "off the machine" not in finish_line(record, record.output)


def test_the_card_of_a_turn_answered_off_the_machine_is_marked(qtbot: Any, aloop: Any, settings: Any) -> None:
    from dataclasses import replace

    from app.ui.window import MainWindow
    from tests.conftest import engine_in
    from tests.ui.conftest import drive, fake_services, until

    def build(settings: Any, progress: Any) -> Any:
        progress("opening the store")
        cloud = ScriptedProvider("cloud", ["From afar."])
        config = ProviderConfig(id="cloud", kind="openai", base_url="https://api.example.com/v1", model="big",
                                off_machine_confirmed=True)
        local = LocalProvider(ScriptedProvider("inner", ["Here."]))
        registry = ProviderRegistry([(cloud, config), (local, local_provider())], ProviderSettings())
        return engine_in(settings.data_dir, chat=registry, budget=settings.default_budget)

    window = MainWindow(settings, replace(fake_services(), build_engine=build))
    qtbot.addWidget(window)
    window.show()
    drive(aloop, window.controller.load())
    window.composer.edit.setPlainText("What is on the agenda?")
    window.composer.send.click()
    marked = drive(aloop, until(lambda: [i for i in window.scene._items.values() if i.off_machine], 60, "the mark"))
    assert len(marked) == 1
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
    # reopened, the stored usage marks the same card again
    again = MainWindow(settings, replace(fake_services(), build_engine=build))
    qtbot.addWidget(again)
    again.show()
    drive(aloop, again.controller.load())
    node = marked[0].node_id
    drive(aloop, until(lambda: node in again.scene._items and again.scene._items[node].off_machine, 60, "reopened"))
    again.close()
    drive(aloop, until(lambda: again._shut, 30, "shutdown"))
