"""The desktop app serves its sessions to MCP clients when Settings names a port: on 127.0.0.1,
behind the bearer token, on the app's own engine (real stores), stopped with the window; a port
in use is said in one line and the app goes on."""

from __future__ import annotations

import socket

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from app.config import Settings
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until

TOKEN = "switch-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _open(qtbot, settings: Settings) -> MainWindow:
    window = MainWindow(settings, fake_services(["Noted."]))
    qtbot.addWidget(window)
    window.show()
    return window


def test_the_app_serves_mcp_on_its_engine_while_open(qtbot, aloop, settings: Settings,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PCM_MCP_TOKEN", TOKEN)
    port = _free_port()
    window = _open(qtbot, settings.model_copy(update={"mcp_port": port}))
    c = window.controller
    assert drive(aloop, c.load())
    url = f"http://127.0.0.1:{port}/mcp"

    async def ask() -> dict:
        async def listening() -> bool:
            try:
                async with httpx2.AsyncClient(timeout=2) as http:
                    return (await http.post(url, json={})).status_code == 401  # no token: refused
            except httpx2.TransportError:
                return False

        await until_async(listening)
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            return (await client.call_tool("get_status", {})).structured_content

    status = drive(aloop, ask())
    assert status["sessions"] >= 1 and status["chat_model"] == "scripted"  # the app's own engine
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
    with socket.socket() as s:  # nothing listens there any more (connections may linger in TIME_WAIT)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


async def until_async(check, timeout: float = 20.0) -> None:
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "the MCP server never listened"
        await asyncio.sleep(0.1)


def test_a_port_in_use_is_one_line_and_the_app_goes_on(qtbot, aloop, settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        window = _open(qtbot, settings.model_copy(update={"mcp_port": port}))
        said: list[str] = []
        window.controller.error.connect(said.append)
        assert drive(aloop, window.controller.load())
        drive(aloop, until(lambda: said, 10, "the error line"))
        assert said[0].startswith("MCP server stopped: cannot serve MCP on 127.0.0.1:") and "\n" not in said[0]
        assert window.controller.ready
        window.close()
        drive(aloop, until(lambda: window._shut, 30, "shutdown"))
