"""Tools stage: the tool model, the registry, selection and the built-in tools."""
