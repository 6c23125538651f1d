"""The packaging check (``bash packaging/check.sh``): the built bundle, moved to an empty folder,
runs with a clean environment — PATH=/usr/bin:/bin, a fresh HOME, no venv, offscreen Qt — on its
own files and models; the .deb made from it installs and starts. Figures (size, the largest
parts, frozen vs venv startup in the same run) go to $PCM_PACKAGING_REPORT.

Skipped unless PCM_PACKAGING_CHECK=1 (check.sh sets it after building): minutes, and a build."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.bench_startup import SELF_TEST_TIMES, compare_startup, format_report
from tests.packaging.names import ROOT, bundle_dir, bundle_names

pytestmark = [
    pytest.mark.packaging,
    pytest.mark.skipif(os.environ.get("PCM_PACKAGING_CHECK") != "1",
                       reason="the packaging check: run bash packaging/check.sh"),
]

NAMES = bundle_names()
EXE = ".exe" if sys.platform == "win32" else ""
MCP_TOOLS = {"get_context_summary", "get_relevant_snippets", "configure_llm_provider", "record_event",
             "search_memory", "search_facts", "list_sessions", "get_status"}  # as tests/mcp checks them
FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[dict[str, Any]]:
    """Collects the figures; written as JSON to $PCM_PACKAGING_REPORT at the end."""
    yield FIGURES
    target = os.environ.get("PCM_PACKAGING_REPORT")
    if target:
        Path(target).write_text(json.dumps(FIGURES, indent=2) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of dist/<folder> in an empty folder (links kept as links); removed afterwards (1.4 GB)."""
    built = bundle_dir()
    if not (built / (NAMES["gui"] + EXE)).is_file():
        pytest.fail(f"no bundle at {built}: run bash packaging/build.sh")
    empty = tmp_path_factory.mktemp("elsewhere")
    assert not any(empty.iterdir())
    yield Path(shutil.copytree(built, empty / NAMES["folder"], symlinks=True))
    shutil.rmtree(empty, ignore_errors=True)


@pytest.fixture(scope="module")
def clean_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What `env -i` leaves plus the four variables a user's session would have."""
    home = tmp_path_factory.mktemp("home")
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1"}


def _run(argv: list[str | Path], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, cwd=env["HOME"])
    print(f"$ {' '.join(str(a) for a in argv)}  -> exit {done.returncode}\n{done.stdout}{done.stderr[-2000:]}")
    return done


# ---------------------------------------------------------------------------- what is inside


def test_the_bundle_carries_the_models_and_leaves_out_what_the_app_does_not_use(bundle: Path) -> None:
    inner = bundle / "_internal"
    manifest = json.loads((inner / "models" / "manifest.json").read_text(encoding="utf-8"))
    for entry in (e for e in manifest if e.get("default")):
        assert (inner / "models" / entry["path"].rstrip("/")).exists(), entry["name"]
    files = [p.relative_to(inner).as_posix() for p in inner.rglob("*")]
    dangling = [f for f in files if (inner / f).is_symlink() and not (inner / f).exists()]
    assert not dangling, dangling
    assert sorted(p.name for p in (inner / "PySide6/Qt/plugins/platforms").iterdir()) == ["libqoffscreen.so",
                                                                                        "libqxcb.so"]
    unwanted = {
        "CUDA": r"(^|/)(libcudart|libcublas|libcudnn|libnccl|libnvrtc)[^/]*$|^nvidia/",
        "tests": r"^torch/(test|include)/|^torch/bin/(?!torch_shm_manager$)|^pyarrow/tests/|/tests?/test_[^/]*\.py$",
        "tkinter": r"(^|/)(_?tkinter|tcl|tk)[^/]*$",
        "unused Qt modules": r"Qt6?(WebEngine|3D|Multimedia|Qml|Quick|Designer|Pdf|Charts|Bluetooth)",
        "GTK": r"(^|/)lib(gtk|gdk|atk|pango|cairo)[^/]*$",
    }
    for what, pattern in unwanted.items():
        found = [f for f in files if re.search(pattern, f)]
        assert not found, f"{what} in the bundle: {found[:10]}"
    assert (inner / "llama_cpp/lib/libllama.so").exists() and (inner / "resources/schemas").is_dir()


