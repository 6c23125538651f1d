"""The engine: pure Python (stdlib, pydantic, networkx, numpy). No Qt, no I/O libraries."""
