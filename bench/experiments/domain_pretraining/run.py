"""Pretrain on your domain, then fine-tune: does pretraining on real unlabelled text make real
benchmarks better? (issue 53; docs/pretraining.md, "Pretrain on your domain, then fine-tune").

  .venv/bin/python -m bench.experiments.domain_pretraining.run <aclImdb dir> <SST-2 dir> \\
      <work dir> [--part=...]

The steps, each the project's real top-level command with real flags (every command is recorded
in the result file):
  1. a pretraining corpus from IMDB's unlabelled and training reviews (train/unsup, train/pos,
     train/neg; never test/): `<br />` markup removed, one sentence a line, a blank line
     between reviews (the format create_pretraining_data.py reads);
  2. python -m albert_tf.cli.train_spm on it, lower-cased (as scripts/quickstart.sh);
  3. create_pretraining_data.py -> pretraining TFRecords;
  4. run_pretraining.py: the quickstart's model shape (configs/albert_quickstart.json with the
     trained vocabulary size and DP_LAYERS layers), MLM + SOP;
  5. two benchmarks in the files run_classifier.py reads: SST-2 (GLUE layout, the dev set as
     dev) and IMDB sentiment (own-data TSV: train/pos+neg to train, a fixed draw of
     DP_IMDB_DEV_N test/pos+neg reviews as dev; reviews truncated to the benchmark's
     max_seq_length by the tokenizer), each at a low-data size (DP_LOW_N examples drawn with a
     fixed seed) and in full;
  6. run_classifier.py from the pretrained checkpoint and from random initialisation: the same
     recipe, seeds DP_SEEDS; dev accuracy beside the dev set's majority class;
  7. the result file: machine, date, load, commands, per-seed results, means, and the goal per
     benchmark and size ("pretrained >= 5 points ahead at the low-data size; ahead on the full
     set") stated MET or NOT MET.
--part=ablation (item 2 of the issue: why the quickstart's docstring checkpoint hurts SST-2)
adds, on the low-data SST-2 set: a docstring-corpus pretraining (albert_tf.cli.build_corpus, as
the quickstart) with its own vocabulary and the same corpus with the IMDB vocabulary, each
DP_ABL_PRETRAIN_STEPS steps, beside the main IMDB pretraining's checkpoint at that step; random
initialisation with each vocabulary; then a fine-tuning learning-rate sweep (DP_ABL_LRS) and
DP_ABL_LONG_FACTOR times longer fine-tuning, docstring checkpoint against random initialisation,
and the main IMDB checkpoint at the sweep's highest LR (seeds DP_ABL_RECIPE_SEEDS).

Parts run side by side on one work dir (2 cores go further that way): --part=prepare (data),
--part=pretrain, --part=random (every random-initialisation run, needing no checkpoint, while
the pretraining runs), then --part=main / --part=ablation with DP_ONLY=pretrained (DP_BENCHMARKS
splits the main study in two); a last run without --part skips everything done and writes the
result file.

Every step leaves its output in the work dir and is skipped when that output is complete, so a
run stopped part way resumes where it stopped (run_pretraining.py resumes its own checkpoints).

Environment (defaults are the recorded study's): PYTHON, DP_PRETRAIN_STEPS, DP_LAYERS,
DP_VOCAB, DP_PRETRAIN_SEQ, DP_PREDS, DP_DUPE, DP_SST_SEQ, DP_IMDB_SEQ, DP_LR, DP_LOW_N,
DP_IMDB_DEV_N (0: all 25,000), DP_LOW_STEPS, DP_SST_FULL_STEPS, DP_IMDB_FULL_STEPS, DP_SEEDS, DP_MAX_DOCS (0: every review),
DP_ABL_PRETRAIN_STEPS, DP_ABL_LRS, DP_ABL_LONG_FACTOR, DP_ABL_SEEDS, DP_ABL_RECIPE_SEEDS,
DP_DOCSTRING_MB,
DP_BENCHMARKS (sst2,imdb), DP_SIZES (low,full), DP_ONLY (random|pretrained: only those runs), DP_CONFIG (the base model config), DP_NOTE (a note for the result file), DP_RESULTS (the result file; default
bench/experiments/results/domain_pretraining.json, a markdown table beside it).
"""

