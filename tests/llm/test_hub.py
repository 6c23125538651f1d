"""Downloads from a Hugging Face–compatible hub (``app.llm.hub``), against a local hub on 127.0.0.1
that serves a small real GGUF file in the hub's layout (``tests/llm/hub_server.py``)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from app.core.errors import ModelError
from app.core.ports import CancelToken
from app.llm.hub import CatalogEntry, download_model, hub_reachable, load_catalog, staging_dir
from tests.llm.gguf_util import gguf_bytes
from tests.llm.hub_server import LocalHub

REPO, FILE = "org/tiny-GGUF", "tiny-q8.gguf"
DATA = gguf_bytes(tensors=[("w", (1024, 768)), ("b", (512,))])  # ~3 MB: the worker reads 1 MB at a time


@pytest.fixture()
def hub():
    server = LocalHub().start()
    try:
        yield server
    finally:
        server.stop()


def entry(**kw: object) -> CatalogEntry:
    values = {"name": "Tiny", "repo": REPO, "file": FILE, "size_bytes": len(DATA), "parameters": "0.3M",
              "quantisation": "F32", "memory_gb": 0.1, "licence": "apache-2.0", "good_at": "tests", **kw}
    return CatalogEntry.model_validate(values)


def test_download_places_a_verified_file_and_reports_progress(hub: LocalHub, tmp_path: Path) -> None:
    hub.add(REPO, FILE, DATA)
    seen: list[tuple[int, int]] = []
    path = download_model(entry(), tmp_path, endpoint=hub.endpoint, on_progress=lambda d, t: seen.append((d, t)))
    assert path == tmp_path / FILE and path.read_bytes() == DATA
    assert seen[-1] == (len(DATA), len(DATA))
    assert not any(staging_dir(tmp_path, entry()).rglob("*.gguf")), "the staging copy was moved, not left behind"


def test_a_catalog_sha256_is_checked_and_a_mismatch_refused(hub: LocalHub, tmp_path: Path) -> None:
    hub.add(REPO, FILE, DATA)
    with pytest.raises(ModelError, match="checksum mismatch for Tiny"):
        download_model(entry(sha256="0" * 64), tmp_path, endpoint=hub.endpoint)
    assert not (tmp_path / FILE).exists()
    assert not any(staging_dir(tmp_path, entry()).rglob(FILE)), "the bad file is deleted"


def test_the_hubs_etag_is_checked_when_the_catalog_lists_no_hash(hub: LocalHub, tmp_path: Path) -> None:
    served = hub.add(REPO, FILE, DATA, etag="ab" * 32)  # the hub says another file's sha256
    with pytest.raises(ModelError, match="checksum mismatch"):
        download_model(entry(), tmp_path, endpoint=hub.endpoint)
    served.etag = None  # the hub's X-Linked-Etag is this file's sha256 again
    assert download_model(entry(), tmp_path, endpoint=hub.endpoint).read_bytes() == DATA


def test_a_full_disk_is_refused_before_downloading(hub: LocalHub, tmp_path: Path) -> None:
    hub.add(REPO, FILE, DATA, claimed_size=1 << 60)  # the hub says the file is an exabyte
    with pytest.raises(ModelError, match="not enough free disk space for Tiny"):
        download_model(entry(), tmp_path, endpoint=hub.endpoint)
    assert not any(m == "GET" for m, _, _ in hub.requests), "nothing was downloaded"


def test_a_killed_download_resumes_where_it_stopped(hub: LocalHub, tmp_path: Path) -> None:
    served = hub.add(REPO, FILE, DATA, rate=300_000)  # ~10 s for the whole file
    cancel = CancelToken()
    seen: list[int] = []

    def progress(done: int, _total: int) -> None:
        seen.append(done)
        if done > len(DATA) // 4:
            cancel.cancel()

    with pytest.raises(ModelError, match="cancelled"):
        download_model(entry(), tmp_path, endpoint=hub.endpoint, on_progress=progress, cancel=cancel)
    partial = max(seen)
    assert partial < len(DATA) and not (tmp_path / FILE).exists(), "the cancel stopped it midway"
    served.rate = 0
    path = download_model(entry(), tmp_path, endpoint=hub.endpoint)
    assert path.read_bytes() == DATA
    ranges = [r for m, _, r in hub.requests if m == "GET" and r]
    assert ranges, "the second download asked for the rest only"
    resumed_from = int(ranges[-1].split("=")[1].split("-")[0])
    assert 0 < resumed_from and resumed_from >= partial // 2


def test_a_missing_file_and_an_offline_hub_are_one_line(hub: LocalHub, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="has no tiny-q8.gguf"):
        download_model(entry(), tmp_path, endpoint=hub.endpoint)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(ModelError, match="cannot be reached") as info:
        download_model(entry(), tmp_path, endpoint=closed)
    assert "\n" not in str(info.value)
    line = hub_reachable(closed, timeout_s=1)
    assert line is not None and line.startswith("Offline:")
    assert hub_reachable(hub.endpoint) is None


def test_the_shipped_catalog_lists_recommended_models_by_memory() -> None:
    catalog = load_catalog(Path(__file__).resolve().parents[2] / "models" / "catalog.json")
    assert len(catalog) >= 4
    assert [e.memory_gb for e in catalog] == sorted(e.memory_gb for e in catalog)
    for e in catalog:
        assert e.file.endswith(".gguf") and "/" in e.repo and e.licence and e.good_at and e.size_bytes > 0
    assert any(1.0 <= float(e.parameters.rstrip("B")) <= 3.0 for e in catalog), "a 1–3 B model is offered"


def test_a_broken_catalog_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "catalog.json"
    bad.write_text(json.dumps([{"name": "x"}]), encoding="utf-8")
    with pytest.raises(ModelError, match="cannot be read"):
        load_catalog(bad)
