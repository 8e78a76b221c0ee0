"""Text processing for ALBERT, in Python and in the TensorFlow graph (import the module):

  tokenization          the Python tokenizer of the official module (FullTokenizer,
                        preprocess_text, ...); also importable as `albert_tf.tokenization`
  packing               how token ids become [CLS] A [SEP] B [SEP] inputs (truncation rules for
                        classifier pairs and RACE choices), for Python lists and ragged tensors
  sentencepiece_training  training a SentencePiece model with the official settings
  in_graph_tokenizer    the serving tokenizer: raw strings -> encoder inputs inside the graph
  multiple_choice_preprocessor  RACE's article, question and options -> choice inputs in the graph
  hub_tokenization      a TF-Hub module's tokenization_info (SentencePiece asset, do_lower_case)

tokenization and sentencepiece_training load no TensorFlow (the tokenizer's workers rely on it);
the others do. This package itself imports nothing.
"""