def test_it_runs_on_its_own_files_only(bundle: Path, clean_env: dict[str, str]) -> None:
    """The frozen interpreter's modules and search path are all inside the moved bundle."""
    code = ("import json, sys, app, torch, llama_cpp, lancedb, PySide6, sentence_transformers\n"
            "print(json.dumps({'exe': sys.executable, 'path': sys.path, 'files': [m.__file__ for m in "
            "(app, torch, llama_cpp, lancedb, PySide6, sentence_transformers)]}))")
    done = _run([bundle / NAMES["cli"], "--pcm-python", "-c", code], clean_env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(seen["exe"]).parent == bundle and Path(seen["exe"]).name in {NAMES["gui"] + EXE, NAMES["cli"] + EXE}
    outside = [p for p in seen["path"] + seen["files"] if p and not Path(p).is_relative_to(bundle)]
    assert not outside, outside


# ---------------------------------------------------------------------------- it works


def test_models_verify(bundle: Path, clean_env: dict[str, str]) -> None:
    done = _run([bundle / NAMES["cli"], "models", "verify", "--probe"], clean_env)
    assert done.returncode == 0
    rows = [line.split("\t") for line in done.stdout.strip().splitlines()]
    assert [(r[0], r[1]) for r in rows] == [("SmolLM2-135M-Instruct", "ok"), ("all-MiniLM-L6-v2", "ok")]
    assert all(Path(r[2].split(";")[0]).is_relative_to(bundle) for r in rows)
    assert "loads in llama.cpp" in rows[0][2]  # the probe ran in a child: pcm --pcm-python -c ...


def test_the_desktop_app_answers_one_input_on_the_bundled_model(bundle: Path, clean_env: dict[str, str]) -> None:
    done = _run([bundle / NAMES["gui"], "--self-test", "In one sentence: what is a branch?"], clean_env)
    assert done.returncode == 0
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("self-test:"))
    assert SELF_TEST_TIMES.search(line) and re.search(r"answered \([1-9]\d* words", line), line
    FIGURES["self_test"] = line


def test_pcm_ask_answers(bundle: Path, clean_env: dict[str, str]) -> None:
    done = _run([bundle / NAMES["cli"], "ask", "Name one planet of the solar system.", "--new"], clean_env)
    assert done.returncode == 0
    assert re.search(r"^turn [0-9a-f]{32}: starts a new branch; used ", done.stderr, re.M)
    assert done.stdout.strip()  # the answer alone


def test_pcm_mcp_lists_its_tools_to_the_official_client(bundle: Path, clean_env: dict[str, str]) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(command=str(bundle / NAMES["cli"]), args=["mcp"], env=clean_env,
                                   cwd=clean_env["HOME"])

    async def main() -> tuple[set[str], Any, Any]:
        async with Client(server, read_timeout_seconds=120) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            sessions = await client.call_tool("list_sessions", {})
            status = await client.call_tool("get_status", {})
            return tools, sessions, status

    tools, sessions, status = asyncio.run(main())
    assert tools == MCP_TOOLS
    assert not sessions.is_error and not status.is_error
    assert len(sessions.structured_content["sessions"]) >= 2  # the self-test's and pcm ask's, same data folder


# ---------------------------------------------------------------------------- figures


def test_startup_frozen_vs_venv_in_the_same_run(bundle: Path, clean_env: dict[str, str]) -> None:
    """Time to window and to ready, from process start, the two taking turns (median of N each)."""
    runs = int(os.environ.get("PCM_STARTUP_RUNS", "5"))
    reports = compare_startup(runs, {
        "venv (python -m app)": ([sys.executable, "-m", "app"], dict(os.environ)),
        "bundle (pcm-canvas, clean env)": ([str(bundle / NAMES["gui"])], clean_env),
    }, say=print)
    print(format_report(reports))
    FIGURES["startup"] = reports


