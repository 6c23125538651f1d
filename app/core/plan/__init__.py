"""Plan stage: the context plan (CRS) model, the plan builder, constraint checks and the tool policy."""
