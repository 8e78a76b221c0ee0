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


# A WordPiece vocabulary over Chinese and English (the layout of the official vocab_chinese.txt:
# [PAD], [unused*], [UNK], [CLS], [SEP], [MASK], single characters, "##" continuations, words).
_ZH_CHARS = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家"
    "学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经"
    "头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者"
    "向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气"
    "信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活"
    "难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清"
    "物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功"
    "指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强"
    "步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版"
    "双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志"
    "飞观争究包组造落视济喜离虽坏兴")
_ZH_PUNCTUATION = "，。！？、；：“”‘’（）《》…—"
_EN_WORDS = (
    "the a an is was are of to and in it that this for on with as be by not no yes good bad "
    "movie film great terrible price model text hello world there what how why who she he they "
    "we you i my one two three very much more most un run play book read")
_EN_SUFFIXES = ("ing", "ed", "s", "es", "er", "ly", "able", "tion", "ment", "ness")


def make_wordpiece_vocab(path, cased=False):
  """Writes a small WordPiece vocabulary (< 1000 entries) over Chinese and English; returns path.

  Single ASCII letters and digits with their "##" forms, ASCII punctuation, ~450 common Chinese
  characters and full-width punctuation, ~70 English words and suffixes. `cased` adds the
  capital letters and a few capitalised words (a cased model's vocabulary)."""
  tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 6)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                "[MASK]"]
  letters = "abcdefghijklmnopqrstuvwxyz" + ("ABCDEFGHIJKLMNOPQRSTUVWXYZ" if cased else "")
  tokens += [chr(c) for c in range(33, 127) if not chr(c).isalnum()]
  tokens += list("0123456789") + list(letters)
  tokens += ["##" + c for c in "0123456789" + letters]
  tokens += list(dict.fromkeys(_ZH_CHARS)) + list(_ZH_PUNCTUATION)
  tokens += _EN_WORDS.split() + ["##" + s for s in _EN_SUFFIXES] + ["19", "##90", "100", "##00"]
  if cased:
    tokens += ["The", "Hello", "World", "She"]
  tokens = list(dict.fromkeys(tokens))
  assert len(tokens) < 1000, len(tokens)
  os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens) + "\n")
  return os.fspath(path)


# Texts for the WordPiece tokenizers: Chinese one character per token, mixed scripts and digits,
# accents (stripped only when lower-casing), control and zero-width characters (removed, not
# spaces), punctuation ASCII and full-width, unknown and over-long words (> 200 characters).
WORDPIECE_TEXTS = VARIED_TEXTS + [
    "我们的模型很好，电影也不错。",
    "中文English混合123文本，price是100元！",
    "他说：“你好”（测试）《书》…——完",
    "zero\u200bwidth\u200cjoin\u200d\ufeffmarks and soft\u00adhyphen",
    "controls\x00\x01\x07\x0b\x0c\x1c\x1f\x7f\x85 gone\ufffdhere",
    "line\u2028separator\u2029paragraph",
    "Played PLAYING unplayable readings",
    "x" * 201,
    "y" * 200,
    "\u00e9" * 150 + " " + "a" * 199 + "\u0301",
    "\u8c48\uf900 compatibility ideographs \U00020000\U0002a700",
    "\u03a3\u0391\u03a3 \u039f\u0394\u039f\u03a3' \u1fef\u037e\u0387",
    "\u00b7 \u00bf\u00a1 \u2018quotes\u2019 \u00ab\u00bb \u0e3f$ ^` ~| +=",
    "[CLS] [UNK] [SEP] ## ##ing ####",
]
