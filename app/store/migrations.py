"""Ordered, named schema migrations of the SQLite system of record.

``MIGRATIONS`` is applied in order by ``apply_migrations``; each applied name is recorded in
``schema_migrations`` so a database opened by a newer build only runs what it has not seen.
Never edit or reorder a shipped migration: append a new one. Every migration runs inside its own
transaction together with its ``schema_migrations`` row, so a crash leaves it either fully applied
or not at all.

Layout conventions (shared with ``app.store.sqlite``): every record table has its model's id as
``PRIMARY KEY``, a ``session_id`` and a per-session ``seq`` (insertion order), plain columns for
the fields that are queried or updated, JSON text for list/dict fields, and ``data``: a JSON object
holding every other field of the model (including unknown keys kept by ``extra="allow"``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from app.core.types import utc_now

Migration = tuple[str, Callable[[sqlite3.Connection], None]]


def _run(conn: sqlite3.Connection, statements: Sequence[str]) -> None:
    # executescript() would COMMIT the surrounding transaction, so statements run one by one.
    for statement in statements:
        conn.execute(statement)


_INITIAL: tuple[str, ...] = (
    """CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        meta TEXT,              -- JSON of Meta as imported/set; NULL = derive on export
        summary TEXT,           -- JSON of Summary or NULL
        doc_extras TEXT NOT NULL DEFAULT '{}'  -- unknown keys of an imported document, by path
    )""",
    """CREATE TABLE messages (
        message_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        author TEXT,
        content TEXT NOT NULL,
        at TEXT NOT NULL,
        refs TEXT NOT NULL DEFAULT '[]',
        turn_id TEXT,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    "CREATE INDEX messages_turn ON messages(turn_id)",
    """CREATE TABLE turns (
        turn_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        input_message_id TEXT NOT NULL REFERENCES messages(message_id),
        answer_message_id TEXT REFERENCES messages(message_id),
        anchor_node_id TEXT,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    """CREATE TABLE intents (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        turn_id TEXT NOT NULL REFERENCES turns(turn_id),
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        data TEXT NOT NULL,
        saved_at TEXT NOT NULL
    )""",
    "CREATE INDEX intents_turn ON intents(turn_id)",
    """CREATE TABLE context_plans (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        turn_id TEXT NOT NULL REFERENCES turns(turn_id),
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        data TEXT NOT NULL,
        saved_at TEXT NOT NULL
    )""",
    "CREATE INDEX context_plans_turn ON context_plans(turn_id)",
    """CREATE TABLE env_events (
        event_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        source TEXT NOT NULL,
        uri TEXT NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}',
        at TEXT NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    """CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        name TEXT NOT NULL,
        status TEXT NOT NULL,
        parent_task_id TEXT,
        depends_on TEXT NOT NULL DEFAULT '[]',
        result_evidence_ids TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    """CREATE TABLE evidences (
        evidence_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        source TEXT NOT NULL,
        content TEXT NOT NULL,
        confidence REAL NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        links TEXT NOT NULL DEFAULT '{}',
        valid_from TEXT NOT NULL,
        valid_to TEXT,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    """CREATE TABLE context_blocks (
        block_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        turn_id TEXT,
        ord INTEGER NOT NULL,   -- position within its turn's compiled context
        block_type TEXT NOT NULL,
        priority TEXT NOT NULL,
        token_estimate INTEGER NOT NULL,
        content TEXT NOT NULL,
        refs TEXT NOT NULL DEFAULT '[]',
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    "CREATE INDEX context_blocks_turn ON context_blocks(turn_id, ord)",
    """CREATE TABLE tool_calls (
        tool_call_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        turn_id TEXT,
        task_id TEXT,
        tool TEXT NOT NULL,
        status TEXT NOT NULL,
        called_at TEXT NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    """CREATE TABLE model_usage (
        model_usage_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        turn_id TEXT,
        task_id TEXT,
        stage TEXT NOT NULL,
        model TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        latency_ms REAL NOT NULL,
        at TEXT NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    """CREATE TABLE memory_fragments (
        fragment_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        content TEXT NOT NULL,
        keywords TEXT NOT NULL DEFAULT '[]',
        importance REAL NOT NULL,
        source_evidence_ids TEXT NOT NULL DEFAULT '[]',
        valid_from TEXT NOT NULL,
        valid_to TEXT,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    # Version 1 kept canvas positions inside ``data``; 0002 gives them columns.
    """CREATE TABLE graph_nodes (
        node_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        label TEXT NOT NULL,
        ref_id TEXT,
        attrs TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    """CREATE TABLE graph_edges (
        edge_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        seq INTEGER NOT NULL,
        src TEXT NOT NULL REFERENCES graph_nodes(node_id),
        dst TEXT NOT NULL REFERENCES graph_nodes(node_id),
        kind TEXT NOT NULL,
        attrs TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        data TEXT NOT NULL DEFAULT '{}',
        UNIQUE (session_id, seq)
    )""",
    """CREATE TABLE event_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT,
        at TEXT NOT NULL,
        type TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}'
    )""",
    "CREATE INDEX event_log_session ON event_log(session_id, seq)",
    """CREATE TRIGGER event_log_no_update BEFORE UPDATE ON event_log
       BEGIN SELECT RAISE(ABORT, 'event_log is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER event_log_no_delete BEFORE DELETE ON event_log
       BEGIN SELECT RAISE(ABORT, 'event_log is append-only: DELETE refused'); END""",
)


def _m0001_initial(conn: sqlite3.Connection) -> None:
    """All tables of the first release."""
    _run(conn, _INITIAL)


def _m0002_canvas_positions(conn: sqlite3.Connection) -> None:
    """Give canvas positions their own columns, moving any x/y/pinned kept in ``data``."""
    _run(
        conn,
        (
            "ALTER TABLE graph_nodes ADD COLUMN x REAL",
            "ALTER TABLE graph_nodes ADD COLUMN y REAL",
            "ALTER TABLE graph_nodes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0",
            """UPDATE graph_nodes SET
                   x = json_extract(data, '$.x'),
                   y = json_extract(data, '$.y'),
                   pinned = COALESCE(json_extract(data, '$.pinned'), 0),
                   data = json_remove(data, '$.x', '$.y', '$.pinned')""",
        ),
    )


def _m0003_turn_recovery(conn: sqlite3.Connection) -> None:
    """Which run owns an unfinished turn, and the answer text streamed so far.

    ``turns.owner`` names the run (``app.store.connection``'s run lease) that records, builds and
    answers the turn; once the run is gone an unfinished turn of it was interrupted. Rows of
    ``answer_checkpoints`` are scratch: the answer of a turn streaming now, as far as it went,
    replaced by the stored answer (or by the partial answer a recovery stores) and then removed.
    """
    _run(
        conn,
        (
            "ALTER TABLE turns ADD COLUMN owner TEXT",
            "CREATE INDEX turns_unfinished ON turns(status) "
            "WHERE status IN ('recorded', 'building', 'streaming')",
            """CREATE TABLE answer_checkpoints (
                turn_id TEXT PRIMARY KEY REFERENCES turns(turn_id),
                session_id TEXT NOT NULL REFERENCES sessions(session_id),
                text TEXT NOT NULL,
                pieces INTEGER NOT NULL,
                at TEXT NOT NULL
            )""",
        ),
    )


def _m0004_session_use(conn: sqlite3.Connection) -> None:
    """When a session was last opened (the app reopens the last used one) and whether it is
    archived (hidden from the list, never deleted; archiving is undone by clearing it)."""
    _run(
        conn,
        (
            "ALTER TABLE sessions ADD COLUMN opened_at TEXT",
            "ALTER TABLE sessions ADD COLUMN archived_at TEXT",
        ),
    )


def _m0006_model_usage_provider(conn: sqlite3.Connection) -> None:
    """Who answered each model call and what it cost, as columns (issue 15: providers).

    ``provider`` (the provider's id), ``status``, ``first_token_latency_ms``, ``cost`` and
    ``off_machine`` were kept in the ``data`` JSON (or did not exist); as columns the spending
    limits can sum today's and this month's cost with an index on ``at``. Existing rows are
    moved over: their values leave ``data`` (a row read back dumps as before).
    """
    moved = ("provider", "status", "first_token_latency_ms", "cost", "off_machine")
    _run(
        conn,
        (
            "ALTER TABLE model_usage ADD COLUMN provider TEXT NOT NULL DEFAULT 'llama.cpp'",
            "ALTER TABLE model_usage ADD COLUMN status TEXT NOT NULL DEFAULT 'success'",
            "ALTER TABLE model_usage ADD COLUMN first_token_latency_ms REAL",
            "ALTER TABLE model_usage ADD COLUMN cost REAL NOT NULL DEFAULT 0",
            "ALTER TABLE model_usage ADD COLUMN off_machine INTEGER NOT NULL DEFAULT 0",
            """UPDATE model_usage SET
                provider = COALESCE(json_extract(data, '$.provider'), provider),
                status = COALESCE(json_extract(data, '$.status'), status),
                first_token_latency_ms = json_extract(data, '$.first_token_latency_ms'),
                cost = COALESCE(json_extract(data, '$.cost'), 0),
                off_machine = COALESCE(json_extract(data, '$.off_machine'), 0)""",
            "UPDATE model_usage SET data = json_remove(data, "
            + ", ".join(f"'$.{name}'" for name in moved) + ")",
            "CREATE INDEX model_usage_at ON model_usage(at)",
        ),
    )


def _m0005_session_generation(conn: sqlite3.Connection) -> None:
    """A session's own generation settings (temperature, answer length, standing instruction) as
    JSON; NULL keeps the app's defaults."""
    _run(conn, ("ALTER TABLE sessions ADD COLUMN generation TEXT",))


def _m0007_topics(conn: sqlite3.Connection) -> None:
    """The workspace's topic index (issue 13): topics with their aliases, which messages mention
    them (and by which term and rule), and the append-only log of creates, merges and splits."""
    _run(
        conn,
        (
            """CREATE TABLE topics (
                topic_id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                aliases TEXT NOT NULL DEFAULT '{}',
                created_at TEXT NOT NULL
            )""",
            """CREATE TABLE topic_mentions (
                topic_id TEXT NOT NULL REFERENCES topics(topic_id),
                session_id TEXT NOT NULL REFERENCES sessions(session_id),
                message_id TEXT NOT NULL,
                term TEXT NOT NULL,
                rule TEXT NOT NULL,
                PRIMARY KEY (topic_id, message_id, term)
            )""",
            "CREATE INDEX topic_mentions_session ON topic_mentions(session_id)",
            """CREATE TABLE topic_log (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                at TEXT NOT NULL,
                op TEXT NOT NULL,
                payload TEXT NOT NULL DEFAULT '{}'
            )""",
            """CREATE TRIGGER topic_log_no_update BEFORE UPDATE ON topic_log
               BEGIN SELECT RAISE(ABORT, 'topic_log is append-only: UPDATE refused'); END""",
        ),
    )


def _m0008_summaries(conn: sqlite3.Connection) -> None:
    """Summaries of sessions, branches, tasks and topics at three levels (issue 14, DESIGN.md §4):
    one row per version, ``based_on`` the previous one, which gets ``valid_to`` (never deleted);
    ``cache_key`` finds an unchanged subject's summary again; the rest of the record in ``data``."""
    _run(
        conn,
        (
            """CREATE TABLE summaries (
                summary_id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL REFERENCES sessions(session_id),
                seq INTEGER NOT NULL,
                subject TEXT NOT NULL,
                subject_id TEXT NOT NULL,
                level TEXT NOT NULL CHECK (level IN ('brief', 'standard', 'detailed')),
                cache_key TEXT NOT NULL,
                based_on TEXT,
                created_at TEXT NOT NULL,
                valid_to TEXT,
                data TEXT NOT NULL
            )""",
            "CREATE INDEX summaries_subject ON summaries(session_id, subject, subject_id, level)",
            "CREATE INDEX summaries_cache ON summaries(cache_key)",
        ),
    )


def _m0009_provenance(conn: sqlite3.Connection) -> None:
    """Where a session's title, a message or a memory came from (``origin``: NULL made here,
    'imported', 'agent') and when the user accepted a memory from outside (``accepted_at``), kept
    beside the record and never exported; and a write number on memories (``rev``: the highest in the table plus one,
    given by every write under SQLite's write lock), so a process that keeps them in memory reads
    again exactly what other processes wrote since (``memories_since``)."""
    _run(
        conn,
        (
            "ALTER TABLE sessions ADD COLUMN origin TEXT",
            "ALTER TABLE messages ADD COLUMN origin TEXT",
            "ALTER TABLE memory_fragments ADD COLUMN origin TEXT",
            "ALTER TABLE memory_fragments ADD COLUMN accepted_at TEXT",
            "ALTER TABLE memory_fragments ADD COLUMN rev INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX memory_fragments_rev ON memory_fragments(rev)",
        ),
    )


def _m0010_summaries_seq(conn: sqlite3.Connection) -> None:
    """Index the summaries by their per-session ``seq``: every new version asks for the session's
    highest, which without it read every version of the session (quadratic over an import)."""
    _run(conn, ("CREATE INDEX summaries_seq ON summaries(session_id, seq)",))


def _m0011_event_log_type(conn: sqlite3.Connection) -> None:
    """Index the event log by type within a session: the latest event of a type
    (``last_event``: the task book's revision, read by a session's first build) otherwise read the
    session's whole log newest first, 430,000 rows and ~115 ms at 100,000 turns when it has none."""
    _run(conn, ("CREATE INDEX event_log_type ON event_log(session_id, type, seq)",))


MIGRATIONS: list[Migration] = [
    ("0001_initial", _m0001_initial),
    ("0002_canvas_positions", _m0002_canvas_positions),
    ("0003_turn_recovery", _m0003_turn_recovery),
    ("0004_session_use", _m0004_session_use),
    ("0005_session_generation", _m0005_session_generation),
    ("0006_model_usage_provider", _m0006_model_usage_provider),
    ("0007_topics", _m0007_topics),
    ("0008_summaries", _m0008_summaries),
    ("0009_provenance", _m0009_provenance),
    ("0010_summaries_seq", _m0010_summaries_seq),
    ("0011_event_log_type", _m0011_event_log_type),
]


def applied_migrations(conn: sqlite3.Connection) -> list[str]:
    """Return the names recorded in ``schema_migrations``, in the order they were applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "id INTEGER PRIMARY KEY, name TEXT UNIQUE, applied_at TEXT)"
    )
    return [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY id")]


def apply_migrations(
    conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS
) -> list[str]:
    """Apply the not-yet-applied ``migrations`` in order; return the names applied now.

    ``conn`` must be in autocommit mode (``isolation_level=None``) and outside a transaction.
    Safe when several processes open the same database at once: each migration runs under the
    database's write lock after checking again that no one applied it meanwhile.
    """
    done = set(applied_migrations(conn))
    applied: list[str] = []
    for name, migrate in migrations:
        if name in done:
            continue
        # Another process may open the same fresh folder at the same moment: the write lock is
        # taken first, then the name is checked again, so each migration runs exactly once.
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM schema_migrations WHERE name = ?", (name,)).fetchone():
                conn.execute("COMMIT")
                continue
            migrate(conn)
            conn.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                (name, utc_now()),
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        applied.append(name)
    return applied
