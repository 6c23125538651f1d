"""Memory that outlives a session: memory objects (extraction, closing, links, consolidation) and
the topic index. Pure; the engine's memory service (``app.core.engine.memory``) stores and recalls."""
