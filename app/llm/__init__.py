"""Local models: llama.cpp chat, sentence-transformers embedder, the model manifest, scripted fakes."""