import argparse
import datetime
import glob
import json
import os
import random
import re
import shlex
import subprocess
import sys
import time

from bench import common

REPO = common.REPO
GOAL_LOW_POINTS = 5.0  # pretrained at least this many points ahead at the low-data size
BENCHMARKS = ("sst2", "imdb")
SIZES = ("low", "full")
INITS = ("pretrained", "random")


def env(name, default, kind=int):
  return kind(os.environ.get(name, default))


def settings():
  """The study's settings (DP_* environment variables over the recorded defaults)."""
  return dict(
      pretrain_steps=env("DP_PRETRAIN_STEPS", 2000), layers=env("DP_LAYERS", 2),
      vocab=env("DP_VOCAB", 3000), pretrain_seq=env("DP_PRETRAIN_SEQ", 128),
      preds=env("DP_PREDS", 20), dupe=env("DP_DUPE", 1), batch=32,
      pretrain_lr=env("DP_PRETRAIN_LR", 7e-4, float),
      seq={"sst2": env("DP_SST_SEQ", 64), "imdb": env("DP_IMDB_SEQ", 128)},
      lr=env("DP_LR", 1e-4, float), low_n=env("DP_LOW_N", 2000),
      imdb_dev_n=env("DP_IMDB_DEV_N", 5000),
      steps={"low": env("DP_LOW_STEPS", 300),
             "full": {"sst2": env("DP_SST_FULL_STEPS", 600),
                      "imdb": env("DP_IMDB_FULL_STEPS", 300)}},
      seeds=[int(s) for s in os.environ.get("DP_SEEDS", "1,2,3").split(",")],
      max_docs=env("DP_MAX_DOCS", 0),
      abl_pretrain_steps=env("DP_ABL_PRETRAIN_STEPS", 1000),
      abl_lrs=[float(x) for x in os.environ.get("DP_ABL_LRS", "3e-5,3e-4").split(",")],
      abl_long_factor=env("DP_ABL_LONG_FACTOR", 3),
      abl_seeds=[int(s) for s in os.environ.get("DP_ABL_SEEDS", "1,2,3").split(",")],
      abl_recipe_seeds=[int(s) for s in os.environ.get("DP_ABL_RECIPE_SEEDS", "1,2").split(",")],
      docstring_mb=env("DP_DOCSTRING_MB", 8, float),
      benchmarks=os.environ.get("DP_BENCHMARKS", ",".join(BENCHMARKS)).split(","),
      sizes=os.environ.get("DP_SIZES", ",".join(SIZES)).split(","),
      config=os.environ.get("DP_CONFIG", os.path.join(REPO, "configs/albert_quickstart.json")))


