"""Data: the GLUE / SQuAD / RACE readers and features, your own TSV/CSV/JSON Lines files
(table_files, custom_task), pretraining TFRecords (pretraining/), and the checks every input
record passes (record_checks)."""
