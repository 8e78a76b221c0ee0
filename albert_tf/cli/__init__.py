"""The command-line layer of the run_* scripts: shared absl flags and flags -> typed configs."""
