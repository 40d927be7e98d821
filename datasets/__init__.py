"""Labelled datasets written for rag-eval, shipped as package data."""
