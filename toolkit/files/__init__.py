"""The user's files: one reader per input kind (questions files and TREC topics among them), safe atomic outputs,
TREC run files, renames that lose nothing, the path guard."""
