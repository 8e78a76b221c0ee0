"""Accuracy experiments, one folder each with its README (see bench/__init__.py)."""
