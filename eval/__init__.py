"""Evaluation harness: dataset loaders, runner, metrics, reports."""
