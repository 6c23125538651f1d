"""Tasks stage: the task stack, its decisions and the replay of task state."""
