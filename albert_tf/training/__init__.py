"""Training: the one runner and the one Trainer all scripts share, with their optimizers and strategies."""
