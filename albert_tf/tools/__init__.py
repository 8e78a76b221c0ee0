"""Small command-line tools for the steps the official release has no script for.

Each module holds the library part and runs as `python -m albert_tf.tools.<tool>`; the flags of
every tool are albert_tf/cli/tools.py's.
"""
