"""Tiny NER data for the token-classification tests: CoNLL files whose words are in the tiny
SentencePiece model's corpus (tests/helpers/text.py), with learnable tags (the place names and
"Albert" are entities wherever they appear)."""

import os

# (word, tag) sentences; LOC and PER entities, one of two words ("New York" style is "Tokyo
# Japan" here, so that an I- tag exists).
SENTENCES = [
    [("Tokyo", "B-LOC"), ("is", "O"), ("the", "O"), ("capital", "O"), ("of", "O"),
     ("Japan", "B-LOC")],
    [("Paris", "B-LOC"), ("is", "O"), ("the", "O"), ("capital", "O"), ("of", "O"),
     ("France", "B-LOC")],
    [("Albert", "B-PER"), ("shares", "O"), ("parameters", "O"), ("across", "O"), ("all", "O"),
     ("layers", "O")],
    [("The", "O"), ("quick", "O"), ("brown", "O"), ("fox", "O"), ("jumps", "O"), ("over", "O"),
     ("the", "O"), ("lazy", "O"), ("dog", "O")],
    [("Rivers", "O"), ("flow", "O"), ("to", "O"), ("Tokyo", "B-LOC"), ("Japan", "I-LOC")],
    [("She", "O"), ("said", "O"), ("hello", "O"), ("to", "O"), ("Albert", "B-PER"),
     ("Paris", "I-PER")],
]


def conll_text(sentences, docstart=True, pos_column=True):
  """CoNLL-2003 style: `word POS tag` lines (or `word tag`), blank lines between sentences."""
  blocks = ["-DOCSTART- -X- O"] if docstart else []
  for sentence in sentences:
    blocks.append("\n".join(f"{word} {'NN ' if pos_column else ''}{tag}"
                            for word, tag in sentence))
  return "\n\n".join(blocks) + "\n"


def write_ner_data(directory, repeats=3):
  """train.txt (the sentences `repeats` times), dev.txt and test.txt (each sentence once);
  returns the directory."""
  os.makedirs(directory, exist_ok=True)
  for name, sentences in (("train.txt", SENTENCES * repeats), ("dev.txt", SENTENCES),
                          ("test.txt", SENTENCES[::-1])):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      f.write(conll_text(sentences))
  return directory
