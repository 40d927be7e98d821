"""Engines: what ranks a query over an index. :mod:`.base` is the contract and the registry (entry-point group
``rag_eval.engines``); the built-in plug-ins are FTS5's bm25 statement (:mod:`.fts5`), the exact impact postings
(:mod:`.impact`) and bm25s as a peer (:mod:`.bm25s`), found through the registry like any other."""
