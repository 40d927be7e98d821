"""Searching an index: the query compiler and processing, ranking, snippets, reads, the evidence result, batches."""
