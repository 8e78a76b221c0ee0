"""Training: the Task interface, optimizers, strategies and the one trainer all scripts share."""
