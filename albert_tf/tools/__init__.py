"""Small command-line tools for the steps the official release has no script for.

The library parts: docstring_corpus (the quickstart's corpus), pair_task (a sentence-pair task in
MRPC format), savedmodel_query (raw text -> an exported classifier). Each command runs as
`python -m albert_tf.tools.<tool>` (build_corpus, make_pair_task, query_savedmodel, train_spm:
entry-point shims); their flags are albert_tf/cli/<tool>.py's.
"""
