"""``python -m rag_eval`` runs the command line."""

from .cli import main

main()
