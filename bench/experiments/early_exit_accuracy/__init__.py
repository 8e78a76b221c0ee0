"""Early exit's patience sweep: accuracy against the mean exit layer (README.md)."""
