"""The system of record (SQLite) and the rebuildable search index (LanceDB)."""
