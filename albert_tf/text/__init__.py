"""Text processing for ALBERT: SentencePiece training and the in-graph (serving) tokenizer.

The Python tokenizer that mirrors the official module is `albert_tf.tokenization`.
"""

from albert_tf.text.sentencepiece_training import CONTROL_SYMBOLS
from albert_tf.text.sentencepiece_training import OFFICIAL_USER_DEFINED_SYMBOLS
from albert_tf.text.sentencepiece_training import train_sentencepiece


def __getattr__(name):
  # The in-graph tokenizer imports TensorFlow and tensorflow_text; load it only when asked for so
  # that `import albert_tf.text` stays cheap for data tools.
  if name == "InGraphTokenizer":
    from albert_tf.text.in_graph_tokenizer import InGraphTokenizer
    return InGraphTokenizer
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CONTROL_SYMBOLS", "OFFICIAL_USER_DEFINED_SYMBOLS", "train_sentencepiece",
           "InGraphTokenizer"]
