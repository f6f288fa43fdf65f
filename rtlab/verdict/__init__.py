"""Verdicts over runs: the regression verdict (compare, stats, baseline), change points over the history and bisecting a regression."""
