"""The store's errors are CoreErrors; a missing record is a NoRecordError, not a KeyError."""

from __future__ import annotations

import pytest

from app.core.errors import CoreError, NoRecordError
from app.store.exchange import ExchangeError
from app.store.sqlite import NotFoundError, SqliteStore, StoreError


def test_a_missing_record_is_a_no_record_error(store: SqliteStore) -> None:
    with pytest.raises(NoRecordError) as info:
        store.update_turn("nope", status="done")
    assert isinstance(info.value, NotFoundError) and isinstance(info.value, StoreError)
    assert not isinstance(info.value, KeyError)
    assert str(info.value) == "no turn 'nope'"


def test_store_errors_share_the_core_base() -> None:
    assert issubclass(StoreError, CoreError) and issubclass(ExchangeError, CoreError)
