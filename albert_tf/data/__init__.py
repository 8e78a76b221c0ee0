"""Data: the GLUE / SQuAD / RACE readers and features, and pretraining TFRecords (pretraining/)."""