class Study:
  """The work dir, the commands run (recorded for the result file) and skip-if-done."""

  def __init__(self, work, py):
    self.work = work
    self.py = py
    self.commands = []
    self.random_only = False  # --part=random: only the runs from random initialisation
    self.pretrained_only = False  # --part=pretrained: only the runs from a pretrained checkpoint
    os.makedirs(work, exist_ok=True)
    self.log = open(os.path.join(work, "study.log"), "a", encoding="utf-8")

  def path(self, *parts):
    return os.path.join(self.work, *parts)

  def say(self, msg):
    line = f"[{datetime.datetime.now(datetime.timezone.utc):%H:%M:%S}] {msg}"
    print(line, flush=True)
    self.log.write(line + "\n")
    self.log.flush()

  def run(self, args, done, what, log_name):
    """Runs `args` (a list; a leading "python" is this Python) from the repo unless `done`
    (a file the command leaves when it finished) exists. Recorded either way."""
    args = [self.py if a == "python" else a for a in args]
    shown = " ".join(shlex.quote("python" if a == self.py else a) for a in args)
    self.commands.append(shown)
    if os.path.exists(done):
      self.say(f"skip (done): {what}")
      return
    self.say(f"run: {what}")
    start = time.time()
    with open(self.path("logs", log_name + ".log"), "w", encoding="utf-8") as log:
      log.write(shown + "\n")
      log.flush()
      rc = subprocess.call(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if rc != 0:
      raise SystemExit(f"error: {what} failed (exit {rc}); see "
                       f"{self.path('logs', log_name + '.log')}")
    self.say(f"  {time.time() - start:.0f}s")


# ------------------------------------------------------------------------------------ data
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
# A sentence ends at . ! or ? (runs of them, closing quotes/brackets) followed by a space, or
# glued to the next capitalised word as reviews often are ("...the film.One intriguing").
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|(?<=[a-z)][.!?])(?=[A-Z][a-z])")


def clean_review(text):
  """A review's text on one line: `<br />` markup to spaces, whitespace (tabs too) collapsed."""
  return _SPACE.sub(" ", _BR.sub(" ", text)).strip()


def sentences(text):
  """A cleaned review split into sentences (a heuristic; good enough for SOP pairs)."""
  return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def review_files(imdb_dir, split, label):
  """The review files of aclImdb/<split>/<label>, in a fixed order (other files are ignored)."""
  return sorted(glob.glob(os.path.join(imdb_dir, split, label, "*.txt")))


def read_review(path):
  with open(path, encoding="utf-8", errors="replace") as f:
    return clean_review(f.read())


def build_imdb_corpus(imdb_dir, out, max_docs=0):
  """The pretraining corpus: train/unsup + train/pos + train/neg reviews (never test/), one
  sentence a line, a blank line after each review. Returns the number of reviews."""
  files = []
  for label in ("unsup", "pos", "neg"):
    files += review_files(imdb_dir, "train", label)
  if max_docs:
    files = files[:max_docs]
  tmp = out + ".part"
  with open(tmp, "w", encoding="utf-8") as f:
    for path in files:
      lines = sentences(read_review(path))
      if lines:
        f.write("\n".join(lines) + "\n\n")
  os.replace(tmp, out)
  return len(files)


def lowercase_copy(src, dst):
  with open(src, encoding="utf-8") as f, open(dst + ".part", "w", encoding="utf-8") as g:
    for line in f:
      g.write(line.lower())
  os.replace(dst + ".part", dst)


def write_tsv(path, header, rows):
  """Writes the file unless it holds these rows already (an unchanged file keeps its mtime, so
  run_classifier.py's cached features of it stay valid across resumed runs)."""
  text = "".join("\t".join(str(x) for x in row) + "\n" for row in [header] + list(rows))
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      if f.read() == text:
        return
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".part", "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(path + ".part", path)


def read_sst2(path):
  """(sentence, label) rows of an SST-2 TSV in either column order (a header names them:
  `sentence`/`content` and `label`)."""
  with open(path, encoding="utf-8") as f:
    header = f.readline().rstrip("\n").split("\t")
    text_col = next(i for i, h in enumerate(header) if h in ("sentence", "content"))
    label_col = header.index("label")
    rows = []
    for line in f:
      fields = line.rstrip("\n").split("\t")
      if len(fields) > max(text_col, label_col):
        rows.append((fields[text_col], fields[label_col]))
  return rows


def low_data(rows, n, seed=0):
  """n rows drawn with a fixed seed (the same subset for every arm and seed), in file order."""
  if n >= len(rows):
    return list(rows)
  keep = sorted(random.Random(seed).sample(range(len(rows)), n))
  return [rows[i] for i in keep]


def majority(rows):
  """The accuracy of always answering the dev set's most common label."""
  counts = {}
  for _, label in rows:
    counts[label] = counts.get(label, 0) + 1
  return max(counts.values()) / len(rows)


