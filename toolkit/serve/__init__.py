"""``rag-eval serve``: indexes handed to agents as Model Context Protocol tools."""
