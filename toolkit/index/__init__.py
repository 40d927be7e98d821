"""The index file: its store and meta, the build that writes it (chunks, tokens, postings), locks, verification."""
