"""The paper's inter-sentence coherence check (ALBERT, section 4.6), at small scale.

The paper pretrains with next-sentence prediction (NSP) and with sentence-order prediction (SOP)
and evaluates both models on both tasks:

                    evaluated on NSP   evaluated on SOP
  trained with NSP        90.5             52.0
  trained with SOP        78.9             86.5

(ALBERT-base, Table 5.) A model trained on NSP does not learn sentence order (chance on SOP),
while one trained on SOP also does NSP well. This bench reproduces the experiment with the real
scripts on the built-in corpus (docstrings of the installed packages): one SentencePiece model,
pretraining TFRecords made by create_pretraining_data.py with and without
--random_next_sentence (same seed), two tiny models pretrained by run_pretraining.py with the
same steps and seed, each evaluated by `run_pretraining.py --do_eval` on NSP and on SOP records
of held-out documents. It prints the 2x2 table (plus masked-LM accuracy) beside the paper's.

  python -m bench.experiments.coherence_ablation.run --steps=600

The labels of both record kinds are "1 = not the original continuation" (NSP: B is random; SOP:
A and B swapped), so one sentence-order/next-sentence head serves both evaluations.
"""

import json
import os
import shutil
import subprocess
import sys
import time

from absl import app
from absl import flags

from bench import common

REPO = common.REPO
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the baselines read records with TensorFlow

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/tmp/albert_tf_bench_coherence", "Corpus, records, runs.")
flags.DEFINE_string("output_json",
                    os.path.join(common.REPO, "bench", "experiments", "results",
                                 "coherence_ablation.json"), "Where the 2x2 table goes.")
flags.DEFINE_integer("corpus_mb", 6, "Size of the built-in corpus in MB.")
flags.DEFINE_float("eval_share", 0.1, "Share of the documents held out for evaluation.")
flags.DEFINE_integer("vocab_size", 4000, "SentencePiece vocabulary size.")
flags.DEFINE_integer("max_seq_length", 128, "As the official flag.")
flags.DEFINE_integer("steps", 600, "Pretraining steps of each model.")
flags.DEFINE_integer("batch_size", 32, "Pretraining batch size.")
flags.DEFINE_float("learning_rate", 0.005, "LAMB learning rate.")
flags.DEFINE_integer("dupe_factor", 2, "As the official flag.")
flags.DEFINE_integer("max_eval_steps", 40, "Evaluation batches (of 64) per evaluation.")
flags.DEFINE_integer("seed", 12345, "Data and training seed (the same for both models).")
flags.DEFINE_bool("reuse_data", False, "Reuse the corpus, SentencePiece model and records of a "
                  "previous run in --work_dir (same flags).")

PAPER = {("nsp", "nsp"): 0.905, ("nsp", "sop"): 0.520, ("sop", "nsp"): 0.789,
         ("sop", "sop"): 0.865}


def _run(args, log):
  """Runs `python <args>` in the repo; stops the bench with the log's tail on failure."""
  started = time.time()
  proc = subprocess.run([sys.executable] + args, cwd=REPO, capture_output=True, text=True,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), check=False)
  with open(log, "w", encoding="utf-8") as f:
    f.write(proc.stdout + proc.stderr)
  if proc.returncode:
    sys.exit(f"{' '.join(args[:1])} failed (exit {proc.returncode}), see {log}:\n"
             f"{proc.stderr[-2000:]}")
  print(f"  {os.path.basename(args[0]) if args[0] != '-m' else args[1]}: "
        f"{time.time() - started:.0f} s", flush=True)
  return proc.stdout


def _split_corpus(corpus, train_path, eval_path, eval_share):
  """Writes the first documents to train_path and the last `eval_share` of them to eval_path
  (documents are separated by blank lines), so evaluation pairs are unseen text."""
  with open(corpus, encoding="utf-8") as f:
    documents = [d for d in f.read().split("\n\n") if d.strip()]
  cut = int(len(documents) * (1 - eval_share))
  for path, part in ((train_path, documents[:cut]), (eval_path, documents[cut:])):
    with open(path, "w", encoding="utf-8") as f:
      f.write("\n\n".join(part) + "\n")
  return cut, len(documents) - cut


def _records(text, output, spm, nsp, dupe_factor, log):
  args = ["create_pretraining_data.py", f"--input_file={text}", f"--output_file={output}",
          f"--spm_model_file={spm}", f"--max_seq_length={FLAGS.max_seq_length}",
          "--max_predictions_per_seq=20", f"--dupe_factor={dupe_factor}",
          f"--random_seed={FLAGS.seed}", "--progress=false"]
  if nsp:
    args.append("--random_next_sentence")
  _run(args, log)