def build_tasks(study, imdb_dir, sst_dir, low_n, imdb_dev_n=0):
  """The benchmark files; returns {benchmark: {size: data dir}} and the dev majority classes."""
  dirs, majorities, sizes = {}, {}, {}
  sst_train = read_sst2(os.path.join(sst_dir, "train.tsv"))
  sst_dev = read_sst2(os.path.join(sst_dir, "dev.tsv"))
  imdb = {}
  for split in ("train", "test"):
    imdb[split] = [(read_review(p), 1 if label == "pos" else 0)
                   for label in ("neg", "pos") for p in review_files(imdb_dir, split, label)]
  # Interleave the labels' files deterministically so a file-order read is not all neg first.
  for split in imdb:
    random.Random(1).shuffle(imdb[split])
  if imdb_dev_n:  # a fixed draw of the test reviews (evaluating all 25,000 costs more than training)
    imdb["test"] = low_data(imdb["test"], imdb_dev_n, seed=2)
  dirs["sst2"], dirs["imdb"] = {}, {}
  for size, train in (("low", low_data(sst_train, low_n)), ("full", sst_train)):
    d = study.path("tasks", f"sst2_{size}")
    # GLUE layout: <data_dir>/SST-2/{train,dev}.tsv, `sentence<TAB>label` with a header.
    write_tsv(os.path.join(d, "SST-2", "train.tsv"), ("sentence", "label"), train)
    write_tsv(os.path.join(d, "SST-2", "dev.tsv"), ("sentence", "label"), sst_dev)
    dirs["sst2"][size] = d
    sizes[f"sst2_{size}"] = len(train)
  for size, train in (("low", low_data(imdb["train"], low_n)), ("full", imdb["train"])):
    d = study.path("tasks", f"imdb_{size}")
    # Own data (--task_name=custom): train.tsv / dev.tsv with `text<TAB>label` (the test
    # reviews are the dev set: the split IMDB publishes for evaluation).
    write_tsv(os.path.join(d, "train.tsv"), ("text", "label"), train)
    write_tsv(os.path.join(d, "dev.tsv"), ("text", "label"), imdb["test"])
    dirs["imdb"][size] = d
    sizes[f"imdb_{size}"] = len(train)
  majorities["sst2"] = majority(sst_dev)
  majorities["imdb"] = majority(imdb["test"])
  sizes["sst2_dev"], sizes["imdb_dev"] = len(sst_dev), len(imdb["test"])
  return dirs, majorities, sizes


# ------------------------------------------------------------------------------ the steps
def write_config(study, s, vocab_size):
  path = study.path("albert_config.json")
  with open(s["config"], encoding="utf-8") as f:
    cfg = json.load(f)
  cfg["vocab_size"] = vocab_size
  cfg["num_hidden_layers"] = s["layers"]
  cfg["max_position_embeddings"] = max(cfg.get("max_position_embeddings", 512),
                                       max(s["seq"].values()), s["pretrain_seq"])
  with open(path, "w", encoding="utf-8") as f:
    json.dump(cfg, f, indent=2, sort_keys=True)
  return path


def train_vocab(study, s, corpus, name):
  """SentencePiece on the lower-cased corpus; returns the model prefix."""
  prefix = study.path("spm", name, "30k-clean")
  lower = study.path(f"spm_input_{name}.txt")
  if not os.path.exists(prefix + ".model"):
    lowercase_copy(corpus, lower)
  study.run(["python", "-m", "albert_tf.cli.train_spm", f"--input_file={lower}",
             f"--model_prefix={prefix}", f"--vocab_size={s['vocab']}"],
            prefix + ".vocab", f"SentencePiece ({name})", f"spm_{name}")
  return prefix


