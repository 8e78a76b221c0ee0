"""The leaf utilities every layer reads (no TensorFlow at import; nothing above albert_tf.errors).

  cpu.py            this CPU's flags, oneDNN on/off, whether a bfloat16 matmul can run
  console.py        what a script prints: TensorFlow's log noise filtered, our lines plain
  fileio.py         local and gs:// files: atomic writes, JSON, globs
  file_patterns.py  a flag's comma-separated globs (--input_file) -> files, one rule
  kinds.py          the model kinds (encoder, pretrainer, classifier, ...), named once
  output_layout.py  the files of a run's output directory, named once
  export_format.py  the files of a SavedModel export, named once
  task_labels.py    a fine-tuning task's class names (GLUE lists, label_list.json)
  utf8.py           users' text decoded as UTF-8; a bad byte named by file, line and column
"""
