"""Repository maintenance beside the user-facing scripts: quickstart.sh (make quickstart) and
docs_tables.py (the measured figures of README.md and docs/ against their results files)."""
