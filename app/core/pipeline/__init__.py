"""Pipeline stage: ``ContextBuilder`` (one build) and the build/turn record."""
