"""Datasets and their formats: the in-memory dataset, BEIR, TREC, SQuAD-style sets, shipped sets, knowledge bases,
splits."""
