"""Does pretraining help named-entity recognition? The quickstart's model on real NER data.

Fine-tunes `run_ner.py` on a CoNLL-format data set (train, dev and test files: CoNLL-2003's
English files, or WNUT 2017 as `python -m albert_tf.cli.download_data --tasks=WNUT17` lays it
out) twice per seed: from the
quickstart's pretrained checkpoint, and from random weights of the same config and vocabulary,
with the same recipe, data order and seed. The learning rate is chosen for each start on the
dev F1 of the first seed (a tiny model wants a larger rate than ALBERT-base's 5e-5, and the
random start may want another than the pretrained one); the other seeds then run at that rate.
Each model is scored by seqeval's entity-level F1 on
the dev file (the script's --do_eval) and on the test file (the script's --do_predict output,
scored by the same seqeval function the script uses). Beside them, two baselines from the same
run: "all O" (no entity: F1 0) and a lookup tagger that gives each word its most frequent tag in
the training file (what memorising names reaches without a model).

  python -m albert_tf.cli.download_data --data_dir=data --tasks=WNUT17
  python -m bench.experiments.ner_pretraining.run --data_dir=data/conll2003 \
      --pretrained=quickstart_output/pretrain --learning_rates=1e-4,3e-4 \
      --max_seq_length=64 --doc_stride=32

Only the final checkpoint of each run is evaluated (--save_checkpoints_steps = --train_step),
so no checkpoint is chosen on the data it is scored on.
"""

import collections
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("data_dir", None, "train, dev and test CoNLL files (.txt/.conll).")
  flags.DEFINE_string("pretrained", os.path.join(common.REPO, "quickstart_output", "pretrain"),
                      "The pretrained output directory (make quickstart's).")
  flags.DEFINE_string("work_dir", "/tmp/albert_tf_bench_ner", "The fine-tuning runs.")
  flags.DEFINE_string("output_json", None, "Where the results go (default: bench/experiments/"
                      "results/ner_pretraining_<the data folder's name>.json).")
  flags.DEFINE_list("seeds", ["1", "2", "3"], "One fine-tuning run per seed and start.")
  flags.DEFINE_integer("train_step", 1000, "Fine-tuning steps of each run.")
  flags.DEFINE_integer("warmup_step", 100, "As run_ner.py's.")
  flags.DEFINE_list("learning_rates", ["3e-4", "1e-3", "3e-3"],
                    "Tried on the first seed; each start keeps its best on dev F1.")
  flags.DEFINE_integer("train_batch_size", 32, "As run_ner.py's.")
  flags.DEFINE_integer("max_seq_length", 128, "As run_ner.py's.")
  flags.DEFINE_integer("doc_stride", 64, "As run_ner.py's.")
  flags.mark_flag_as_required("data_dir")


def _file(data_dir, stem):
  for extension in (".txt", ".conll", ".jsonl"):
    path = os.path.join(data_dir, stem + extension)
    if os.path.exists(path):
      return path
  raise SystemExit(f"error: --data_dir={data_dir}: no {stem}.txt/.conll/.jsonl")


def _columns_file(path, predicted=False):
  """(words, gold tags[, predicted tags]) per sentence of a CoNLL file; predicted: the last
  column is run_ner.py's prediction, the one before it the gold tag."""
  sentences, words, gold, guess = [], [], [], []
  with open(path, encoding="utf-8") as f:
    for line in list(f) + [""]:
      columns = line.split()
      if not columns or columns[0] == "-DOCSTART-":
        if words:
          sentences.append((words, gold, guess))
        words, gold, guess = [], [], []
        continue
      words.append(columns[0])
      gold.append(columns[-2] if predicted else columns[-1])
      guess.append(columns[-1])
  return sentences


def _f1(gold, predicted):
  from albert_tf.tasks.token_classification import seqeval_results  # lazy: after flags parse
  result = seqeval_results(gold, predicted, "BIO")
  return {k: round(result[k], 4) for k in ("eval_f1", "eval_precision", "eval_recall")}


def _lookup_baseline(train, sentences):
  """Each word's most frequent training tag (exact word, then lower-cased; O if unseen), with
  an I- that cannot continue turned into B- so that seqeval reads whole entities."""
  exact, lower = collections.defaultdict(collections.Counter), collections.defaultdict(
      collections.Counter)
  for words, tags, _ in train:
    for word, tag in zip(words, tags):
      exact[word][tag] += 1
      lower[word.lower()][tag] += 1
  predicted = []
  for words, _, _ in sentences:
    tags = []
    for word in words:
      counts = exact.get(word) or lower.get(word.lower())
      tags.append(counts.most_common(1)[0][0] if counts else "O")
    predicted.append(tags)
  return _f1([s[1] for s in sentences], predicted)


def _read_eval_results(path):
  values = {}
  with open(path, encoding="utf-8") as f:
    for line in f:
      key, _, value = line.partition(" = ")
      values[key.strip()] = value.strip()
  return values


