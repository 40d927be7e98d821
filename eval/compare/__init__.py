"""Comparing systems on a dataset: the runner and its timing, rows, statistics, fusion, label-free measures, gates."""
