"""Where the reference MCP servers are installed for the tests (``bash scripts/mcp_servers.sh``:
npm's @modelcontextprotocol/server-filesystem, -memory, -everything and PyPI's mcp-server-time, in
``.mcp-servers/`` or ``$PCM_MCP_SERVERS``), and how a test finds and kills a server's process."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = Path(os.environ.get("PCM_MCP_SERVERS", ROOT / ".mcp-servers"))
COMMANDS = {
    "filesystem": BASE / "npm" / "node_modules" / ".bin" / "mcp-server-filesystem",
    "memory": BASE / "npm" / "node_modules" / ".bin" / "mcp-server-memory",
    "everything": BASE / "npm" / "node_modules" / ".bin" / "mcp-server-everything",
    "time": BASE / "py" / "bin" / "mcp-server-time",
}


def command(name: str) -> str:
    """The server's command, or skip the test saying how to install it."""
    path = COMMANDS[name]
    if not path.exists():
        pytest.skip(f"the reference MCP server {name} is not installed ({path} missing): run bash scripts/mcp_servers.sh")
    return str(path)


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def child_pids(marker: str) -> list[int]:
    """This process's descendants whose command line contains ``marker``."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            if marker not in cmdline:
                continue
            ancestor = pid
            while ancestor > 1 and ancestor != me:
                ancestor = _parent(ancestor)
        except (OSError, ValueError, IndexError):
            continue
        if ancestor == me:
            found.append(pid)
    return found


def kill(marker: str) -> list[int]:
    """SIGKILL this process's servers whose command line contains ``marker``; return their pids."""
    pids = child_pids(marker)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return pids