def pretraining_records(study, s, corpus, spm, name):
  out = study.path("pretrain_data", f"{name}.tfrecord")
  if study.random_only:
    return out
  study.run(["python", "create_pretraining_data.py", f"--input_file={corpus}",
             f"--output_file={out}", f"--spm_model_file={spm}.model",
             f"--vocab_file={spm}.vocab", "--do_lower_case",
             f"--max_seq_length={s['pretrain_seq']}",
             f"--max_predictions_per_seq={s['preds']}", "--masked_lm_prob=0.15", "--ngram=1",
             "--nodo_whole_word_mask", f"--dupe_factor={s['dupe']}", "--random_seed=12345",
             "--noprogress"], out + ".done", f"pretraining records ({name})", f"data_{name}")
  if not os.path.exists(out + ".done"):
    open(out + ".done", "w").close()
  return out


def pretrain(study, s, config, records, name, steps):
  out = study.path("pretrain", name)
  if study.random_only:
    return out
  study.run(["python", "run_pretraining.py", f"--input_file={records}", f"--output_dir={out}",
             f"--albert_config_file={config}", "--do_train",
             f"--train_batch_size={s['batch']}", f"--max_seq_length={s['pretrain_seq']}",
             f"--max_predictions_per_seq={s['preds']}", "--optimizer=adamw",
             f"--learning_rate={s['pretrain_lr']}", f"--num_train_steps={steps}",
             f"--num_warmup_steps={max(1, steps // 10)}",
             f"--save_checkpoints_steps={max(1, steps // 4)}",
             f"--log_every_n_steps={max(1, steps // 20)}", "--seed=1"],
            os.path.join(out, "done"), f"pretraining ({name}, {steps} steps)",
            f"pretrain_{name}")
  if not os.path.exists(os.path.join(out, "done")):
    open(os.path.join(out, "done"), "w").close()
  return out


def read_results(path):
  values = {}
  with open(path, encoding="utf-8") as f:
    for line in f:
      key, sep, value = line.partition(" = ")
      if sep:
        values[key.strip()] = value.strip()
  return values


def finetune(study, s, config, spm, bench, data_dir, name, steps, seed, lr, init=None):
  """One run_classifier.py run; returns its dev accuracy."""
  if (init and study.random_only) or (not init and study.pretrained_only):
    return float("nan")  # the other part's run (parts run side by side)
  out = study.path("finetune", name)
  seq = s["seq"][bench]
  cache = study.path("features", f"{os.path.basename(data_dir)}_{os.path.basename(spm)}_"
                     f"{os.path.basename(os.path.dirname(spm))}_{seq}")
  task = (["--task_name=SST-2"] if bench == "sst2" else
          ["--task_name=imdb", "--text_a_column=text", "--label_column=label", "--labels=0,1"])
  args = ["python", "run_classifier.py", *task, f"--data_dir={data_dir}",
          f"--output_dir={out}", f"--cached_dir={cache}", f"--albert_config_file={config}",
          f"--spm_model_file={spm}.model", "--do_lower_case", "--do_train", "--do_eval",
          f"--max_seq_length={seq}", f"--train_batch_size={s['batch']}",
          "--eval_batch_size=128", f"--learning_rate={lr}", f"--train_step={steps}",
          f"--warmup_step={max(1, steps // 10)}", f"--save_checkpoints_steps={steps}",
          f"--log_every_n_steps={max(1, steps // 5)}", f"--seed={seed}"]
  if init:
    args.append(f"--init_checkpoint={init}")
  results = os.path.join(out, "eval_results.txt")
  os.makedirs(cache, exist_ok=True)
  study.run(args, results, f"fine-tuning {name}", f"ft_{name}")
  return float(read_results(results)["eval_accuracy"])


# ---------------------------------------------------------------------------- the verdicts
def mean(xs):
  return sum(xs) / len(xs) if xs else float("nan")


