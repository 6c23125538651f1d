"""Session stage: the session graph, the session state (``as_of``) and messages as evidence."""
