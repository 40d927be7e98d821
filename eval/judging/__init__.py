"""``rag-eval judge``: pooling, the judging order and its decision, the judgments file, the page, oracle studies."""
