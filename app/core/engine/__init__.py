"""Engine stage: the facade and the services it composes over one ``EngineContext``."""
