"""Speed and memory benchmarks of our own code paths (see bench/__init__.py)."""
