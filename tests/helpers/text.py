"""Test helpers of the text area: a tiny SentencePiece model and tiny corpora, built in seconds.

Other areas' tests use `make_tiny_spm_model(tmp_dir)` to get a real ALBERT-convention SentencePiece
model (<pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4) without any download.
"""

import os

from albert_tf.text.sentencepiece_training import train_sentencepiece
from albert_tf.tools.docstring_corpus import build_docstring_corpus

# Hand-written documents with the cases the tokenizer tests need (digits with commas, accents,
# quotes); `write_tiny_corpus` adds docstring documents (standard library first), so the corpus is
# fixed for a given Python installation.
_SEED_TEXT = """\
The quick brown fox jumps over the lazy dog.
A sentence piece model splits words into frequent pieces.
Albert shares parameters across all transformer layers.
The factorized embedding keeps the vocabulary matrix small.
Sentence order prediction asks whether two segments were swapped.
Masked language modelling hides some tokens and predicts them.

It was 3,000 miles away, and the price was $3.50, not 4,25 euros.
Numbers like 1,234,567 and 3.0, 2.5, or 10, appear in text.
Café, naïve, résumé and jalapeño have accents that are removed.
She said "hello" and he said ``goodbye'' before the 2nd train.

Tokyo is the capital of Japan, and Paris is the capital of France.
Rivers flow to the sea, and mountains rise above the clouds.
Every document is separated from the next one by a blank line.
Training data is written as TFRecord files with fixed-length features.
"""


_DOCSTRING_CACHE = {}  # max_bytes -> text: read the installed sources once per test process


def write_tiny_corpus(path, repeats=20, docstring_bytes=150_000):
  """Writes a small corpus (hand-written documents + docstring documents); returns the path.

  One sentence per line, blank line between documents.
  """
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  if docstring_bytes not in _DOCSTRING_CACHE:
    doc_path = path + ".docstrings"
    build_docstring_corpus(doc_path, max_bytes=docstring_bytes)
    with open(doc_path, encoding="utf-8") as f:
      _DOCSTRING_CACHE[docstring_bytes] = f.read()
    os.remove(doc_path)
  docstrings = _DOCSTRING_CACHE[docstring_bytes]
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(repeats):
      f.write(_SEED_TEXT)
      f.write("\n")
    f.write(docstrings)
  return path


_MODEL_CACHE = {}  # (vocab_size,) -> (model bytes, vocab bytes): train once per test process


def make_tiny_spm_model(tmp_dir, vocab_size=400, name="tiny_spm"):
  """Writes a tiny ALBERT-convention SentencePiece model into tmp_dir; returns the .model path.

  The first call in a process trains it (about a second); later calls copy the cached bytes.
  The same inputs give the same model (fixed seed, single thread). Ids: <pad>=0, <unk>=1,
  [CLS]=2, [SEP]=3, [MASK]=4, then the official user symbols and learned pieces; the vocabulary
  has at most `vocab_size` pieces. `<name>.vocab` is written next to it.
  """
  tmp_dir = os.fspath(tmp_dir)
  os.makedirs(tmp_dir, exist_ok=True)
  prefix = os.path.join(tmp_dir, name)
  key = (vocab_size,)
  if key not in _MODEL_CACHE:
    corpus = write_tiny_corpus(prefix + "_corpus.txt")
    model_path = train_sentencepiece([corpus], prefix, vocab_size=vocab_size)
    with open(model_path, "rb") as f, open(prefix + ".vocab", "rb") as g:
      _MODEL_CACHE[key] = (f.read(), g.read())
    return model_path
  model_bytes, vocab_bytes = _MODEL_CACHE[key]
  with open(prefix + ".model", "wb") as f:
    f.write(model_bytes)
  with open(prefix + ".vocab", "wb") as f:
    f.write(vocab_bytes)
  return prefix + ".model"


# Sentences that exercise the tokenizer: accents, quotes, digits with commas, case, runs of
# spaces, non-Latin scripts, emoji, empty strings.
VARIED_TEXTS = [
    "",
    "   ",
    "Hello, World!",
    "  runs   of\tspaces \n and\u00a0no-break\u3000spaces  ",
    "Café naïve résumé jalapeño Ångström",
    "e\u0301te\u0301 (decomposed accents)",
    "She said \"hi\", ``quoted'' and 'single' \u201ccurly\u201d",
    "It was 3,000 miles; 1,234,567 people paid $3.50, 4,25 EUR and 10,",
    "3.0, 2.5, x3, a1,b2, 100,",
    "MiXeD CaSe WORDS and UPPER",
    "[CLS] spelled [SEP] as [MASK] text",
    "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0391\u0398\u0397\u039d\u0391 \u039f\u0394\u039f\u03a3",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u0966\u0967\u0968,",
    "emoji \U0001F600\U0001F44D\U0001F3FD and \U0001F1EF\U0001F1F5 flags",
    "\ufb01ne \u00bd \u2460 \uff21\uff22\uff23 \u2167 ligatures and compatibility forms",
    "\u0130stanbul \u00df STRASSE",
    "tab\tseparated\tvalues\r\nwindows line",
]


def make_digit_comma_spm_model(tmp_dir):
  """A tiny model whose vocabulary has pieces ending in digit + "," ("▁3.0," and "0,"), to
  exercise the digit-comma re-split. Returns the .model path."""
  tmp_dir = os.fspath(tmp_dir)
  os.makedirs(tmp_dir, exist_ok=True)
  corpus = os.path.join(tmp_dir, "digit_comma_corpus.txt")
  with open(corpus, "w", encoding="utf-8") as f:
    for i in range(400):
      f.write(f"in {1990 + i % 7}, the price was {i % 5}.0, and then x{i % 9}, done\n")
  return train_sentencepiece([corpus], os.path.join(tmp_dir, "digit_comma"), vocab_size=80,
                             user_defined_symbols=("\u25813.0,", "0,", "\""))
