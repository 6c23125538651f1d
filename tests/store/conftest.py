"""Fixtures of the store tests: a real SQLite store and a real LanceDB index under tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.llm.fakes import HashEmbedder
from app.store.index import SearchIndex
from app.store.sqlite import SqliteStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "data" / "pcm.sqlite3")
    yield s
    s.close()


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder(dim=64)


@pytest.fixture
def index(tmp_path: Path, embedder: HashEmbedder) -> SearchIndex:
    return SearchIndex(tmp_path / "data" / "index", embedder)
