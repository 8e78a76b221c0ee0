"""The quickstart experiment: its recorder (record.py) writes results/quickstart*.json."""
