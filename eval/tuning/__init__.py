"""``rag-eval tune``: the search space, the dev search, the held-back evidence and the recommendation."""
