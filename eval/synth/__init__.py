"""Synthetic known-item queries generated from a corpus, and the words they are drawn from."""
