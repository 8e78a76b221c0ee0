"""WordPiece (the official Chinese ALBERTs' tokenizer) measured, in one run:

(a) tokenisation throughput of our in-graph WordPiece tokenizer
    (albert_tf/text/in_graph_wordpiece.py, inside a tf.function) against the Python
    `FullTokenizer` and Hugging Face's `BertTokenizerFast` (Rust), on the same vocab.txt and
    texts, at batch 1 and 64, on Chinese, mixed Chinese/English and English texts. The ids of
    all three are compared first (a difference stops the bench). HF runs in the separate venv
    given by --hf_python (bench/speed/hf_wordpiece_tokenizer.py as a child process), after ours
    and Python's, on the same batches in the same order.
(b) batch-1 raw-text serving latency (serving_default) of one quickstart-size classifier
    (configs/albert_quickstart.json, vocab_size set to the WordPiece vocabulary's) exported by
    export_classifier twice: with the WordPiece vocabulary and with a SentencePiece model; both
    SavedModels loaded back and called interleaved. Rows: WordPiece on Chinese text, WordPiece on
    English text, SentencePiece on the same English text (every text fills the 128 positions).

  nice -n -10 .venv/bin/python -m bench.speed.wordpiece_tokenization

The vocabulary is built here, the size of vocab_chinese.txt (~21k): the special tokens, ASCII,
the CJK Unified Ideographs U+4E00-U+9FA5, full-width punctuation and the most frequent English
words of the docstring corpus with their "##" suffix forms. Texts: Chinese sentences written for
this bench combined at random; English sentences from the docstring corpus; mixed ones splice
English words into Chinese. Ratios are ratios of the medians beside them (x > 1: ours faster).
"""

import collections
import json
import os
import random
import re
import subprocess
import tempfile

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS


def define_flags():
  """The command line's flags: defined when run as a script only, so that tests import this
  module beside the other benches (whose flags share names) without a DuplicateFlagError."""
  flags.DEFINE_string("hf_python", "/work/hfref/bin/python",
                      "Python interpreter of a venv with transformers (for BertTokenizerFast).")
  flags.DEFINE_integer("num_texts", 256, "Texts of each kind.")
  flags.DEFINE_integer("rounds", 200, "Timed rounds at batch 1 (a tenth, at least 10, at batch 64).")
  flags.DEFINE_integer("serving_rounds", 60, "Timed serving rounds (batch 1).")
  flags.DEFINE_integer("seq_length", 128, "Sequence length of the exports.")
  flags.DEFINE_string("work_dir", None, "Where the vocabulary and SavedModels go (default: temp).")
  flags.DEFINE_string("output_json", None, "Default: bench/speed/results/wordpiece_tokenization.json")


RESULTS_DIR = os.path.join(common.REPO, "bench", "speed", "results")
BATCH_SIZES = (1, 64)
KINDS = ("chinese", "mixed", "english")
ZH_SENTENCES = [
    "今天早上我们在公园里跑步，天气非常好。", "这家饭店的菜很好吃，价格也不贵。",
    "他每天坐地铁去公司上班，路上要一个小时。", "我的朋友下个月要去北京参加一个会议。",
    "学生们在图书馆里安静地看书。", "这部电影讲的是一个小女孩和她的狗的故事。",
    "明天可能会下雨，出门的时候记得带伞。", "我们公司今年的销售额比去年增长了百分之二十。",
    "老师说这次考试的题目不太难。", "她在大学里学习计算机科学，成绩一直很好。",
    "周末的时候，我喜欢和家人一起去爬山。", "这个城市的交通越来越方便了。",
]
ZH_PUNCTUATION = "，。！？；：、“”‘’（）《》【】…—"


def build_texts(corpus_lines, num_texts, seed=0):
  """{kind: [num_texts strings]}: Chinese, mixed Chinese/English, English (docstring lines)."""
  rng = random.Random(seed)
  english = [line for line in corpus_lines if 60 <= len(line) <= 200][:4 * num_texts]
  words = " ".join(english).split()
  texts = {"chinese": [], "mixed": [], "english": rng.sample(english, num_texts)}
  for _ in range(num_texts):
    texts["chinese"].append("".join(rng.sample(ZH_SENTENCES, rng.randint(2, 4))))
    pieces = []
    for sentence in rng.sample(ZH_SENTENCES, rng.randint(2, 3)):
      cut = rng.randint(1, len(sentence) - 2)
      pieces.append(f"{sentence[:cut]} {' '.join(rng.sample(words, 3))} {sentence[cut:]}")
    texts["mixed"].append("".join(pieces))
  return texts


