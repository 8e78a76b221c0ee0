"""Text processing for ALBERT, in Python and in the TensorFlow graph.

  tokenization          the Python tokenizer of the official module (FullTokenizer,
                        preprocess_text, ...); also importable as `albert_tf.tokenization`
  packing               how token ids become [CLS] A [SEP] B [SEP] inputs (truncation rules for
                        classifier pairs and RACE choices), for Python lists and ragged tensors
  sentencepiece_training  training a SentencePiece model with the official settings
  in_graph_tokenizer    the serving tokenizer: raw strings -> encoder inputs inside the graph
"""

from albert_tf.text.sentencepiece_training import CONTROL_SYMBOLS
from albert_tf.text.sentencepiece_training import OFFICIAL_USER_DEFINED_SYMBOLS
from albert_tf.text.sentencepiece_training import train_sentencepiece


def __getattr__(name):
  # The in-graph tokenizer imports TensorFlow and tensorflow_text; load it only when asked for so
  # that `import albert_tf.text` stays cheap for data tools.
  if name == "InGraphTokenizer":
    from albert_tf.text.in_graph_tokenizer import InGraphTokenizer  # lazy: TensorFlow (PEP 562)
    return InGraphTokenizer
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CONTROL_SYMBOLS", "OFFICIAL_USER_DEFINED_SYMBOLS", "train_sentencepiece",
           "InGraphTokenizer"]
