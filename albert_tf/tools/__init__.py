"""Small command-line tools for the steps the official release has no script for."""
