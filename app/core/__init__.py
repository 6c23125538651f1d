"""The engine: pure Python (stdlib, pydantic, numpy). No Qt, no I/O libraries."""
