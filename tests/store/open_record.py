"""Open a data folder as the app lays it out and record one question: the lightest racer of the
concurrency tests (``test_concurrency.py``). Prints the recorded message id.

    python -m tests.store.open_record DATA_DIR "question" [START_AT]
"""

from __future__ import annotations

import sys
from pathlib import Path

from app.config import Settings
from app.store.index import SearchIndex
from app.store.sqlite import SqliteStore
from tests.store.fake_pcm import fake_embedder, wait_until


def main(argv: list[str]) -> int:
    folder, text = argv[0], argv[1]
    wait_until(argv[2] if len(argv) > 2 else None)
    layout = Settings(data_dir=Path(folder))
    store = SqliteStore(layout.db_path)
    try:
        index = SearchIndex(layout.index_dir, fake_embedder())
        sid = store.create_session("race")
        _, message = store.record_user_input(sid, text)
        index.index_messages(sid, [message])
    finally:
        store.close()
    print(message.message_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
