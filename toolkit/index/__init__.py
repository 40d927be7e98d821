"""The index file: its store and meta, the query processing it records, the build that writes it (chunks, tokens, an
engine's postings), locks, the cached indexes compare builds, and verification (the file itself, its sources)."""
