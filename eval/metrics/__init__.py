"""Retrieval metrics with trec_eval's definitions, and paired significance tests."""