def test_size_and_largest_parts(bundle: Path) -> None:
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        from sizes import part_sizes  # packaging/sizes.py, as build.sh prints it
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    total, parts = part_sizes(bundle)
    du = subprocess.run(["du", "-sh", str(bundle)], capture_output=True, text=True, check=True).stdout.split()[0]
    FIGURES["size"] = {"total_mb": round(total / 1e6), "du": du,
                       "largest": [{"part": p, "mb": round(b / 1e6)} for p, b in parts.most_common(3)]}
    print(FIGURES["size"])
    assert total < 2_000_000_000  # 1.5 GB today; a doubling means something unwanted came in


# ---------------------------------------------------------------------------- the .deb


def _deb() -> Path:
    debs = sorted((ROOT / "dist").glob(f"{NAMES['folder']}_{NAMES['version']}_*.deb"))
    if not debs:
        pytest.fail("no .deb in dist/: run bash packaging/build_deb.sh (packaging/check.sh does)")
    return debs[-1]


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="no dpkg-deb: not a Debian system")
def test_the_deb_installs_and_starts(clean_env: dict[str, str], tmp_path: Path) -> None:
    deb, gui, cli, pkg = _deb(), NAMES["gui"], NAMES["cli"], NAMES["folder"]
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    for wanted in (f"./opt/{pkg}/{gui}", f"./usr/bin/{gui} -> /opt/{pkg}/{gui}", f"./usr/bin/{cli} -> /opt/{pkg}/{cli}",
                   f"./usr/share/applications/{pkg}.desktop", f"./usr/share/icons/hicolor/256x256/apps/{pkg}.png",
                   f"./usr/share/mime/packages/{pkg}.xml"):
        assert wanted in listing, wanted
    FIGURES["deb"] = {"file": deb.name, "mb": round(deb.stat().st_size / 1e6)}
    was_installed = subprocess.run(["dpkg", "-s", pkg], capture_output=True).returncode == 0
    if os.geteuid() != 0:  # unpack instead of installing: the same files, started from their place
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
        done = _run([tmp_path / "opt" / pkg / gui, "--self-test", "Hi"], clean_env)
        assert done.returncode == 0
        FIGURES["deb"]["installed"] = "unpacked with dpkg-deb -x (not root)"
        return
    installed = _run(["dpkg", "-i", deb], dict(clean_env, PATH="/usr/sbin:/usr/bin:/sbin:/bin"))
    try:
        assert installed.returncode == 0
        FIGURES["deb"]["installed"] = "dpkg -i"
        desktop = Path(f"/usr/share/applications/{pkg}.desktop")
        if shutil.which("desktop-file-validate"):
            checked = _run(["desktop-file-validate", desktop], clean_env)
            assert checked.returncode == 0 and not checked.stdout.strip()
        entry = desktop.read_text(encoding="utf-8")
        assert f"Exec={gui} %f" in entry and f"StartupWMClass={NAMES['wm_class']}" in entry
        assert f"MimeType={NAMES['mime']};" in entry and "application/json" not in entry  # not every JSON file
        started = _run([gui, "--self-test", "Hi"], clean_env)  # found on PATH=/usr/bin:/bin
        assert started.returncode == 0 and "self-test: window in" in started.stdout
        assert _run([cli, "models", "verify"], clean_env).returncode == 0
        if shutil.which("xvfb-run"):  # the xcb platform plugin too, on a real (virtual) X server
            on_x = _run(["xvfb-run", "-a", gui, "--self-test", "Hi"], dict(clean_env, QT_QPA_PLATFORM="xcb"))
            assert on_x.returncode == 0 and "self-test: window in" in on_x.stdout
            FIGURES["deb"]["xcb"] = "started under xvfb-run"
    finally:
        if not was_installed:
            _run(["dpkg", "-r", pkg], dict(clean_env, PATH="/usr/sbin:/usr/bin:/sbin:/bin"))
