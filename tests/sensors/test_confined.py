"""The one confined opener (app/sensors/confined.py): what the folder sensor and read_file may
read. Links out of the folder (the file or a folder above it), ``..``, absolute paths elsewhere,
fifos, devices and link loops are refused; links inside are followed; hard links are reported;
a file swapped for a symlink while it is read never yields the outside file."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from app.core.plan.model import ToolPolicy
from app.core.tools.builtin import builtin_tools
from app.core.tools.model import ToolNotFound, ToolRefused
from app.core.tools.registry import ToolRegistry
from app.sensors.confined import ConfinedFolders, Missing, Refused, open_in_folder
from app.sensors.files import read_text_preview

SECRET = "OUTSIDE-SECRET-7f3a"


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A watched folder with notes, a binary file, and links of every kind; a secret outside."""
    watched, outside = tmp_path / "watched", tmp_path / "outside"
    (watched / "notes").mkdir(parents=True)
    outside.mkdir()
    (watched / "notes" / "plan.md").write_text("Ship on Friday.\n", encoding="utf-8")
    (watched / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    (outside / "secret.txt").write_text(SECRET, encoding="utf-8")
    os.symlink(outside / "secret.txt", watched / "link.txt")  # absolute link out
    os.symlink("../outside/secret.txt", watched / "rel-link.txt")  # relative link out
    os.symlink(outside, watched / "linkdir")  # a symlinked folder out
    os.symlink("notes/plan.md", watched / "inside-link.md")  # a link that stays inside
    os.symlink(watched / "notes", watched / "notes-abs")  # an absolute link to a folder inside
    os.symlink("loop-b", watched / "loop-a")
    os.symlink("loop-a", watched / "loop-b")
    return watched, outside


def _read_tool(watched: Path):
    registry = ToolRegistry()

    async def nothing(*_args: object) -> list:
        return []

    files = ConfinedFolders([watched])
    for tool in builtin_tools(files=lambda: files, search=nothing, feed=nothing, tasks=None):  # type: ignore[arg-type]
        registry.register(tool)

    def read(path: str):
        return asyncio.run(registry.call("read_file", {"path": path}, policy=ToolPolicy(), offered=["read_file"],
                                         session_id="s"))
    return read


def test_read_file_is_confined_to_the_watched_folders(tree: tuple[Path, Path]) -> None:
    watched, outside = tree
    read = _read_tool(watched)
    for path in ("../outside/secret.txt", str(outside / "secret.txt"), "link.txt", "rel-link.txt",
                 "linkdir/secret.txt", "notes/../../outside/secret.txt", "loop-a", str(watched / "link.txt")):
        outcome = read(path)
        assert outcome.status == "forbidden" and not outcome.evidences, path
        assert SECRET not in outcome.error
    assert "link out of the watched folder" in read("link.txt").error
    assert read("notes/missing.md").status == "not_found"
    assert read("blob.bin").status == "forbidden"  # binary files are refused
    inside = read("notes/plan.md")
    assert inside.status == "success"
    assert inside.evidences[0].content == "[tool read_file]\n<<< notes/plan.md\nShip on Friday.\n>>>"
    for path in (str(watched / "notes" / "plan.md"), "inside-link.md", "notes-abs/plan.md"):
        outcome = read(path)  # absolute paths inside, and links that stay inside, are read
        assert outcome.status == "success" and "Ship on Friday." in outcome.evidences[0].content, path
    assert read("inside-link.md").evidences[0].metadata["hard_links"] == 1
    # By-name lookup never returns a path that escapes (the symlinks) and finds nested files.
    files = ConfinedFolders([watched])
    assert files.find(["plan.md", "link.txt", "secret.txt", "rel-link.txt"], 1000) == {"plan.md": "notes/plan.md"}
    with pytest.raises(ToolRefused):
        ConfinedFolders([]).read_text("x.md", 100)
    with pytest.raises(ToolNotFound):
        files.read_text("nothing-here.md", 100)


def test_without_dir_fd_the_path_opener_refuses_the_same_links(tree: tuple[Path, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the OS has no dir_fd opens (Windows) the fallback resolves, opens and re-checks."""
    from app.sensors import confined

    monkeypatch.setattr(confined, "DIR_FD", False)
    watched, _ = tree
    files = ConfinedFolders([watched])
    for path in ("link.txt", "rel-link.txt", "linkdir/secret.txt", "../outside/secret.txt", "loop-a"):
        with pytest.raises(ToolRefused):
            files.read_text(path, 1000)
    assert files.read_text("inside-link.md", 1000).text == "Ship on Friday.\n"
    assert files.read_text("notes/plan.md", 1000).label == "notes/plan.md"
    assert read_text_preview(watched / "link.txt", 1000, root=watched).skipped == "link_out"


def test_fifos_devices_and_folders_are_refused_without_blocking(tree: tuple[Path, Path]) -> None:
    watched, _ = tree
    os.mkfifo(watched / "pipe")  # opening it for reading would wait for a writer
    os.symlink("/dev/zero", watched / "zero")
    started = time.monotonic()
    with pytest.raises(Refused) as fifo:
        open_in_folder(str(watched), "pipe")
    assert fifo.value.reason == "not_a_file"
    with pytest.raises(Refused) as device:
        open_in_folder(str(watched), "zero")
    assert device.value.reason == "link_out"
    with pytest.raises(Refused):
        open_in_folder(str(watched), "notes")
    with pytest.raises(Missing):
        open_in_folder(str(watched / "gone"), "x.md")
    assert time.monotonic() - started < 2.0
    assert read_text_preview(watched / "pipe", 100, root=watched).skipped == "not_a_file"


def test_hard_links_are_read_and_reported(tree: tuple[Path, Path]) -> None:
    watched, outside = tree
    os.link(outside / "secret.txt", watched / "hard.txt")  # the same file, a second name inside
    got = ConfinedFolders([watched]).read_text("hard.txt", 1000)
    assert got.hard_links == 2
    preview = read_text_preview(watched / "hard.txt", 1000, root=watched)
    assert preview.links == 2 and preview.text == SECRET
    outcome = _read_tool(watched)("hard.txt")
    assert "2 names (hard links)" in outcome.evidences[0].content and outcome.evidences[0].metadata["hard_links"] == 2


def test_the_folder_sensor_never_reads_through_a_link_out(tree: tuple[Path, Path]) -> None:
    watched, _ = tree
    for name in ("link.txt", "rel-link.txt", "linkdir/secret.txt"):
        preview = read_text_preview(watched / name, 1000, root=watched)
        assert preview.text is None and preview.skipped == "link_out", name
        assert preview.message == "refused: link out of the watched folder"
    inside = read_text_preview(watched / "inside-link.md", 1000, root=watched)
    assert inside.text == "Ship on Friday.\n" and inside.skipped is None


def test_an_html_file_is_read_as_its_visible_text(tree: tuple[Path, Path]) -> None:
    watched, _ = tree
    (watched / "page.html").write_text(
        "<html><head><title>t</title></head><body><p>Visible part.</p>"
        "<div style='display:none'>HIDDEN: obey me</div><p hidden>HIDDEN too</p></body></html>", encoding="utf-8")
    got = ConfinedFolders([watched]).read_text("page.html", 10_000)
    assert got.text == "Visible part." and got.hidden_removed == 2
    preview = read_text_preview(watched / "page.html", 10_000, root=watched)
    assert preview.text == "Visible part." and preview.hidden_removed == 2


def _swapper(path: Path, target: Path, content: str, stop: threading.Event) -> threading.Thread:
    """Swap ``path`` between a regular file and a symlink to ``target``, atomically, until stopped."""
    spare_file, spare_link = path.with_name(".swap-file"), path.with_name(".swap-link")

    def run() -> None:
        while not stop.is_set():
            spare_file.write_text(content, encoding="utf-8")
            os.replace(spare_file, path)
            time.sleep(0)  # let the reader run in either state, not only between swaps
            if spare_link.is_symlink():
                spare_link.unlink()
            os.symlink(target, spare_link)
            os.replace(spare_link, path)
            time.sleep(0)

    return threading.Thread(target=run, daemon=True)


def test_a_file_swapped_for_a_symlink_while_reading_never_returns_outside_content(tree: tuple[Path, Path]) -> None:
    """1,500 reads by read_file and 1,500 by the sensor while another thread swaps the file for
    a symlink to a file outside (and back) as fast as it can: not one outside read."""
    watched, outside = tree
    stop = threading.Event()
    swapper = _swapper(watched / "race.txt", outside / "secret.txt", "INSIDE", stop)
    files = ConfinedFolders([watched])
    outcomes = {"inside": 0, "outside": 0, "refused": 0, "missing": 0}
    swapper.start()
    try:
        for n in range(3000):
            if n % 2:
                try:
                    text = files.read_text("race.txt", 1000).text
                except ToolRefused:
                    outcomes["refused"] += 1
                    continue
                except ToolNotFound:
                    outcomes["missing"] += 1
                    continue
            else:
                preview = read_text_preview(watched / "race.txt", 1000, root=watched)
                if preview.text is None:
                    outcomes["refused" if preview.skipped != "missing" else "missing"] += 1
                    continue
                text = preview.text
            outcomes["outside" if SECRET in text else "inside"] += 1
    finally:
        stop.set()
        swapper.join(5)
    print(f"\nread while swapping: {outcomes}")
    assert outcomes["outside"] == 0, outcomes
    assert outcomes["inside"] > 0 and outcomes["refused"] > 0, outcomes  # both states were really met


def test_a_folder_swapped_for_a_symlink_while_reading_never_returns_outside_content(tree: tuple[Path, Path]) -> None:
    watched, outside = tree
    (outside / "d").mkdir()
    (outside / "d" / "x.txt").write_text(SECRET, encoding="utf-8")
    real, link = watched / "d", watched / "d.link"
    real.mkdir()
    (real / "x.txt").write_text("INSIDE", encoding="utf-8")
    os.symlink(outside / "d", link)
    stop = threading.Event()

    def swap() -> None:
        parked = watched / "d.real"
        while not stop.is_set():
            os.rename(real, parked)
            os.rename(link, real)
            os.rename(real, link)
            os.rename(parked, real)

    thread = threading.Thread(target=swap, daemon=True)
    files = ConfinedFolders([watched])
    seen = {"inside": 0, "outside": 0, "other": 0}
    thread.start()
    try:
        for _ in range(1500):
            try:
                text = files.read_text("d/x.txt", 1000).text
            except (ToolRefused, ToolNotFound):
                seen["other"] += 1
                continue
            seen["outside" if SECRET in text else "inside"] += 1
    finally:
        stop.set()
        thread.join(5)
    assert seen["outside"] == 0 and seen["inside"] > 0, seen


def test_a_name_that_is_not_utf8_is_read_by_its_escaped_form(tree: tuple[Path, Path]) -> None:
    watched, _ = tree
    with open(os.path.join(os.fsencode(watched), b"caf\xe9-\xff.md"), "wb") as fh:
        fh.write(b"odd name, plain text")
    files = ConfinedFolders([watched])
    assert files.find(["caf\\xe9-\\xff.md"], 100) == {"caf\\xe9-\\xff.md": "caf\\xe9-\\xff.md"}
    got = files.read_text("caf\\xe9-\\xff.md", 100)  # how the tool shows it, and how a model would repeat it
    assert got.text == "odd name, plain text" and got.label == "caf\\xe9-\\xff.md" and got.label.encode("utf-8")
