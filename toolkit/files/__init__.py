"""The user's files: one reader per input kind, safe atomic outputs, renames that lose nothing, the path guard."""