def _fine_tune(start, seed, learning_rate, data_dir):
  """One run_ner.py train + dev eval + test predict; its dev and test F1 and time."""
  pretrained = FLAGS.pretrained
  out = os.path.join(FLAGS.work_dir, f"{start}_seed{seed}_lr{learning_rate:g}")
  if os.path.exists(out):
    subprocess.run(["rm", "-rf", out], check=True)
  command = [sys.executable, os.path.join(common.REPO, "run_ner.py"),
             f"--data_dir={data_dir}", f"--output_dir={out}",
             f"--albert_config_file={os.path.join(pretrained, 'albert_config.json')}",
             f"--spm_model_file={os.path.join(pretrained, '30k-clean.model')}",
             "--do_train", "--do_eval", "--do_predict", f"--seed={seed}",
             f"--train_step={FLAGS.train_step}", f"--warmup_step={FLAGS.warmup_step}",
             f"--save_checkpoints_steps={FLAGS.train_step}",
             f"--learning_rate={learning_rate}",
             f"--train_batch_size={FLAGS.train_batch_size}",
             f"--max_seq_length={FLAGS.max_seq_length}", f"--doc_stride={FLAGS.doc_stride}",
             f"--log_every_n_steps={max(1, FLAGS.train_step // 5)}"]
  if start == "pretrained":
    command.append(f"--init_checkpoint={pretrained}")
  began = time.time()
  completed = subprocess.run(command, capture_output=True, text=True, check=False,
                             env=common.child_env())
  seconds = time.time() - began
  if completed.returncode:
    sys.stderr.write(completed.stdout[-3000:] + completed.stderr[-3000:])
    raise SystemExit(f"error: run_ner.py failed ({start}, seed {seed}): exit "
                     f"{completed.returncode}")
  dev = _read_eval_results(os.path.join(out, "eval_results.txt"))
  test = _columns_file(os.path.join(out, "test_predictions" + os.path.splitext(
      _file(data_dir, "test"))[1]), predicted=True)
  result = {"dev": {k: round(float(dev[k]), 4) for k in
                    ("eval_f1", "eval_precision", "eval_recall", "word_accuracy")},
            "test": _f1([s[1] for s in test], [s[2] for s in test]),
            "train_loss": round(float(dev["loss"]), 4), "wall_seconds": round(seconds, 1)}
  print(f"{start:10s} seed {seed} lr {learning_rate:g}: dev F1 {result['dev']['eval_f1']:.4f}, "
        f"test F1 {result['test']['eval_f1']:.4f} ({seconds:.0f} s)", flush=True)
  return result


def _summary(runs, split):
  values = [run[split]["eval_f1"] for run in runs]
  return {"mean": round(statistics.mean(values), 4),
          "stdev": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0,
          "min": min(values), "max": max(values)}


def main(_):
  data_dir = os.path.abspath(FLAGS.data_dir)
  results = {"machine": common.machine(), "data_dir": FLAGS.data_dir,
             "pretrained": os.path.relpath(os.path.abspath(FLAGS.pretrained), common.REPO),
             "recipe": {name: getattr(FLAGS, name) for name in (
                 "train_step", "warmup_step", "learning_rates", "train_batch_size",
                 "max_seq_length", "doc_stride")},
             "seeds": [int(s) for s in FLAGS.seeds]}
  with open(os.path.join(FLAGS.pretrained, "albert_config.json"), encoding="utf-8") as f:
    results["config"] = json.load(f)
  results["files"] = {}
  for split in ("train", "dev", "test"):
    with open(_file(data_dir, split), "rb") as f:  # which copy of the data set was scored
      results["files"][split] = {"name": os.path.basename(_file(data_dir, split)),
                                 "sha256": hashlib.sha256(f.read()).hexdigest()}
  train = _columns_file(_file(data_dir, "train"))
  results["sentences"] = {"train": len(train)}
  baselines = {"all_O": {}, "lookup": {}}
  for split in ("dev", "test"):
    sentences = _columns_file(_file(data_dir, split))
    results["sentences"][split] = len(sentences)
    baselines["all_O"][split] = _f1([s[1] for s in sentences],
                                    [["O"] * len(s[0]) for s in sentences])
    baselines["lookup"][split] = _lookup_baseline(train, sentences)
  results["baselines"] = baselines
  print(f"baselines: lookup tagger dev F1 {baselines['lookup']['dev']['eval_f1']:.4f}, test F1 "
        f"{baselines['lookup']['test']['eval_f1']:.4f}; all O: 0", flush=True)
  first, rest = results["seeds"][0], results["seeds"][1:]
  rates = [float(rate) for rate in FLAGS.learning_rates]
  sweep = {"pretrained": {}, "random": {}}
  for rate in rates:
    for start in sweep:  # interleaved: the machine's load hits both alike
      sweep[start][rate] = _fine_tune(start, first, rate, data_dir)
  results["learning_rate_sweep"] = {
      start: [dict(learning_rate=rate, seed=first, **run) for rate, run in by_rate.items()]
      for start, by_rate in sweep.items()}
  chosen = {start: max(rates, key=lambda rate, s=start: sweep[s][rate]["dev"]["eval_f1"])
            for start in sweep}
  results["learning_rate"] = chosen
  print(f"learning rates chosen on dev F1 of seed {first}: {chosen}", flush=True)
  runs = {start: [dict(seed=first, **sweep[start][chosen[start]])] for start in sweep}
  for seed in rest:
    for start in runs:
      runs[start].append(dict(seed=seed, **_fine_tune(start, seed, chosen[start], data_dir)))
  results["runs"] = runs
  results["f1"] = {start: {split: _summary(runs[start], split) for split in ("dev", "test")}
                   for start in runs}
  results["uptime_after"] = common.uptime()
  for start in runs:
    print(f"{start:10s}: dev F1 {results['f1'][start]['dev']['mean']:.4f} "
          f"± {results['f1'][start]['dev']['stdev']:.4f}, test F1 "
          f"{results['f1'][start]['test']['mean']:.4f} ± "
          f"{results['f1'][start]['test']['stdev']:.4f} ({len(runs[start])} seeds)")
  common.write_results(FLAGS.output_json or os.path.join(
      common.REPO, "bench", "experiments", "results",
      f"ner_pretraining_{os.path.basename(data_dir)}.json"), results)


if __name__ == "__main__":
  define_flags()
  app.run(main)