def build_vocab(path, corpus_lines, num_words=3000):
  """Writes a vocab_chinese.txt-sized WordPiece vocabulary; returns its size."""
  tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                  "[MASK]"]
  tokens += [chr(c) for c in range(33, 127)]
  tokens += ["##" + chr(c) for c in range(33, 127) if chr(c).isalnum()]
  tokens += [chr(c) for c in range(0x4E00, 0x9FA6)] + list(ZH_PUNCTUATION)
  counts = collections.Counter(w for line in corpus_lines
                               for w in re.findall(r"[a-z]+", line.lower()))
  frequent = [w for w, _ in counts.most_common(num_words)]
  tokens += frequent + ["##" + w for w in frequent[:num_words // 3] if len(w) > 2]
  tokens = list(dict.fromkeys(tokens))
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens) + "\n")
  return len(tokens)


def round_batches(num_texts, rounds, seed=1):
  """{batch: [[text index] per round]} (batch 64 gets a tenth of the rounds, at least 10)."""
  rng = random.Random(seed)
  return {str(b): [rng.choices(range(num_texts), k=b) for _ in range(
      rounds if b == 1 else max(10, rounds // 10))] for b in BATCH_SIZES}


def run_hf(work_dir, vocab_file, vocab_size, texts, batches):
  """BertTokenizerFast in the --hf_python venv: its ids and times (hf_wordpiece_tokenizer.py)."""
  request, result = (os.path.join(work_dir, f"hf_{n}.json") for n in ("request", "result"))
  with open(request, "w", encoding="utf-8") as f:
    json.dump({"vocab_file": vocab_file, "vocab_size": vocab_size, "do_lower_case": True,
               "texts": texts,
               "batches": batches, "warmup": 3}, f)
  script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_wordpiece_tokenizer.py")
  subprocess.run([FLAGS.hf_python, script, request, result], check=True)
  with open(result, encoding="utf-8") as f:
    return json.load(f)


def first_difference(name, reference, ids):
  """None when ids == reference, else a line naming the first text that differs."""
  for i, (want, got) in enumerate(zip(reference, ids)):
    if list(want) != list(got):
      return f"{name}: text {i} differs: {want[:20]} vs {got[:20]}"
  return None if len(reference) == len(ids) else f"{name}: {len(ids)} texts, not {len(reference)}"


def tokenization(vocab_file, texts, batches, hf):
  """Section (a): {kind: {batch: {tokenizer: summary, ratios}}}, after the ids check."""
  import tensorflow as tf  # lazy: a --help stays fast
  from albert_tf.text import tokenization as py_tokenization  # lazy: as above
  from albert_tf.text.in_graph_wordpiece import InGraphWordpieceTokenizer  # lazy: as above
  python = py_tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=True)
  ours = InGraphWordpieceTokenizer(vocab_file, max_seq_length=FLAGS.seq_length)
  ours_fn = tf.function(ours.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
  out = {}
  for kind in KINDS:
    reference = [python.encode(t) for t in texts[kind]]
    for name, ids in (("in-graph", ours_fn(tf.constant(texts[kind])).to_list()),
                      ("BertTokenizerFast", hf["ids"][kind])):
      difference = first_difference(name, reference, ids)
      if difference:
        raise SystemExit(f"error: {kind} texts: {difference}")
    out[kind] = {}
    for batch, rounds in batches[kind].items():
      chunks = [[texts[kind][i] for i in indices] for indices in rounds]
      tensors = [tf.constant(chunk) for chunk in chunks]
      position = {"ours": 0, "python": 0}

      def call(name, fn, inputs):
        def run():
          fn(inputs[position[name] % len(inputs)])
          position[name] += 1
        return run
      times = common.time_interleaved(
          {"ours": call("ours", ours_fn, tensors),
           "python": call("python", lambda chunk: [python.encode(t) for t in chunk], chunks)},
          len(rounds), warmup=0)
      times["hf"] = hf["times_ms"][kind][batch]
      row = {name: dict(common.summarize(ms), texts_per_second=int(batch) * 1000 /
                        common.summarize(ms)["median"]) for name, ms in times.items()}
      row["python_vs_ours"] = row["python"]["median"] / row["ours"]["median"]
      row["hf_vs_ours"] = row["hf"]["median"] / row["ours"]["median"]
      out[kind][batch] = row
      print(f"{kind:<8} batch {batch:>2}: ours {row['ours']['median']:.3f} ms, Python "
            f"{row['python']['median']:.3f} ms ({row['python_vs_ours']:.2f}x), HF "
            f"{row['hf']['median']:.3f} ms ({row['hf_vs_ours']:.2f}x)")
  return out


def serving(work_dir, vocab_file, vocab_size, texts):
  """Section (b): batch-1 serving_default latency of a WordPiece and a SentencePiece export."""
  import tensorflow as tf  # lazy: a --help stays fast
  from albert_tf import AlbertConfig  # lazy: as above
  from albert_tf.export import export_classifier  # lazy: as above
  from albert_tf.models.classifier import AlbertClassifier  # lazy: as above
  with open(os.path.join(common.REPO, "configs", "albert_quickstart.json"), encoding="utf-8") as f:
    config = dict(json.load(f), vocab_size=vocab_size)
  spm = common.spm_model(work_dir)
  model = AlbertClassifier(AlbertConfig.from_dict(config), num_classes=2)
  seq = FLAGS.seq_length
  paths = {name: export_classifier(model, os.path.join(work_dir, name), ["0", "1"], seq,
                                   text_pair=False, **files)
           for name, files in (("wordpiece", {"vocab_file": vocab_file}),
                               ("sentencepiece", {"spm_model_file": spm}))}
  fns = {name: tf.saved_model.load(path).signatures["serving_default"]
         for name, path in paths.items()}
  # One text of each kind long enough to fill every position after tokenisation.
  chinese = tf.constant(["".join(texts["chinese"][:4])])
  english = tf.constant([" ".join(texts["english"][:6])])
  calls = {"wordpiece chinese": lambda: fns["wordpiece"](text_a=chinese),
           "wordpiece english": lambda: fns["wordpiece"](text_a=english),
           "sentencepiece english": lambda: fns["sentencepiece"](text_a=english)}
  times = common.time_interleaved(calls, FLAGS.serving_rounds)
  rows = {name: common.summarize(ms) for name, ms in times.items()}
  reference = rows["sentencepiece english"]["median"]
  for name, row in rows.items():
    row["vs_sentencepiece"] = row["median"] / reference
    print(f"serving batch 1, {name:<22}: {row['median']:.2f} ms ({row['vs_sentencepiece']:.2f}x "
          f"SentencePiece)")
  return {"config": "configs/albert_quickstart.json", "vocab_size": vocab_size,
          "seq_length": seq, "batch": 1, "rounds": FLAGS.serving_rounds, "rows": rows}


def main(_):
  from albert_tf.tools.docstring_corpus import build_docstring_corpus  # lazy: as above
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="wordpiece_tokenization_")
  corpus = os.path.join(work_dir, "corpus.txt")
  build_docstring_corpus(corpus, max_bytes=2_000_000)
  with open(corpus, encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip()]
  vocab_file = os.path.join(work_dir, "vocab.txt")
  vocab_size = build_vocab(vocab_file, lines)
  texts = build_texts(lines, FLAGS.num_texts)
  batches = {kind: round_batches(FLAGS.num_texts, FLAGS.rounds) for kind in KINDS}
  results = {"machine": common.machine(), "vocab_size": vocab_size,
             "num_texts": FLAGS.num_texts,
             "mean_chars_per_text": {k: sum(map(len, t)) / len(t) for k, t in texts.items()}}
  hf = run_hf(work_dir, vocab_file, vocab_size, texts, batches)
  results["hf"] = dict(hf["versions"], tokenizer_class=hf["class"], backend=hf["backend"])
  results["ids_equal"] = True  # tokenization() stops the bench otherwise
  results["tokenization"] = tokenization(vocab_file, texts, batches, hf)
  results["serving"] = serving(work_dir, vocab_file, vocab_size, texts)
  results["uptime_after"] = common.uptime()
  common.write_results(FLAGS.output_json or os.path.join(RESULTS_DIR,
                                                         "wordpiece_tokenization.json"), results)


if __name__ == "__main__":
  define_flags()
  app.run(main)
