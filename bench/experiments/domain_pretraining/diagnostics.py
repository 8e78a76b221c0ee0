"""Why the IMDB-pretrained checkpoint of run.py (beside this file) is behind random
initialisation on low-data SST-2 (issue 53; docs/pretraining.md, "Pretrain on your domain, then
fine-tune", "Why, measured").

  .venv/bin/python -m bench.experiments.domain_pretraining.diagnostics \\
      <study work dir> <work dir> [--checkpoint=CKPT] [--probe_checkpoints=CKPT,...]

<study work dir> is a finished run.py work dir: its albert_config.json, vocabulary
(spm/imdb/30k-clean.model) and low-data SST-2 set (tasks/sst2_low) are used as they are.
--checkpoint is the pretrained checkpoint the fine-tuning rows start from (default: the study's
pretrain/imdb, its last checkpoint); --probe_checkpoints adds checkpoints to the linear probe
(e.g. an earlier one of a longer pretraining).

The diagnostics, all on the low-data SST-2 set (2,000 sentences, dev 872), each beside its
baseline:
  (a) tokenisation: SST-2's sentences are PTB-tokenised ("does n't", "-lrb-", "film ."), the
      review text of the pretraining is not. The same fine-tuning on a detokenised copy
      (`detokenize_ptb`), pretrained vs random init, beside the tokenised runs (the study's);
  (b) the fine-tuning learning rate: LR_ROWS, pretrained vs random init;
  (c) a linear probe: L2-regularised logistic regression (`fit_logistic`, numpy) on frozen
      encoder features (the pooled output, the [CLS] vector of the last layer, the mean of the
      last layer over real tokens), random init vs each checkpoint;
  (d) the word embeddings: nearest neighbours (cosine) of a few sentiment words and the cosine
      of antonym and synonym pairs, pretrained vs random init, beside the mean cosine of all
      pairs of pieces (the level an unrelated pair sits at);
  (e) that the checkpoint was carried over: the correlation of each encoder variable after
      fine-tuning (the tokenised runs) with the checkpoint's, runs from random init beside.

Fine-tuning is run.py's `finetune` (run_classifier.py, the study's recipe: seq 64, batch 32, 300
steps, 10% warmup); a run whose output dir (<work dir>/finetune/<name>) holds eval_results.txt is
skipped, so finished runs (the study's own tokenised runs, say) can be linked in instead of run
again: the result file's note says which were. The probe and the neighbours (and (e)) are saved to
<work dir>/probe.json, neighbours.json (carried_over.json) with their inputs and not computed again
for the same inputs.
Results: bench/experiments/results/domain_pretraining_diagnostics.{json,md} (DG_RESULTS to
change), with the machine, date, load and every command. About a minute of CPU without
fine-tuning; each fine-tuning run about a minute on 2 cores.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import sys
import time

from bench.experiments.domain_pretraining import run as dp

SCRIPT = "bench/experiments/domain_pretraining/diagnostics.py"  # as the result file names it

# (learning rate, {init: seeds}): 3e-4 with the ablation's two random-init seeds (its
# random-imdbvocab rows are these runs); 1e-3 collapses both arms to the majority class, which
# two seeds show.
LR_ROWS = ((3e-4, {"pretrained": (1, 2, 3), "random": (1, 2)}),
           (1e-3, {"pretrained": (1, 2), "random": (1, 2)}))
FEATURES = ("pooled", "cls", "mean")
WORDS = ("good", "bad", "great", "terrible", "best", "worst", "boring", "funny", "love", "movie")
PAIRS = (("good", "bad"), ("great", "terrible"), ("best", "worst"), ("funny", "boring"),
         ("good", "great"), ("bad", "terrible"), ("movie", "film"))
NEIGHBOURS = 8
PROBE_SEED = 1  # the random initialisation's seed (tf_keras.utils.set_random_seed)

# ------------------------------------------------------------------------ (a) tokenisation
_PTB_BRACKETS = {"-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "-lcb-": "{",
                 "-rcb-": "}"}
_BRACKET_TOKEN = re.compile("|".join(re.escape(k) for k in _PTB_BRACKETS), re.IGNORECASE)
_CLITIC = re.compile(r" '(s|re|ve|ll|d|m)\b", re.IGNORECASE)
_OPEN_SPACE = re.compile(r"([(\[{]) ")
_SPACE_CLOSE = re.compile(r" ([)\]}])")
_SPACE_PUNCT = re.compile(r" (\.\.\.|[.,;:!?%])")


def detokenize_ptb(text):
  """An SST-2 sentence (Penn-Treebank tokenised, lower-cased) as running text, the way reviews
  are written. In this order:
    -lrb- -rrb- (and -lsb- -rsb- -lcb- -rcb-) -> ( ) [ ] { };
    "ca n't" -> "can't", "wo n't" -> "won't", then " n't" -> "n't";
    the clitics " 's", " 're", " 've", " 'll", " 'd", " 'm" join their word;
    no space inside brackets, none before . , ; : ! ? % or "...";
    "`` " and " ''" (PTB's double quotes) -> '"', "$ " -> "$";
    surrounding whitespace stripped.
  Single quotes (` x ') and "--" stay as they are; a lone '' or `` with no space on its quoted
  side stays too. E.g. "it 's a film that , no doubt , does n't ." -> "it's a film that, no
  doubt, doesn't."
  """
  text = _BRACKET_TOKEN.sub(lambda m: _PTB_BRACKETS[m.group().lower()], text)
  text = text.replace("ca n't", "can't").replace("wo n't", "won't")
  text = text.replace(" n't", "n't")
  text = _CLITIC.sub(r"'\1", text)
  text = _OPEN_SPACE.sub(r"\1", text)
  text = _SPACE_CLOSE.sub(r"\1", text)
  text = _SPACE_PUNCT.sub(r"\1", text)
  # After the punctuation: a `` that closed a quote ("2 `` :") then has no space after it.
  text = text.replace("`` ", '"').replace(" ''", '"').replace("$ ", "$")
  return text.strip()


def detokenized_task(study_task, out):
  """A GLUE-layout copy of an SST-2 task dir with every sentence detokenised; returns out."""
  for split in ("train", "dev"):
    rows = dp.read_sst2(os.path.join(study_task, "SST-2", f"{split}.tsv"))
    dp.write_tsv(os.path.join(out, "SST-2", f"{split}.tsv"), ("sentence", "label"),
                 [(detokenize_ptb(text), label) for text, label in rows])
  return out


# ------------------------------------------------------------------------ (c) linear probe
def fit_logistic(x, y, c=1.0, iterations=50, tol=1e-8):
  """Binary logistic regression, L2 penalty 1/(2c) |w|^2 on the weights (not the bias), by
  Newton's method (the objective scikit-learn's LogisticRegression(C=c) minimises).

  Args: x [n, d] float features; y [n] labels in {0, 1}.
  Returns: (w [d], b).
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  x = np.asarray(x, np.float64)
  y = np.asarray(y, np.float64)
  xb = np.concatenate([x, np.ones((len(x), 1))], 1)
  theta = np.zeros(xb.shape[1])
  penalty = np.full(xb.shape[1], 1.0 / c)
  penalty[-1] = 0.0
  for _ in range(iterations):
    p = 1.0 / (1.0 + np.exp(-(xb @ theta)))
    grad = xb.T @ (p - y) + penalty * theta
    hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(penalty) + 1e-10 * np.eye(len(theta))
    step = np.linalg.solve(hess, grad)
    theta -= step
    if np.abs(step).max() < tol:
      break
  return theta[:-1], theta[-1]


def logistic_accuracy(w, b, x, y):
  import numpy as np  # pylint: disable=g-import-not-at-top
  return float(np.mean(((np.asarray(x) @ w + b) > 0).astype(int) == np.asarray(y)))


def _model(config, checkpoint):
  """An AlbertPretrainer at PROBE_SEED's random initialisation, or loaded whole from
  `checkpoint` (init_pretrainer refuses a checkpoint lacking encoder variables)."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  import albert_tf  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints.init import init_pretrainer  # pylint: disable=g-import-not-at-top
  tf_keras.utils.set_random_seed(PROBE_SEED)
  model = albert_tf.AlbertPretrainer(config)
  if checkpoint:
    init_pretrainer(model, checkpoint)
  return model


def _encode(tokenizer, texts, seq):
  import numpy as np  # pylint: disable=g-import-not-at-top
  from albert_tf.text.packing import encode_text_pair  # pylint: disable=g-import-not-at-top
  rows = [encode_text_pair(t, None, seq, tokenizer) for t in texts]
  return {k: np.array([r[k] for r in rows], np.int32)
          for k in ("input_ids", "input_mask", "segment_ids")}


def _features(model, inputs, batch=256):
  """{feature name: [n, hidden]} from the frozen encoder (inference mode)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  out = {name: [] for name in FEATURES}
  for i in range(0, len(inputs["input_ids"]), batch):
    b = {k: v[i:i + batch] for k, v in inputs.items()}
    o = model.encoder(b, training=False)
    seq = o["sequence_output"].numpy()
    mask = b["input_mask"].astype(np.float32)[..., None]
    out["pooled"].append(o["pooled_output"].numpy())
    out["cls"].append(seq[:, 0])
    out["mean"].append((seq * mask).sum(1) / mask.sum(1))
  return {k: np.concatenate(v) for k, v in out.items()}


def linear_probe(config_file, spm_model, task_dir, checkpoints, seq):
  """Dev accuracy of a logistic regression on each FEATURES of the frozen encoder, random init
  and each checkpoint; returns the result file's `probe` section."""
  import albert_tf  # pylint: disable=g-import-not-at-top
  from albert_tf.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
  config = albert_tf.AlbertConfig.from_json_file(config_file)
  tokenizer = FullTokenizer(vocab_file=None, spm_model_file=spm_model, do_lower_case=True)
  data = {}
  for split in ("train", "dev"):
    rows = dp.read_sst2(os.path.join(task_dir, "SST-2", f"{split}.tsv"))
    data[split] = (_encode(tokenizer, [t for t, _ in rows], seq), [int(l) for _, l in rows])
  result = dict(train_examples=len(data["train"][1]), dev_examples=len(data["dev"][1]),
                majority=round(dp.majority([(None, l) for l in data["dev"][1]]), 4), rows=[])
  for checkpoint in [None] + list(checkpoints):
    model = _model(config, checkpoint)
    feats = {split: _features(model, data[split][0]) for split in data}
    row = dict(init="pretrained" if checkpoint else "random",
               checkpoint=os.path.basename(checkpoint) if checkpoint else "none",
               path=checkpoint or "")
    for name in FEATURES:
      w, b = fit_logistic(feats["train"][name], data["train"][1])
      row[name] = round(logistic_accuracy(w, b, feats["dev"][name], data["dev"][1]), 4)
    result["rows"].append(row)
  return result


# -------------------------------------------------------------------- (d) word embeddings
def neighbours(config_file, spm_model, checkpoint):
  """Nearest neighbours (cosine) of WORDS' pieces in the checkpoint's word embeddings and the
  cosine of PAIRS, beside random init's; returns the result file's `embeddings` section."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import sentencepiece  # pylint: disable=g-import-not-at-top
  import albert_tf  # pylint: disable=g-import-not-at-top
  config = albert_tf.AlbertConfig.from_json_file(config_file)
  sp = sentencepiece.SentencePieceProcessor(model_file=spm_model)
  tables = {}
  for init, ckpt in (("pretrained", checkpoint), ("random", None)):
    e = _model(config, ckpt).encoder.embeddings.word_embeddings.numpy()
    tables[init] = e / np.linalg.norm(e, axis=1, keepdims=True)

  def piece(word):
    i = sp.piece_to_id("\u2581" + word)
    return i if sp.id_to_piece(i) == "\u2581" + word else None

  result = dict(checkpoint=checkpoint, words=[], pairs=[], mean_cosine_all_pairs={})
  for init, e in tables.items():
    sims = e @ e.T
    n = len(e)
    result["mean_cosine_all_pairs"][init] = round(float((sims.sum() - n) / (n * n - n)), 4)
  for word in WORDS:
    i = piece(word)
    if i is None:
      result["words"].append(dict(word=word, piece=False))
      continue
    sims = tables["pretrained"] @ tables["pretrained"][i]
    order = [int(j) for j in np.argsort(-sims) if j != i][:NEIGHBOURS]
    result["words"].append(dict(word=word, piece=True, neighbours=[
        dict(piece=sp.id_to_piece(j), cosine=round(float(sims[j]), 3)) for j in order]))
  for a, b in PAIRS:
    i, j = piece(a), piece(b)
    if i is None or j is None:
      continue
    result["pairs"].append(dict(a=a, b=b, **{
        init: round(float(e[i] @ e[j]), 3) for init, e in tables.items()}))
  return result


# ---------------------------------------------------------- (e) the checkpoint carried over
def carried_over(checkpoint, runs):
  """Whether fine-tuning started from the checkpoint: for each fine-tuned run (name -> its
  output dir), the Pearson correlation of every encoder variable the run's last checkpoint
  shares with `checkpoint` (optimizer slots left out) with that variable in `checkpoint`; a run
  from random initialisation is the baseline (near 0). Returns the `carried_over` section."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  start = tf.train.load_checkpoint(checkpoint)
  names = [n for n, _ in tf.train.list_variables(checkpoint)
           if "/encoder/" in n and "OPTIMIZER_SLOT" not in n]
  rows = []
  for name, run_dir in runs.items():
    ckpt = tf.train.latest_checkpoint(run_dir)
    tuned = tf.train.load_checkpoint(ckpt)
    shared = [n for n in names if tuned.has_tensor(n) and start.get_tensor(n).size > 1]
    corr = [float(np.corrcoef(start.get_tensor(n).ravel(), tuned.get_tensor(n).ravel())[0, 1])
            for n in shared]
    rows.append(dict(run=name, checkpoint=os.path.basename(ckpt), variables=len(shared),
                     min=round(min(corr), 4), median=round(float(np.median(corr)), 4),
                     max=round(max(corr), 4)))
  return dict(checkpoint=checkpoint, rows=rows)


# ------------------------------------------------------------------------------ the result
def markdown(result):
  """The result file's markdown table(s)."""
  lines = ["Fine-tuning on low-data SST-2 (dev accuracy per seed and mean):", "",
           "| arm | data | LR | init | per seed | mean |", "|---|---|---|---|---|---|"]
  for row in result["finetune"]:
    lines.append("| {arm} | {data} | {lr:g} | {init} | {per} | {m:.3f} |".format(
        per=", ".join(f"{x:.3f}" for x in row["accuracy"]), m=row["mean"], **row))
  probe = result.get("probe")
  if probe:
    lines += ["", f"Linear probe (logistic regression on frozen features; "
              f"{probe['train_examples']} train, {probe['dev_examples']} dev, majority class "
              f"{probe['majority']:.3f}): dev accuracy", "",
              "| init | checkpoint | " + " | ".join(FEATURES) + " |",
              "|---|---|" + "---|" * len(FEATURES)]
    for row in probe["rows"]:
      lines.append(f"| {row['init']} | {row['checkpoint']} | "
                   + " | ".join(f"{row[f]:.3f}" for f in FEATURES) + " |")
  carried = result.get("carried_over")
  if carried:
    lines += ["", f"Encoder variables after fine-tuning against {carried['checkpoint']} "
              "(Pearson correlation per variable)", "",
              "| run | variables | min | median | max |", "|---|---|---|---|---|"]
    for row in carried["rows"]:
      lines.append("| {run} | {variables} | {min:.3f} | {median:.3f} | {max:.3f} |".format(**row))
  emb = result.get("embeddings")
  if emb:
    mean_cos = emb["mean_cosine_all_pairs"]
    lines += ["", f"Word embeddings of {emb['checkpoint']}: cosine of word pairs (mean over "
              f"all pairs of pieces: pretrained {mean_cos['pretrained']:.3f}, random "
              f"{mean_cos['random']:.3f})", "",
              "| pair | pretrained | random init |", "|---|---|---|"]
    for p in emb["pairs"]:
      lines.append(f"| {p['a']} / {p['b']} | {p['pretrained']:.3f} | {p['random']:.3f} |")
    lines += ["", "| word | nearest pieces (cosine) |", "|---|---|"]
    for w in emb["words"]:
      near = (", ".join(f"{n['piece']} {n['cosine']:.2f}" for n in w["neighbours"])
              if w["piece"] else "(not one piece)")
      lines.append(f"| {w['word']} | {near} |")
  return "\n".join(lines) + "\n"


def write_results(result, path):
  """`path` (json) and the markdown beside it (same name, .md)."""
  dp.write_result_files(result, path, "Domain pretraining diagnostics", markdown)


def _cached(path, inputs, make):
  """The value saved at path for these inputs (json-able), else make() saved there with them
  (other inputs, say other checkpoints, are computed again)."""
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      saved = json.load(f)
    if saved.get("inputs") == inputs:
      return saved["value"]
  value = make()
  with open(path + ".part", "w", encoding="utf-8") as f:
    json.dump(dict(inputs=inputs, value=value), f, indent=2)
  os.replace(path + ".part", path)
  return value


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("study_dir", help="a finished run.py work dir")
  parser.add_argument("work_dir")
  parser.add_argument("--checkpoint", help="the pretrained checkpoint (default: "
                      "<study_dir>/pretrain/imdb, its last checkpoint)")
  parser.add_argument("--probe_checkpoints", default="",
                      help="more checkpoints for the linear probe, comma-separated")
  args = parser.parse_args(argv)
  study_dir = os.path.abspath(args.study_dir)
  config = os.path.join(study_dir, "albert_config.json")
  spm = os.path.join(study_dir, "spm", "imdb", "30k-clean")
  task = os.path.join(study_dir, "tasks", "sst2_low")
  for need in (config, spm + ".model", os.path.join(task, "SST-2", "train.tsv")):
    if not os.path.exists(need):
      sys.stderr.write(f"error: {need} does not exist: is {args.study_dir} a finished "
                       f"bench/experiments/domain_pretraining/run.py work dir?\n")
      return 2
  checkpoint = os.path.abspath(args.checkpoint or os.path.join(study_dir, "pretrain", "imdb"))
  if os.path.isdir(checkpoint):  # the directory's last checkpoint, named for the result file
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    checkpoint = tf.train.latest_checkpoint(checkpoint) or checkpoint
  probe_ckpts = [checkpoint] + [os.path.abspath(c) for c in args.probe_checkpoints.split(",") if c]
  s = dp.settings()
  study = dp.Study(os.path.abspath(args.work_dir),
                   os.environ.get("PYTHON", os.path.join(dp.REPO, ".venv/bin/python")))
  os.makedirs(study.path("logs"), exist_ok=True)
  results_path = os.environ.get(
      "DG_RESULTS", os.path.join(dp.REPO, "bench", "experiments", "results",
                                 "domain_pretraining_diagnostics.json"))
  started = time.time()
  result = dict(
      what="issue 53: why the IMDB-pretrained checkpoint is behind random initialisation on "
           "low-data SST-2: tokenisation, fine-tuning LR, linear probe, word embeddings",
      machine=dp.machine(),
      date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
      load_at_start=dp.load(),
      invocation=" ".join(["python", "-m", "bench.experiments.domain_pretraining.diagnostics"]
                          + [shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)]),
      study_dir=study_dir, checkpoint=checkpoint,
      settings=dict(seq=s["seq"]["sst2"], steps=s["steps"]["low"], lr=s["lr"], seeds=s["seeds"],
                    batch=s["batch"], lr_rows=[dict(lr=lr, seeds=seeds) for lr, seeds in LR_ROWS]),
      commands=study.commands, finetune=[])

  def arm(name, data_name, data_dir, lr, seeds_by_init, tag):
    for init, seeds in seeds_by_init.items():
      accs = [dp.finetune(study, s, config, spm, "sst2", data_dir, f"{tag}_{init}_s{seed}",
                          s["steps"]["low"], seed, lr,
                          init=checkpoint if init == "pretrained" else None) for seed in seeds]
      result["finetune"].append(dict(arm=name, data=data_name, lr=lr, init=init,
                                     seeds=list(seeds), accuracy=accs,
                                     mean=round(dp.mean(accs), 4)))

  both = {"pretrained": s["seeds"], "random": s["seeds"]}
  arm("tokenised", "SST-2 as published (PTB-tokenised)", task, s["lr"], both, "sst2_low")
  detok = detokenized_task(task, study.path("tasks", "sst2_low_detok"))
  study.commands.append(f"detokenised copy: {SCRIPT} "
                        f"detokenize_ptb {task} -> {detok}")
  arm("detokenised", "SST-2 detokenised (detokenize_ptb)", detok, s["lr"], both,
      "sst2_low_detok")
  for lr, seeds in LR_ROWS:
    arm(f"LR {lr:g}", "SST-2 as published (PTB-tokenised)", task, lr, seeds, f"sst2_low_lr{lr:g}")

  study.say("linear probe")
  study.commands.append(f"linear probe: {SCRIPT} linear_probe "
                        f"{task} (random init, {', '.join(probe_ckpts)})")
  result["probe"] = _cached(study.path("probe.json"), [task] + probe_ckpts, lambda: linear_probe(
      config, spm + ".model", task, probe_ckpts, s["seq"]["sst2"]))
  study.say("word embeddings")
  study.commands.append(f"word embeddings: {SCRIPT} neighbours "
                        f"{checkpoint}")
  result["embeddings"] = _cached(study.path("neighbours.json"), checkpoint, lambda: neighbours(
      config, spm + ".model", checkpoint))
  study.commands.append(f"carried over: {SCRIPT} carried_over "
                        f"{checkpoint}")
  runs = {f"sst2_low_{init}_s{seed}": study.path("finetune", f"sst2_low_{init}_s{seed}")
          for init in ("pretrained", "random") for seed in s["seeds"]}
  result["carried_over"] = _cached(study.path("carried_over.json"), [checkpoint, runs],
                                   lambda: carried_over(checkpoint, runs))
  if os.environ.get("DG_NOTE"):
    result["note"] = os.environ["DG_NOTE"]
  result["seconds_this_invocation"] = round(time.time() - started)
  result["load_at_end"] = dp.load()
  write_results(result, results_path)
  study.say(f"done: {results_path}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