def verdict(size, pretrained, random_init):
  """The goal for one benchmark and size from the per-seed accuracies: at the low-data size the
  pretrained mean at least GOAL_LOW_POINTS points above random initialisation's; on the full
  set above it. Returns (gap in points, "MET" / "NOT MET", the goal in words)."""
  gap = 100.0 * (mean(pretrained) - mean(random_init))
  if size == "low":
    goal = f"pretrained >= {GOAL_LOW_POINTS:g} points ahead of random initialisation"
    met = gap >= GOAL_LOW_POINTS
  else:
    goal = "pretrained ahead of random initialisation"
    met = gap > 0
  return round(gap, 2), "MET" if met else "NOT MET", goal


def machine():
  try:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    name = next((line.split(":", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Model name")), "unknown")
  except OSError:
    name = "unknown"
  return f"{name}, {os.cpu_count()} cores"


def load():
  return " ".join(f"{x:.2f}" for x in os.getloadavg())


def markdown(result):
  lines = ["| benchmark | training examples | steps | pretrained (per seed) | random init (per "
           "seed) | pretrained mean | random mean | gap (points) | majority class | goal |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  for row in result["main"]:
    lines.append("| {benchmark} | {train_examples} | {steps} | {p} | {r} | {pm:.3f} | {rm:.3f} | "
                 "{gap:+.1f} | {majority:.3f} | {verdict} |".format(
                     p=", ".join(f"{x:.3f}" for x in row["pretrained"]),
                     r=", ".join(f"{x:.3f}" for x in row["random"]),
                     pm=row["pretrained_mean"], rm=row["random_mean"], gap=row["gap_points"],
                     **row))
  if result.get("ablation"):
    lines += ["", "Ablation (low-data SST-2): dev accuracy per seed and mean", "",
              "| arm | pretraining corpus | vocabulary | init | fine-tuning | per seed | mean |",
              "|---|---|---|---|---|---|---|"]
    for row in result["ablation"]:
      lines.append("| {arm} | {corpus} | {vocab} | {init} | {recipe} | {per} | {m:.3f} |".format(
          per=", ".join(f"{x:.3f}" for x in row["accuracy"]), m=row["mean"], **row))
  return "\n".join(lines) + "\n"


def write_result_files(result, path, title, table):
  """The result file `path` (json) and the markdown beside it (.md): a heading with the title,
  the result's date, machine and load at start, then table(result)."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
  with open(os.path.splitext(path)[0] + ".md", "w", encoding="utf-8") as f:
    f.write(f"# {title} ({result['date']}, {result['machine']}, load "
            f"{result['load_at_start']} at start)\n\n")
    f.write(table(result))


# ------------------------------------------------------------------------------------ main
def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("imdb_dir")
  parser.add_argument("sst2_dir")
  parser.add_argument("work_dir")
  parser.add_argument("--part", choices=("prepare", "pretrain", "random", "main", "ablation", "all"), default="all")
  args = parser.parse_args(argv)
  for d in (args.imdb_dir, args.sst2_dir):
    if not os.path.isdir(d):
      sys.stderr.write(f"error: {d} is not a directory\n")
      return 2
  s = settings()
  study = Study(os.path.abspath(args.work_dir),
                os.environ.get("PYTHON", os.path.join(REPO, ".venv/bin/python")))
  os.makedirs(study.path("logs"), exist_ok=True)
  results_path = os.environ.get("DP_RESULTS",
                                os.path.join(REPO, "bench", "experiments", "results",
                                             "domain_pretraining.json"))
  started = time.time()
  date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
  load_start = load()

  corpus = study.path("imdb_corpus.txt")
  if not os.path.exists(corpus):
    study.say("corpus: train/unsup + train/pos + train/neg reviews")
    build_imdb_corpus(args.imdb_dir, corpus, s["max_docs"])
  study.commands.append(
      f"corpus: bench/experiments/domain_pretraining/run.py build_imdb_corpus -> {corpus}")
  spm = train_vocab(study, s, corpus, "imdb")
  config = write_config(study, s, s["vocab"])
  records = pretraining_records(study, s, corpus, spm, "imdb")
  tasks, majorities, sizes = build_tasks(study, args.imdb_dir, args.sst2_dir, s["low_n"],
                                          s["imdb_dev_n"])

  if args.part == "prepare":
    study.say("prepared: corpus, vocabulary, pretraining records, benchmark files")
    return 0
  result = dict(
      what="issue 53: pretraining on IMDB reviews (train/unsup + train/pos,neg) vs random "
           "initialisation, fine-tuned on SST-2 and IMDB sentiment; dev accuracy",
      machine=machine(), date=date, load_at_start=load_start, settings=s, data_sizes=sizes,
      commands=study.commands, main=[], ablation=[])

  def save():
    if study.random_only or study.pretrained_only:
      return
    result["seconds_this_invocation"] = round(time.time() - started)
    # When the steps ran (a resumed or split study ran them in earlier invocations): the first
    # and the last step log written.
    logs = [os.path.getmtime(p) for p in glob.glob(study.path("logs", "*.log"))]
    if logs:
      result["steps_finished_utc"] = [
          datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
          for t in (min(logs), max(logs))]
    if os.environ.get("DP_NOTE"):
      result["note"] = os.environ["DP_NOTE"]
    result["load_at_end"] = load()
    write_result_files(result, results_path, "Domain pretraining study", markdown)

  # Side by side on one work dir: --part=random runs the random-initialisation runs of the main
  # study and the ablation while the pretraining runs; DP_ONLY=pretrained the others after it.
  study.random_only = args.part == "random" or os.environ.get("DP_ONLY") == "random"
  study.pretrained_only = os.environ.get("DP_ONLY") == "pretrained"
  if args.part == "pretrain":
    pretrain(study, s, config, records, "imdb", s["pretrain_steps"])
    return 0
  if args.part in ("main", "random", "all"):
    ckpt = pretrain(study, s, config, records, "imdb", s["pretrain_steps"])
    for bench in s["benchmarks"]:
      for size in s["sizes"]:
        steps = s["steps"]["low"] if size == "low" else s["steps"]["full"][bench]
        acc = {init: [] for init in INITS}
        for seed in s["seeds"]:
          for init in INITS:
            acc[init].append(finetune(
                study, s, config, spm, bench, tasks[bench][size],
                f"{bench}_{size}_{init}_s{seed}", steps, seed, s["lr"],
                init=ckpt if init == "pretrained" else None))
        gap, met, goal = verdict(size, acc["pretrained"], acc["random"])
        result["main"].append(dict(
            benchmark=bench, size=size, train_examples=sizes[f"{bench}_{size}"], steps=steps,
            seeds=s["seeds"], pretrained=acc["pretrained"], random=acc["random"],
            pretrained_mean=round(mean(acc["pretrained"]), 4),
            random_mean=round(mean(acc["random"]), 4), gap_points=gap,
            majority=round(majorities[bench], 4), goal=goal, verdict=met))
        save()

  if args.part in ("ablation", "random", "all"):
    ablation(study, s, args, spm, config, tasks, result, save)
  save()
  study.say(f"done: {results_path}")
  return 0


def ablation(study, s, args, imdb_spm, config, tasks, result, save):
  """Vocabulary, domain and recipe on the low-data SST-2 set (the issue's item 2)."""
  steps = s["abl_pretrain_steps"] or s["pretrain_steps"] // 4
  doc_corpus = study.path("docstring_corpus.txt")
  study.run(["python", "-m", "albert_tf.cli.build_corpus", f"--output_file={doc_corpus}",
             f"--max_mb={s['docstring_mb']:g}"], doc_corpus, "docstring corpus (build_corpus)",
            "docstring_corpus")
  doc_spm = train_vocab(study, s, doc_corpus, "docstring")
  ckpts = {
      "docstring corpus, docstring vocab": pretrain(
          study, s, config, pretraining_records(study, s, doc_corpus, doc_spm, "doc_docvocab"),
          "abl_doc_docvocab", steps),
      "docstring corpus, IMDB vocab": pretrain(
          study, s, config, pretraining_records(study, s, doc_corpus, imdb_spm, "doc_imdbvocab"),
          "abl_doc_imdbvocab", steps)}
  # The IMDB arm is the main pretraining's checkpoint at the same step (it saves every quarter
  # of its steps; its learning rate has not decayed there as the short runs' has).
  imdb_ckpt = study.path("pretrain", "imdb", f"ckpt-{steps}")
  while not study.random_only and not os.path.exists(imdb_ckpt + ".index"):
    study.say(f"waiting for {imdb_ckpt} (the main pretraining, --part=main)")
    time.sleep(60)
  ckpts["IMDB corpus, IMDB vocab"] = imdb_ckpt
  low = tasks["sst2"]["low"]
  base = s["steps"]["low"]

  def arm(name, corpus, vocab, spm, init, lr, ft_steps, seeds=s["abl_seeds"]):
    tag = re.sub(r"[^a-z0-9]+", "_", f"abl {name} {lr:g} {ft_steps}".lower())
    if name == "random-imdbvocab" and lr == s["lr"] and ft_steps == base:
      tag = "sst2_low_random"  # the main study's run: the same command
    accs = [finetune(study, s, config, spm, "sst2", low, f"{tag}_s{seed}", ft_steps, seed, lr,
                     init=init) for seed in seeds]
    result["ablation"].append(dict(
        arm=name, corpus=corpus, vocab=vocab, init="pretrained" if init else "random",
        recipe=f"LR {lr:g}, {ft_steps} steps", lr=lr, steps=ft_steps, seeds=seeds,
        accuracy=accs, mean=round(mean(accs), 4)))
    save()

  # Vocabulary and domain, at the main recipe.
  arm("doc-doc", f"docstrings, {steps} steps", "docstring", doc_spm,
      ckpts["docstring corpus, docstring vocab"], s["lr"], base)
  arm("doc-imdbvocab", f"docstrings, {steps} steps", "IMDB", imdb_spm,
      ckpts["docstring corpus, IMDB vocab"], s["lr"], base)
  arm("random-docvocab", "none", "docstring", doc_spm, None, s["lr"], base)
  arm("random-imdbvocab", "none", "IMDB", imdb_spm, None, s["lr"], base)
  arm("imdb", f"IMDB, step {steps} of {s['pretrain_steps']}", "IMDB", imdb_spm,
      ckpts["IMDB corpus, IMDB vocab"], s["lr"], base)
  # Recipe: the learning rate and longer fine-tuning, docstring checkpoint vs random init.
  recipe_seeds = s["abl_recipe_seeds"]
  for lr in s["abl_lrs"]:
    arm("doc-doc", f"docstrings, {steps} steps", "docstring", doc_spm,
        ckpts["docstring corpus, docstring vocab"], lr, base, recipe_seeds)
    arm("random-docvocab", "none", "docstring", doc_spm, None, lr, base, recipe_seeds)
  # The in-domain checkpoint (the main run's) at the sweep's highest LR, beside random init.
  lr = max(s["abl_lrs"])
  arm("imdb-main", f"IMDB, {s['pretrain_steps']} steps", "IMDB", imdb_spm,
      study.path("pretrain", "imdb"), lr, base, recipe_seeds)
  arm("random-imdbvocab", "none", "IMDB", imdb_spm, None, lr, base, recipe_seeds)
  long_steps = base * s["abl_long_factor"]
  arm("doc-doc", f"docstrings, {steps} steps", "docstring", doc_spm,
      ckpts["docstring corpus, docstring vocab"], s["lr"], long_steps, recipe_seeds)
  arm("random-docvocab", "none", "docstring", doc_spm, None, s["lr"], long_steps, recipe_seeds)


if __name__ == "__main__":
  sys.exit(main())
