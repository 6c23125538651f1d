"""Context stage: ranking, retrieval channels, the gate and the compiler."""
