"""Engines: what ranks a query over an index (FTS5's bm25 statement, the exact impact postings, bm25s as a peer)."""
