"""Small command-line tools for the steps the official release has no script for.

The library parts: docstring_corpus (the quickstart's corpus), pair_task (a sentence-pair task in
MRPC format), savedmodel_query (raw text -> an exported classifier). Their commands are
`python -m albert_tf.cli.<command>` (build_corpus, make_pair_task, query_savedmodel, and
train_spm for albert_tf/text/sentencepiece_training.py).
"""
