"""The official module's import path: `from albert_tf import tokenization` keeps working.

The tokenizer lives in `albert_tf.text.tokenization`; this module re-exports its public names
(the official `tokenization.py` API plus `check_vocabulary_fits`). It loads no TensorFlow.
"""

from albert_tf.text.tokenization import (
    SPECIAL_TOKENS,
    SPIECE_UNDERLINE,
    BasicTokenizer,
    FullTokenizer,
    WordpieceTokenizer,
    check_vocabulary_fits,
    convert_by_vocab,
    convert_to_unicode,
    encode_ids,
    encode_pieces,
    load_vocab,
    preprocess_text,
    printable_text,
    whitespace_tokenize,
)

__all__ = [
    "SPECIAL_TOKENS", "SPIECE_UNDERLINE", "BasicTokenizer", "FullTokenizer", "WordpieceTokenizer",
    "check_vocabulary_fits", "convert_by_vocab", "convert_to_unicode", "encode_ids",
    "encode_pieces", "load_vocab", "preprocess_text", "printable_text", "whitespace_tokenize",
]