def _label_baselines(path):
  """(share of label 1, accuracy of the rule "A longer than B -> label 1") of a record file:
  what an accuracy must beat to show that a model learned more than the label prior or the
  segment lengths (the official pairing makes an in-order B longer than A on average)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  a_longer, labels = [], []
  for raw in tf.data.TFRecordDataset(path):
    feature = tf.train.Example.FromString(raw.numpy()).features.feature
    segments = np.array(feature["segment_ids"].int64_list.value)
    mask = np.array(feature["input_mask"].int64_list.value)
    length_a = int(((segments == 0) & (mask == 1)).sum()) - 2  # [CLS] and [SEP]
    length_b = int(((segments == 1) & (mask == 1)).sum()) - 1
    a_longer.append(length_a > length_b)
    labels.append(feature["next_sentence_labels"].int64_list.value[0])
  a_longer, labels = np.array(a_longer), np.array(labels)
  return float(labels.mean()), float((a_longer == labels).mean())


def _eval_results(path):
  with open(path, encoding="utf-8") as f:
    return {k.strip(): float(v) for k, v in (l.split(" = ") for l in f if " = " in l)}


def main(argv):
  del argv
  work = FLAGS.work_dir
  os.makedirs(work, exist_ok=True)
  logs = os.path.join(work, "logs")
  os.makedirs(logs, exist_ok=True)
  started = time.time()
  print(f"coherence ablation in {work}: corpus {FLAGS.corpus_mb} MB, {FLAGS.steps} steps of "
        f"{FLAGS.batch_size}, seq {FLAGS.max_seq_length}", flush=True)

  corpus = os.path.join(work, "corpus.txt")
  train_text, eval_text = os.path.join(work, "train.txt"), os.path.join(work, "eval.txt")
  prefix = os.path.join(work, "spm", "30k-clean")
  spm = prefix + ".model"
  if not FLAGS.reuse_data:
    _run(["-m", "albert_tf.cli.build_corpus", f"--output_file={corpus}",
          f"--max_mb={FLAGS.corpus_mb}"], os.path.join(logs, "corpus.log"))
    n_train, n_eval = _split_corpus(corpus, train_text, eval_text, FLAGS.eval_share)
    print(f"  {n_train} training documents, {n_eval} held out", flush=True)
    _run(["-m", "albert_tf.cli.train_spm", f"--input_file={train_text}",
          f"--model_prefix={prefix}", f"--vocab_size={FLAGS.vocab_size}"],
         os.path.join(logs, "spm.log"))
  config = os.path.join(work, "albert_config.json")
  with open(os.path.join(REPO, "configs", "albert_quickstart.json"), encoding="utf-8") as f:
    cfg = json.load(f)
  cfg["vocab_size"] = FLAGS.vocab_size
  with open(config, "w", encoding="utf-8") as f:
    json.dump(cfg, f, indent=2, sort_keys=True)

  records = {}
  for kind in ("nsp", "sop"):
    for split, text, dupe in (("train", train_text, FLAGS.dupe_factor), ("eval", eval_text, 1)):
      path = os.path.join(work, "records", f"{kind}_{split}.tfrecord")
      if not FLAGS.reuse_data:
        _records(text, path, spm, kind == "nsp", dupe, os.path.join(logs, f"{kind}_{split}.log"))
      records[kind, split] = path

  table = {}
  for trained in ("nsp", "sop"):
    run_dir = os.path.join(work, f"trained_{trained}")
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run, never a resume
    _run(["run_pretraining.py", f"--input_file={records[trained, 'train']}",
          f"--output_dir={run_dir}", f"--albert_config_file={config}", "--do_train",
          f"--train_batch_size={FLAGS.batch_size}", f"--max_seq_length={FLAGS.max_seq_length}",
          "--max_predictions_per_seq=20", "--optimizer=lamb",
          f"--learning_rate={FLAGS.learning_rate}", f"--num_train_steps={FLAGS.steps}",
          f"--num_warmup_steps={FLAGS.steps // 10}", f"--save_checkpoints_steps={FLAGS.steps}",
          f"--log_every_n_steps={max(FLAGS.steps // 10, 1)}", f"--seed={FLAGS.seed}",
          f"--shuffle_seed={FLAGS.seed}"], os.path.join(logs, f"train_{trained}.log"))
    for evaluated in ("nsp", "sop"):
      _run(["run_pretraining.py", f"--input_file={records[evaluated, 'eval']}",
            f"--output_dir={run_dir}", f"--albert_config_file={config}", "--do_train=false",
            "--do_eval", "--eval_batch_size=64", f"--max_seq_length={FLAGS.max_seq_length}",
            "--max_predictions_per_seq=20", f"--max_eval_steps={FLAGS.max_eval_steps}"],
           os.path.join(logs, f"eval_{trained}_on_{evaluated}.log"))
      table[trained, evaluated] = _eval_results(os.path.join(run_dir, "eval_results.txt"))

  print(f"\nInter-sentence coherence, {FLAGS.steps} steps x {FLAGS.batch_size}, H "
        f"{cfg['hidden_size']}, L {cfg['num_hidden_layers']} (paper: ALBERT-base, Table 5), "
        f"{time.time() - started:.0f} s in all")
  baselines = {kind: _label_baselines(records[kind, "eval"]) for kind in ("nsp", "sop")}
  print("| trained with | NSP accuracy (paper) | SOP accuracy (paper) | MLM accuracy on NSP / "
        "SOP eval |")
  print("|---|---|---|---|")
  print("| (label prior: majority share) | " + " | ".join(
      f"{max(baselines[k][0], 1 - baselines[k][0]):.3f}" for k in ("nsp", "sop")) + " | |")
  print("| (segment lengths: A longer than B -> 1) | " + " | ".join(
      f"{baselines[k][1]:.3f}" for k in ("nsp", "sop")) + " | |")
  for trained in ("nsp", "sop"):
    cells = [f"{table[trained, e]['sentence_order_accuracy']:.3f} ({PAPER[trained, e]:.3f})"
             for e in ("nsp", "sop")]
    mlm = " / ".join(f"{table[trained, e]['masked_lm_accuracy']:.3f}" for e in ("nsp", "sop"))
    print(f"| {trained.upper()} | {cells[0]} | {cells[1]} | {mlm} |")
  common.write_results(FLAGS.output_json, {
      **{f"{t}_on_{e}": v for (t, e), v in table.items()},
      **{f"{k}_eval_label1_share_and_length_rule": v for k, v in baselines.items()}})


if __name__ == "__main__":
  app.run(main)
