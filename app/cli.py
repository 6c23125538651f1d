"""pcm CLI (filled below)."""

def main() -> int:
    return 0
