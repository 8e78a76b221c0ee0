"""Data: corpora, pretraining TFRecords, and the GLUE / SQuAD / RACE readers and features."""
