"""Data: the GLUE / SQuAD / RACE readers and features, pretraining TFRecords (pretraining/), and
the checks every input record passes (record_checks)."""
