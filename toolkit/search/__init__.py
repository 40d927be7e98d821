"""Searching an index: the request, the query compiler, the rows every engine reads hits from, snippets, reads, the
evidence result, batches and compare's searcher (engines rank; search asks them through the registry)."""
