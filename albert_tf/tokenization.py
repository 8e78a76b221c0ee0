"""The official module's import path: `from albert_tf import tokenization` keeps working.

The tokenizer lives in `albert_tf.text.tokenization`; this module re-exports every name of the
official `tokenization.py` (`OFFICIAL_NAMES`: the public ones and the `_is_whitespace`,
`_is_control`, `_is_punctuation` helpers that users and the official tests call), plus
`check_vocabulary_fits` and `SPECIAL_TOKENS`. It loads no TensorFlow.
"""

from albert_tf.text.tokenization import (  # pylint: disable=unused-import
    OFFICIAL_NAMES,
    SPECIAL_TOKENS,
    SPIECE_UNDERLINE,
    BasicTokenizer,
    FullTokenizer,
    WordpieceTokenizer,
    _is_control,
    _is_punctuation,
    _is_whitespace,
    check_vocabulary_fits,
    convert_by_vocab,
    convert_ids_to_tokens,
    convert_to_unicode,
    convert_tokens_to_ids,
    encode_ids,
    encode_pieces,
    load_vocab,
    preprocess_text,
    printable_text,
    whitespace_tokenize,
)

__all__ = [
    "SPECIAL_TOKENS", "SPIECE_UNDERLINE", "BasicTokenizer", "FullTokenizer", "WordpieceTokenizer",
    "check_vocabulary_fits", "convert_by_vocab", "convert_ids_to_tokens", "convert_to_unicode",
    "convert_tokens_to_ids", "encode_ids", "encode_pieces", "load_vocab", "preprocess_text",
    "printable_text", "whitespace_tokenize",
]
