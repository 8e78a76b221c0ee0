"""README.md and docs/*.md as a test: every ```bash command and ```python snippet in them runs, as
typed, on tiny stand-ins, so the pages cannot say what the code does not do.

The commands are read from README.md and docs/*.md when the tests are collected
(tests/helpers/readme.py), one test per command, named `<section>-<n>` on the README and
`<page>:<section>-<n>` on docs/<page>.md (the n-th command or snippet under that heading). A
command written the same way on two pages (the README's three jobs, repeated where docs/ open
with them) runs once: the second page's test checks the first one's result. Each
runs in a subprocess with cwd = one shared stand-in directory built once per session, relative
paths as written, through `bash -c` (quotes, globs, `$GLUE_DIR`, `$PWD` as a shell reads them),
with `python` the suite's interpreter; a Python snippet runs in that directory as typed into the
interactive interpreter (statement by statement, bare expressions printed, so what the README
shows as a result is checked).
Each must exit 0 and leave the files the README says it writes (RULES[...].produces).

Every command must match exactly one rule of RULES (a regular expression on the command): a
README command the harness cannot classify FAILS `test_readme_command`, so the README cannot
outgrow the harness silently; a rule that matches nothing fails `test_every_rule_is_used`.
A command that uses the output of another (the second `convert`, `from_pretrained` on the
fine-tuned MNLI run, `query_savedmodel` on its export), or writes or reads a path another one
writes, names it in `after`: that one runs first, once per session, whatever tests are selected.
The selected commands run in the background on WORKERS threads (2), independent ones side by
side, and each test waits for its own; a command whose `after` command failed is not run (its
test names the failed one).

Stand-ins (tests/helpers/readme.py build_stand_ins; tiny config H=32, E=16, L=2, vocab 1000):

| README path or name | stand-in |
|---|---|
| `run_*.py`, `create_pretraining_data.py`, `albert_tf/` ... | symlinks to this checkout |
| `albert_base/` (the unpacked `albert_base_v2.tar.gz`) | `albert_config.json` = configs/albert_tiny.json; `30k-clean.model` / `.vocab` = a tiny SentencePiece model of 1000 pieces (tests/helpers/text.py); `model.ckpt-best` = a randomly initialised tiny AlbertPretrainer written with albert_tf.save_tf1_checkpoint (official names, `global_step`) |
| `configs/albert_base_v2.json` | the tiny config (the repo's real one is ALBERT-base) |
| `30k-clean.model`, `30k-clean.vocab` (pretraining) | the same tiny SentencePiece model |
| `corpus/*.txt` | `corpus/docs.txt`: the tiny corpus of tests/helpers/text.py (~24 KB) |
| `$GLUE_DIR` | `glue_data/`: every GLUE task in the download's layout (tests/helpers/glue_fixtures.py) |
| `RACE/` | the download's layout `RACE/<split>/<middle\\|high>/<n>.txt` + `all.txt` (glue_fixtures) |
| `train-v2.0.json`, `dev-v2.0.json` | tests/fixtures/squad/tiny-v2.0.json (6 questions) |
| `train-v1.1.json`, `dev-v1.1.json` | tests/fixtures/squad/tiny-v1.1.json |
| `run_glue.sh`, `recipes/` | symlinks to this checkout (the pages' recipe commands run in tests/integration/test_recipes.py) |
| `data/train.csv`, `dev.csv`, `test.csv` | 8 / 4 / 3 rows of "text,label" (labels neg/pos; test: "text") |
| `ner_data/train.txt`, `dev.txt`, `test.txt` | CoNLL-2003 style `word POS tag` lines of six sentences (LOC, PER; tests/helpers/ner.py) |
| `albert_base_zh/` (the unpacked `albert_base_zh.tar.gz`) | `albert_config.json` (the tiny config, vocab_size = the vocabulary's), `model.ckpt-best` (a random tiny pretrainer), `vocab_chinese.txt` (tests/helpers/text.py make_wordpiece_vocab): tests/helpers/model_dirs.py write_chinese_directories |
| `afqmc_public/`, `cmrc2018/{train,dev}.json`, `corpus_zh/wiki_zh.txt` | CLUE AFQMC's JSON Lines (8 / 4 / 4), CMRC 2018's SQuAD JSON (4 questions) and a Chinese corpus (tests/helpers/chinese.py) |
| `albert-base-v2-mnli`, `albert_base_sst2_hf` | HF AlbertForSequenceClassification directories (albert_tf.save_hf_checkpoint of a random tiny classifier; id2label = MNLI's 3 / SST-2's 2 labels) with `spiece.model` |
| `.venv` (`source .venv/bin/activate`) | the suite's own environment (sys.prefix) |
| `albert_base_hf`, `out/...`, `pretrain/`, `pretrain_domain/`, `vocab/`, `records/train.tfrecord`, `domain_records/train.tfrecord`, `albert_base_tf1|2/` | written by the pages' own commands |

Sizes: TINY_FLAGS rewrites these flags, wherever they appear, so that each command runs in
seconds (the values the README gives are for ALBERT-base on real data):
  --max_seq_length=64       512 positions is 8x the work at every layer, and the tiny config has
                            128 positions; one value for all, so the pretraining data and
                            run_pretraining agree as in the README
  --doc_stride=32, --max_query_length=16, --max_qa_length=16
                            must fit in 64 (SQuAD: query + 3 < max_seq_length; RACE likewise)
  --train_batch_size=4      4096/128/48/32 examples per step would be the whole tiny data many
                            times over
  --num_train_steps=2, --train_step=2
                            125000/10000/12000/2000 steps; 2 train, checkpoint and evaluate
  --num_warmup_steps=1, --warmup_step=1
                            warmup must not exceed the steps
  --save_checkpoints_steps=2
                            one checkpoint at the end (each checkpoint is evaluated)
  --dupe_factor=1           40 passes over the corpus
  --num_workers=2           $(nproc) or 16 worker processes on the 2-core test machine
  --vocab_size=1000         the 30000 pieces of the released models need far more text than the
                            tiny corpus; 1000 = the tiny config's vocab_size, as the README's rule
A rule's `rewrite` shortens a loop over values: docs/early_exit.md's patience sweep runs patience
1 and 6 of its 1..6 (each value is one more run of the same code path).
PYTHON_REWRITES does the same for the snippets: the token id 1374 (of the 30k vocabulary) is out
of the tiny vocabulary's range.

Not run (RULES with `marked`, each a skip with its reason): `make quickstart` (CI runs it after
the tests), `make test` and pytest (this suite), `make bench-peers` (minutes to hours, its own
venv), the checkpoint download and its `tar` (no network; `albert_base/` is what they unpack),
TF Serving, its Docker image, curl and the gRPC client (no `tensorflow_model_server` binary on a
test machine; `query_savedmodel` queries the same exports instead), the recipes (run_glue.sh and
recipes/*.sh with the pages' arguments are tests/integration/test_recipes.py's end-to-end runs,
which make these rules' checks), the cloud steps of the TPU
recipe (creating the VM and the bucket; its `gs://my-bucket` commands run on a ram:// bucket in
tests/integration/test_remote_storage.py instead), the two-machine
TF_CONFIG example (needs host0/host1 and a gs:// bucket; its `...` stands for the other flags),
the keras-hub snippet (Keras 3 and keras-hub, outside the requirements).
Checked instead to fail with their one line: the TPU flags of docs/distributed_training.md on a
machine without a TPU, and its TF_CONFIG with the README's pretraining command when host1 never
answers.
"""

import dataclasses
import os
import re
import subprocess
import signal
import sys
import tempfile
import threading
import time
from typing import Mapping, Optional, Sequence

import pytest

from tests.helpers import readme

TINY_FLAGS = {
    "max_seq_length": "64",
    "doc_stride": "32",
    "max_query_length": "16",
    "max_qa_length": "16",
    "train_batch_size": "4",
    "num_train_steps": "2",
    "train_step": "2",
    "num_warmup_steps": "1",
    "warmup_step": "1",
    "save_checkpoints_steps": "2",
    "dupe_factor": "1",
    "num_workers": "2",
    "vocab_size": "1000",
}

PYTHON_REWRITES = {"1374": "137"}

# TensorFlow's C++ log lines, which the README says the scripts filter out of stderr ("By default
# a script prints its own progress lines, results, warnings and errors only").
TENSORFLOW_NOISE = ("cuInit", "cudart_stub", "oneDNN custom operations", "cpu_feature_guard",
                    "absl::InitializeLog", "I0000 ", "W0000 ", "E0000 ")

ENV = {"GLUE_DIR": "glue_data"}  # the README's $GLUE_DIR, relative to the stand-in directory
TIMEOUT = 600  # seconds per command
# Commands run on this many threads (independent ones side by side; `after` orders the rest): the
# work is mostly single-threaded (imports, tracing, small ops), so 2 fill the 2-core CI machine.
WORKERS = int(os.environ.get("ALBERT_TF_README_WORKERS", "2"))


@dataclasses.dataclass(frozen=True)
class Rule:
  name: str
  pattern: str  # searched in the command text (re.S)
  produces: Sequence[str] = ()  # globs below the stand-in directory that must exist after it
  after: Sequence[str] = ()  # rules whose commands must have run first (in README order)
  marked: Optional[str] = None  # why it is not run on a test machine
  stdout: Optional[str] = None  # a regular expression its stdout must contain
  output: Optional[str] = None  # ... its stdout + stderr must contain
  contents: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
  # file (glob, first match) -> regular expressions (re.M) the README says it holds
  # False for TensorFlow's own tools (saved_model_cli): their log lines are not ours to filter.
  quiet: bool = True
  # Regular expression -> replacement in the command's text: a loop over values the page gives
  # runs over fewer of them here (each value is one more script run of the same code path).
  rewrite: Mapping[str, str] = dataclasses.field(default_factory=dict)


EXPORT = ("{}/*/saved_model.pb", "{}/*/core_ops/saved_model.pb", "{}/albert_model.tflite")
GLUE_RUN = ("{}/model.ckpt-best.index", "{}/eval_results.txt", "{}/best_trial.txt")
BEST_TRIAL = [r"^\d+:\d+:-?\d"]  # the official <step>:<best step>:<best value>
RECIPES = "runs in tests/integration/test_recipes.py::"

RULES = [
    Rule("make", r"^make (quickstart|test)\b",
         marked="`make quickstart` runs in CI after the tests; `make test` is this suite"),
    Rule("bench_peers", r"^make bench-peers( PEERS_ARGS=--early_exit)?( ARGS=--isa=AVX2)?$",
         marked="minutes to hours on 2 cores, in its own venv (bench/peers/requirements.txt)"),
    Rule("pytest", r"^\.venv/bin/python -m pytest ", marked="the suite itself (`make test`)"),
    Rule("activate", r"^source \.venv/bin/activate$"),
    Rule("cuda_install", r'^pip install "tensorflow\[and-cuda\]~=2\.20\.0"$',
         marked="replaces the venv's TensorFlow with the CUDA build (gigabytes of CUDA wheels) "
         "for a GPU the test machines do not have"),
    # The device check: the test machines have no GPU (and the harness hides any), so `[]`;
    # a bare `python -c` shows TensorFlow's own log lines (there, why no GPU is used).
    Rule("gpu_device_check", r"^python -c \"import tensorflow as tf; "
         r"print\(tf\.config\.list_physical_devices\('GPU'\)\)\"$", stdout=r"^\[\]\n$",
         quiet=False),
    Rule("zh_download", r"^python -m albert_tf\.cli\.download_data --tasks=albert_base_zh,AFQMC ",
         marked="downloads (no network on a test machine; albert_base_zh/ and afqmc_public/ "
         "are what it unpacks)"),
    Rule("zh_afqmc", r"^python run_classifier\.py --task_name=custom --data_dir=afqmc_public ",
         produces=["out/afqmc/model.ckpt-best.index", "out/afqmc/predictions.tsv",
                   "out/afqmc_export/*/saved_model.pb", "out/afqmc_export/*/assets/vocab.txt"]),
    Rule("zh_cmrc", r"^python run_squad_v1\.py --init_checkpoint=albert_base_zh ",
         produces=["out/cmrc2018/predictions.json"]),
    Rule("zh_pretraining_data", r"^python create_pretraining_data\.py "
         r"--input_file=corpus_zh/wiki_zh\.txt ", produces=["records_zh/train.tfrecord"]),
    Rule("zh_from_pretrained", r'from_pretrained\("albert_base_zh"\)',
         stdout=r"\['我', '们', '的', '电', '影', '很', '好'\]"),
    Rule("zh_convert_to_hf", r"convert --input_checkpoint=albert_base_zh ",
         produces=["albert_base_zh_hf/model.safetensors", "albert_base_zh_hf/vocab.txt",
                   "albert_base_zh_hf/tokenizer_config.json"]),
    Rule("zh_query", r"^python -m albert_tf\.cli\.query_savedmodel "
         r"--export_dir=out/afqmc_export ", after=["zh_afqmc"], stdout=r"\b[01]\b"),
    Rule("download", r"^curl -LO https://storage\.googleapis\.com/albert_models/",
         marked="downloads the official tarball (tests run offline; albert_base/ stands in for "
         "what it unpacks)"),
    Rule("untar", r"^tar -xzf albert_base_v2\.tar\.gz", marked="unpacks the download above "
         "(albert_base/ is its stand-in)"),
    Rule("script_help", r"^python run_classifier\.py --helpfull \| grep -A2 -- --export_precision$",
         stdout=r"--export_precision: <fp32\|bf16\|auto>"),
    # The corpus through the records' normalisation: lower-cased pieces only (the stand-in
    # corpus has capitals).
    Rule("train_spm", r"^python -m albert_tf\.cli\.train_spm .*--model_prefix=vocab/30k-clean",
         produces=["vocab/30k-clean.model", "vocab/30k-clean.vocab"],
         contents={"vocab/30k-clean.vocab": [
             r"\A(?:(?:\[CLS\]|\[SEP\]|\[MASK\]|[^A-Z\t\n]*)\t[^\n]*\n)*\Z"]}),
    Rule("pretrainer_snippet", r'load_tf1_checkpoint\(model, "albert_base/model\.ckpt-best"\)',
         produces=["out/model.ckpt.index"], stdout=(
             # the README's shape comments at the tiny size: [batch, seq_len, hidden],
             # [batch, hidden], mlm [batch, predictions, vocab] and sop [batch, 2] in float32
             r"loaded \d+ variables\n(?s:.*)shape=\(1, 6, 32\)(?s:.*)shape=\(1, 32\)"
             r"(?s:.*)shape=\(1, 1, 1000\), dtype=float32(?s:.*)shape=\(1, 2\), "
             r"dtype=float32(?s:.*)\n\d+\n$")),
    Rule("from_pretrained_snippet", r'from_pretrained\("out/mnli/model\.ckpt-best"',
         after=["glue_mnli"], stdout=r"'labels': \['(entailment|neutral|contradiction)'\], "
         r"'probabilities': array\(\[\[[^\]]*\]\], dtype=float32\)"),
    # docs/python_api.md's notebook: fit on raw text, the scripts' export and checkpoint.
    Rule("text_classifier_snippet", r'TextClassifier\.from_pretrained\("albert_base", '
         r'num_classes=2,\s+label_list=', produces=["export/notebook/*/saved_model.pb",
                                                    "out/notebook/model.ckpt-best.index",
                                                    "out/notebook/label_list.json"],
         stdout=r"'accuracy': [\d.]+\}(?s:.*)\(1, 2\)(?s:.*)\['(positive|negative)'\]\n(?s:.*)"
         r"'labels': \['(positive|negative)'\]"),
    Rule("multiple_choice_snippet", r'MultipleChoice\.from_pretrained\("albert_base", ',
         produces=["export/race_notebook/*/saved_model.pb",
                   "out/race_notebook/model.ckpt-best.index",
                   "out/race_notebook/best_checkpoint.json"],
         stdout=r"'accuracy': [\d.]+\}(?s:.*)\(1, 4\)\n(?s:.*)\['[ABCD]'\]\n(?s:.*)"
         r"'multiple_choice'\n$"),
    Rule("text_pair_snippet", r"text_pair=True,\s+sequence_length=64\)",
         stdout=r"\(1, 1\)\n$"),
    # docs/python_api.md's NER and SQuAD notebooks: the scripts' exports and checkpoints.
    Rule("token_classifier_snippet", r'TokenClassifier\.from_pretrained\(\s+"albert_base"',
         produces=["export/ner_notebook/*/saved_model.pb",
                   "out/ner_notebook/model.ckpt-best.index", "out/ner_notebook/tag_list.json"],
         stdout=r"\[\['[BIO][-A-Z]*', '[BIO][-A-Z]*', '[BIO][-A-Z]*'\]\]\n(?s:.*)\n[\d.]+\n"
         r"\[\[.*\]\]\n(?s:.*)\['O', 'B-PER', 'I-PER', 'B-LOC', 'I-LOC'\] BIO\n$"),
    Rule("question_answerer_snippet", r'QuestionAnswerer\.from_pretrained\(\s+"albert_base"',
         produces=["export/squad_notebook/saved_model/*/saved_model.pb",
                   "out/squad_notebook/model.ckpt-best.index"],
         stdout=r"\n'[^\n]*' [\d.]+\n'[^\n]*' [\d.]+\n(?s:.*)\n[\d.]+\n(?s:.*)\nsquad_v2\n$"),
    Rule("gradient_tape_snippet", r"with tf\.GradientTape\(\) as tape:\n.*model\.classifier",
         stdout=r"^\d+\.\d+\n$"),
    Rule("mirrored_fit_snippet", r"(?<!Worker)MirroredStrategy\(\)(?s:.*)TextClassifier"),
    Rule("multi_worker_fit_snippet", r"MultiWorkerMirroredStrategy\(\)(?s:.*)TextClassifier"),
    # (no TPU here: the block's fallback runs, on token ids from its tf.data pipeline)
    Rule("tpu_fit_snippet", r"TPUClusterResolver\(\)(?s:.*)TextClassifier",
         stdout=r"\[('[01]', ){3}'[01]'\]\n$"),
    # docs/python_api.md's early exit: the export with its loop, the TF1 checkpoint, and the
    # stand-in's 2 layers where patience 2 lets no text leave early.
    Rule("early_exit_snippet", r'early_exit="patience"\)',
         produces=["export/early_exit/*/saved_model.pb", "out/early_exit/model.ckpt-best.index"],
         stdout=r"array\(\[2, 2, 2, 2\], dtype=int32\)\n$"),
    # docs/python_api.md's callbacks: each epoch's weights and the TensorBoard events written,
    # a tf.data with a label the head has not stopped by one message.
    Rule("keras_callbacks_snippet", r'BackupAndRestore\("out/keras/backup"\)',
         produces=["out/keras/weights-3.index", "out/keras/logs/train/events.out.tfevents.*"],
         stdout=r"labels: 2 is outside num_classes=2 \(expected 0\.\.1\)\n$"),
    Rule("mixed_precision_snippet", r'set_global_policy\("mixed_bfloat16"\)(?s:.*)TextClassifier',
         stdout=r"dtype\('float32'\)\n$"),
    Rule("convert_tf1_to_tf2", r"convert .*--input_checkpoint=albert_base/model\.ckpt-best "
         r".*--output_checkpoint=albert_base_tf2/ckpt",
         produces=["albert_base_tf2/checkpoint", "albert_base_tf2/ckpt*.index"]),
    Rule("convert_tf2_to_tf1", r"convert .*--input_checkpoint=albert_base_tf2(\s|$)",
         after=["convert_tf1_to_tf2"], produces=["albert_base_tf1/model.ckpt.index"]),
    Rule("convert_tf1_to_hf", r"convert .*--output_checkpoint=albert_base_hf .*--output_format=hf",
         produces=["albert_base_hf/config.json", "albert_base_hf/model.safetensors"]),
    Rule("convert_hf_to_tf1", r"convert .*--input_checkpoint=albert_base_hf(\s|$)",
         after=["convert_tf1_to_hf", "convert_tf2_to_tf1"],  # the latter writes the same path
         produces=["albert_base_tf1/model.ckpt.index", "albert_base_tf1/albert_config.json"]),
    Rule("create_pretraining_data", r"^python create_pretraining_data\.py .*--output_file=records/",
         after=["train_spm"],
         produces=["records/train.tfrecord"]),
    Rule("run_pretraining", r"^python run_pretraining\.py .*--output_dir=pretrain(\s|$)",
         after=["create_pretraining_data"],
         # "Each progress line shows step, loss, MLM and SOP accuracy, learning rate, examples/s
         # and ETA"
         output=r"step 2/2 \| loss [\d.]+ .*\| masked_lm_accuracy [\d.]+ .*\| "
         r"sentence_order_accuracy [\d.]+ .*\| learning_rate [\d.e-]+ .*examples/s \| ETA ",
         # 30k-clean.model: the records' SentencePiece model, found from their .vocab.json.
         produces=["pretrain/eval_results.txt", "pretrain/checkpoint", "pretrain/ckpt-2.index",
                   "pretrain/**/events.out.tfevents.*", "pretrain/30k-clean.model"],
         contents={"pretrain/eval_results.txt": [
             rf"^{key} = " for key in ("global_step", "loss", "masked_lm_accuracy",
                                       "masked_lm_loss", "sentence_order_accuracy",
                                       "sentence_order_loss")]}),
    # docs/pretraining.md, continued pretraining: records in the checkpoint's vocabulary, a run
    # from albert_base/ (weights only: step 0), a fine-tuning from its output directory alone.
    Rule("domain_records", r"^python create_pretraining_data\.py .*--output_file=domain_records/",
         produces=["domain_records/train.tfrecord"]),
    Rule("continued_pretraining",
         r"^python run_pretraining\.py .*--output_dir=pretrain_domain(\s|$)",
         after=["domain_records"],
         output=r"Starting from --init_checkpoint=albert_base/model\.ckpt-best \(its weights; "
         r"fresh optimizer state\) at step 0\n(?s:.*)step 2/2 \|",
         produces=["pretrain_domain/ckpt-2.index", "pretrain_domain/albert_config.json",
                   "pretrain_domain/30k-clean.model"]),
    Rule("finetune_domain",
         r"^python run_classifier\.py --task_name=SST-2 .*--output_dir=out/sst2_domain(\s|$)",
         after=["continued_pretraining"], produces=[p.format("out/sst2_domain") for p in GLUE_RUN]),
    Rule("reproduce_official_run",
         r"^python run_pretraining\.py .*--output_dir=repro(\s|$)", after=["domain_records"],
         produces=["repro/train/events.out.tfevents.*", "repro/ckpt-2.index"]),
    Rule("glue_mnli", r"^python run_classifier\.py --task_name=MNLI .*--output_dir=out/mnli(\s|$)",
         produces=[p.format("out/mnli") for p in GLUE_RUN + ("{}/MNLI-m.tsv",)] +
         [p.format("out/mnli_export") for p in EXPORT],
         contents={"out/mnli/best_trial.txt": BEST_TRIAL,
                   "out/mnli/eval_results.txt": [r"^eval_accuracy = "]}),
    Rule("squad", r"^python run_squad\.py .*--output_dir=out/squad(\s|$)",
         produces=[f"out/squad/{name}" for name in (
             "train.tfrecord", "dev.tfrecord", "dev_left_file.json", "predictions.json",
             "nbest_predictions.json", "null_odds.json", "model.ckpt-best.index")],
         contents={"out/squad/eval_results.txt": [r"^exact = ", r"^f1 = ", r"^HasAns_",
                                                  r"^NoAns_", r"_f1_thresh = "]}),
    Rule("race", r"^python run_race\.py .*--output_dir=out/race(\s|$)",
         produces=["out/race/model.ckpt-best.index", "out/race/eval_results.txt"],
         contents={"out/race/eval_results.txt": [r"^eval_accuracy = ", r"^middle_accuracy = ",
                                                 r"^high_accuracy = "]}),
    Rule("custom", r"^python run_classifier\.py --task_name=custom .*--output_dir=out/mine(\s|$)",
         produces=[p.format("out/mine") for p in GLUE_RUN + (
             "{}/predictions.tsv", "{}/test_results.tsv", "{}/label_list.json")] +
         [p.format("out/mine_export") for p in EXPORT],
         contents={"out/mine/best_trial.txt": BEST_TRIAL,
                   "out/mine/eval_results.txt": [r"^eval_accuracy = ", r"^matthew_corr = ",
                                                 r"^f1 = "],
                   "out/mine/predictions.tsv": [r"^id\tprediction\tprobability$",
                                                r"^0\t(neg|pos)\t0\.\d+$"]}),
    Rule("ner", r"^python run_ner\.py --data_dir=ner_data .*--output_dir=out/ner(\s|$)",
         produces=[p.format("out/ner") for p in GLUE_RUN + (
             "{}/test_predictions.txt", "{}/tag_list.json")] +
         [p.format("out/ner_export") for p in EXPORT],
         contents={"out/ner/eval_results.txt": [r"^eval_f1 = ", r"^eval_f1_LOC = ",
                                                r"^eval_precision = "],
                   "out/ner/test_predictions.txt": [r"^Albert NN B-PER [BIO]\S*$"]}),
    Rule("ner_query", r"^python -m albert_tf\.cli\.query_savedmodel --export_dir=out/ner_export ",
         after=["ner"], stdout=r"text: Tokyo is the capital of Japan\n-> "),
    # The recipes, with the pages' arguments (model dir, data dir, output dir) and scaled-down
    # steps, are test_recipes.py's end-to-end runs; the checks of these rules are made there.
    Rule("recipe_glue", r"^bash run_glue\.sh albert_base \$GLUE_DIR out/glue$",
         marked=f"{RECIPES}test_run_glue_from_an_official_directory (MRPC and STS-B)"),
    Rule("recipe_squad_v1", r"^bash recipes/run_squad_v1\.sh albert_base \. out/squad_v1$",
         marked=f"{RECIPES}test_squad_v1_from_an_hf_directory"),
    Rule("recipe_squad_v2", r"^bash recipes/run_squad_v2\.sh albert_base \. out/squad_v2$",
         marked=f"{RECIPES}test_squad_v2_from_our_tf2_directory"),
    Rule("recipe_race", r"^ALBERT_VERSION=v1 bash recipes/run_race\.sh albert_base \. "
         r"out/race_v1$", marked=f"{RECIPES}test_race_with_v1_values_from_an_official_directory"),
    Rule("tf_config", r"^export TF_CONFIG=.*host0:",
         marked="needs two machines, host0 and host1"),
    Rule("multi_worker", r"^python run_pretraining\.py .*--output_dir=gs://bucket/",
         marked="needs the two-machine cluster above and a gs:// bucket; `...` stands for the "
         "other flags"),
    Rule("cloud_resources", r"^gcloud (compute tpus |storage buckets create )",
         marked="creates a TPU VM and a bucket, or logs into the VM: no cloud on a test machine"),
    Rule("tpu_recipe", r"^(python|gcloud storage cp) .*gs://my-bucket",
         marked="runs in tests/integration/test_remote_storage.py::test_docs_tpu_recipe_on_a_bucket "
         "(one process per command, the bucket as ram:// carried between them, the TPU as 8 "
         "logical CPU devices)"),
    Rule("tf_serving", r"^tensorflow_model_server ",
         marked="no TF Serving binary on a test machine (query_savedmodel queries the export)"),
    # docs/fine_tuning.md, the SQuAD and RACE data: tests/helpers/readme.py builds stand-ins in
    # their layouts (the SQuAD JSON files, RACE/<split>/<level>/).
    Rule("squad_download", r"^curl -LO https://rajpurkar\.github\.io/SQuAD-explorer/dataset/"
         r"(train|dev)-v(1\.1|2\.0)\.json$",
         marked="downloads from the SQuAD site (tests run offline on stand-ins in its format)"),
    Rule("race_download", r"^(curl -LO https://www\.cs\.cmu\.edu/~glai1/data/race/RACE\.tar\.gz"
         r"|tar -xzf RACE\.tar\.gz)$",
         marked="downloads and unpacks RACE from CMU (tests run offline on stand-ins in its "
         "layout)"),
    Rule("tf_serving_apt", r"^(echo \"deb \[arch=amd64\] http://storage\.googleapis\.com/"
         r"tensorflow-serving-apt stable |curl -fsSL https://storage\.googleapis\.com/"
         r"tensorflow-serving-apt/|sudo apt-get update && sudo apt-get install "
         r"tensorflow-model-server$)",
         marked="installs a system package with sudo from the network (tests run offline, as "
         "a user)"),
    Rule("docker_serving", r"^docker run .* tensorflow/serving$",
         marked="no Docker on a test machine (query_savedmodel queries the export)"),
    Rule("curl", r"^curl .*localhost:8501",
         marked="queries the tensorflow_model_server above"),
    Rule("grpc_client", r"prediction_service_pb2_grpc\.PredictionServiceStub",
         marked="queries the tensorflow_model_server above (gRPC)"),
    Rule("output_dir_is_a_file", r"--output_dir=data/train\.csv --do_train; echo \"exit status \$\?\"$",
         stdout=r"exit status 2\n$",
         output=r"error: --output_dir=data/train\.csv: is a file, expected a directory"),
    Rule("tokenizer_snippet", r'FullTokenizer\(vocab_file=None, spm_model_file="albert_base/',
         stdout=r"(?m)^\[(?![^\n]*'\[CLS\]')'[^\n]*'\]$"),
    Rule("custom_results", r"^cat out/mine/eval_results\.txt out/mine/best_trial\.txt$",
         after=["custom"], stdout=r"eval_accuracy = [\d.]+\n(?s:.*)\n\d+:\d+:[\d.]+"),
    Rule("query_single_text", r"^python -m albert_tf\.cli\.query_savedmodel "
         r"--export_dir=out/mine_export --text_a=", after=["custom"], stdout=r"\b(neg|pos)\b"),
    Rule("query_savedmodel", r"^python -m albert_tf\.cli\.query_savedmodel "
         r".*--export_dir=out/mnli_export(\s|$)", after=["glue_mnli"],
         stdout=r"(entailment|neutral|contradiction)"),
    Rule("hf_mnli", r"^python run_classifier\.py --task_name=MNLI .*--output_dir=out/hf_mnli(\s|$)",
         produces=["out/hf_mnli/eval_results.txt"] +
         [p.format("out/hf_mnli_export") for p in EXPORT]),
    Rule("saved_model_cli_show", r"^saved_model_cli show .*out/mnli_export", after=["glue_mnli"],
         stdout=r"signature_def\['token_ids'\](?s:.*)'SentencepieceOp'", quiet=False),
    Rule("saved_model_cli_core_ops", r"^saved_model_cli run .*out/mnli_export.*core_ops",
         after=["glue_mnli"], stdout=r"Result for output key probabilities:", quiet=False),
    Rule("saved_model_cli_text_ops", r"^python -c .*tensorflow_text.*saved_model_cli\.main\(\)",
         after=["glue_mnli"], quiet=False,
         stdout=r"Result for output key label:\n\[b'(entailment|neutral|contradiction)'\]"),
    Rule("export_hub_pair", r"^python export_savedmodel\.py .*--with_preprocessor",
         produces=["hub/albert_base/encoder/saved_model.pb",
                   "hub/albert_base/preprocessor/saved_model.pb",
                   "hub/albert_base/preprocessor/assets/30k-clean.model"]),
    Rule("hub_keras_snippet", r'hub\.KerasLayer\("hub/albert_base/encoder", trainable=True\)',
         after=["export_hub_pair"], produces=["hub/classifier/saved_model.pb"],
         stdout=r"TensorShape\(\[1, 32\]\)"),
    # docs/early_exit.md: train with internal classifiers, sweep patience on dev, export + query.
    Rule("early_exit_train", r"^python run_classifier\.py --task_name=MRPC .*"
         r"--output_dir=out/mrpc_early_exit .*--do_train .*--early_exit=patience",
         produces=["out/mrpc_early_exit/model.ckpt-best.index"],
         contents={"out/mrpc_early_exit/eval_results.txt": [r"^eval_mean_exit_layer = "]}),
    Rule("early_exit_sweep", r"^for p in 1 2 3 4 5 6; do .*--early_exit_patience=\$p",
         after=["early_exit_train"], rewrite={r"^for p in 1 2 3 4 5 6;": "for p in 1 6;"},
         stdout=r"(?s)(eval_accuracy = [\d.]+\neval_mean_exit_layer = [\d.]+\n.*){2}"),
    Rule("early_exit_export", r"^python run_classifier\.py --task_name=MRPC .*"
         r"--export_dir=out/mrpc_early_exit_export .*--early_exit=patience",
         after=["early_exit_train"], produces=[p.format("out/mrpc_early_exit_export")
                                               for p in EXPORT]),
    Rule("early_exit_query", r"^python -m albert_tf\.cli\.query_savedmodel "
         r"--export_dir=out/mrpc_early_exit_export ", after=["early_exit_export"],
         stdout=r"at layer [12]\b"),
    # docs/data_at_scale.md: the Beam DirectRunner and the local tool write the same bytes.
    Rule("beam_direct_runner", r"^python create_pretraining_data\.py .*"
         r"--output_file=pretrain_beam/train .*--runner=DirectRunner",
         # (train.vocab.json: the vocabulary record, written on Beam too)
         produces=[f"pretrain_beam/train-0000{i}-of-00004" for i in range(4)] +
         ["pretrain_beam/train.vocab.json"]),
    Rule("beam_local_twin", r"^python create_pretraining_data\.py .*"
         r"--output_file=pretrain_local/train ",
         produces=[f"pretrain_local/train-0000{i}-of-00004" for i in range(4)]),
    Rule("beam_cmp", r"^cmp <\(cat pretrain_beam/train-\*\) <\(cat pretrain_local/train-\*\)$",
         after=["beam_direct_runner", "beam_local_twin"]),
    # docs/tpu_and_multi_gpu.md: the whole step compiled as a TPU would, on this CPU.
    Rule("xla_whole_step", r"^python run_classifier\.py --task_name=MRPC .*"
         r"--output_dir=out/mrpc_xla .*--xla_whole_step$",
         produces=["out/mrpc_xla/model.ckpt-best.index"],
         contents={"out/mrpc_xla/eval_results.txt": [r"^eval_accuracy = "]}),
    Rule("keras_hub_snippet", r"keras_hub\.models\.AlbertBackbone\.from_preset",
         marked="needs keras-hub in a Keras 3 environment outside the requirements "
         "(tests/checkpoints/test_keras_hub.py checks its committed outputs)"),
]
RULES_BY_NAME = {rule.name: rule for rule in RULES}
COMMANDS = readme.all_commands()
# The first command of each text: a command repeated on another page runs once, as this one.
FIRST = {}
for _command in COMMANDS:
  FIRST.setdefault((_command.language, _command.text), _command)


def first(command):
  """The command that runs for `command`: the first with the same text, in page order."""
  return FIRST[(command.language, command.text)]


def classify(command):
  """The one rule matching the command; raises AssertionError for none or several."""
  matches = [rule for rule in RULES if re.search(rule.pattern, command.text, re.S)]
  assert matches, (
      f"{command.where}: a command the harness cannot "
      f"classify; add a rule for it to RULES in {__file__}:\n{command.text}")
  assert len(matches) == 1, (f"{command.where}: rules "
                             f"{[r.name for r in matches]} all match:\n{command.text}")
  return matches[0]


def commands_of(rule_name):
  """The commands of one rule that run, in page order (a repeated text once; unclassifiable
  ones are skipped here: their own tests fail)."""
  return [c for c in COMMANDS if first(c) is c
          and [r.name for r in RULES if re.search(r.pattern, c.text, re.S)] == [rule_name]]


def tiny(command):
  """The command's text with TINY_FLAGS (shell) or PYTHON_REWRITES (Python) applied, and its
  rule's `args` appended."""
  text = command.text
  if command.language == "python":
    for old, new in PYTHON_REWRITES.items():
      text = re.sub(rf"\b{old}\b", new, text)
    return text
  for flag, value in TINY_FLAGS.items():
    text = re.sub(rf"(?<![\w-])--{flag}=(\"[^\"]*\"|'[^']*'|\S+)", f"--{flag}={value}", text)
  rule = rule_of(command)
  for pattern, replacement in (rule.rewrite.items() if rule else ()):
    text, count = re.subn(pattern, replacement, text)
    assert count, f"{command.where}: the rule's rewrite {pattern!r} no longer matches"
  return text


def _env():
  env = dict(os.environ, **ENV)
  env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
  for name in ("TF_CONFIG", "PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL"):
    env.pop(name, None)  # as a user's shell has them; the scripts quiet TensorFlow themselves
  env["CUDA_VISIBLE_DEVICES"] = ""
  return env


def rule_of(command):
  """The one rule of a command, or None (none or several: its own test fails)."""
  matches = [r for r in RULES if re.search(r.pattern, command.text, re.S)]
  return matches[0] if len(matches) == 1 else None


def dependencies(command):
  rule = rule_of(command)
  return [dep for name in (rule.after if rule else ()) for dep in commands_of(name)]


class Runner:
  """Runs README commands in the shared stand-in directory, each once per session.

  `start` runs the selected commands (and what they need) in the background on WORKERS threads,
  README order, each command only after its `after` commands have finished; a test then waits
  for its command's result. A command whose dependency failed is not run.
  """

  def __init__(self, root):
    self.root = root
    self.results = {}  # test_id -> (CompletedProcess or None, seconds, error or None)
    self._cond = threading.Condition()
    self._pending = []  # scheduled, not started (README order)
    self._running = set()
    self.cpu_seconds = {}  # test_id -> CPU seconds

  def start(self, commands, workers):
    wanted = set()

    def add(command):
      command = first(command)
      rule = rule_of(command)
      if command.test_id in wanted or rule is None or rule.marked:
        return
      wanted.add(command.test_id)
      for dep in dependencies(command):
        add(dep)

    for command in commands:
      add(command)
    # Commands others wait for first (the fine-tuned MNLI run, the pretraining data), then README
    # order: the longest chains start early.
    def dependents(command):
      return sum(command in dependencies(c) for c in COMMANDS if c.test_id in wanted)
    with self._cond:
      self._pending = sorted((c for c in COMMANDS if c.test_id in wanted),
                             key=lambda c: -dependents(c))
    for _ in range(workers):
      threading.Thread(target=self._work, daemon=True).start()

  def _work(self):
    while True:
      with self._cond:
        while True:
          if not self._pending:
            return
          ready = [c for c in self._pending
                   if all(d.test_id in self.results for d in dependencies(c))]
          if ready:
            command = ready[0]
            self._pending.remove(command)
            self._running.add(command.test_id)
            break
          self._cond.wait()
      result = self._execute(command)
      with self._cond:
        self.results[command.test_id] = result
        self._running.discard(command.test_id)
        self._cond.notify_all()

  def run(self, command):
    """(CompletedProcess or None, seconds, error or None) of the command, run once (a repeated
    text: its first command's)."""
    command = first(command)
    with self._cond:
      while command.test_id not in self.results and (
          command in self._pending or command.test_id in self._running):
        self._cond.wait()
      if command.test_id in self.results:
        return self.results[command.test_id]
    for dep in dependencies(command):
      self.run(dep)
    result = self._execute(command)
    with self._cond:
      self.results.setdefault(command.test_id, result)
      return self.results[command.test_id]

  def _execute(self, command):
    for dep in dependencies(command):
      proc, _, error = self.results[dep.test_id]
      if error or proc.returncode != 0:
        return None, 0.0, (f"needs {dep.where}, which failed: "
                           f"{error or f'exit {proc.returncode}'}")
    text = tiny(command)
    if command.language == "python":
      script = self.root / f"snippet_{command.test_id}.py"
      script.write_text(text, encoding="utf-8")
      argv = [sys.executable, "-c", readme.INTERACTIVE_RUNNER, script.name]
    else:
      argv = ["bash", "-c", text]
    start = time.monotonic()
    proc, cpu = _run_with_cpu_time(argv, str(self.root))
    self.cpu_seconds[command.test_id] = cpu
    if proc is None:
      return None, time.monotonic() - start, f"still running after {TIMEOUT} s: killed"
    return proc, time.monotonic() - start, None


def _run_with_cpu_time(argv, cwd):
  """(CompletedProcess or None after TIMEOUT, CPU seconds of the command and its children).

  The CPU time (os.wait4's rusage) is what the machine's load does not inflate: the measure of
  this file's cost.
  """
  with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
    popen = subprocess.Popen(argv, cwd=cwd, env=_env(), stdout=out, stderr=err, text=True,
                             start_new_session=True)
    killed = []

    def kill():
      killed.append(True)
      try:
        os.killpg(popen.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass

    timer = threading.Timer(TIMEOUT, kill)
    timer.start()
    try:
      _, status, usage = os.wait4(popen.pid, 0)
    finally:
      timer.cancel()
    popen.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait
    out.seek(0)
    err.seek(0)
    cpu = usage.ru_utime + usage.ru_stime
    if killed:
      return None, cpu
    return subprocess.CompletedProcess(argv, popen.returncode, out.read(), err.read()), cpu


@pytest.fixture(scope="session")
def readme_runner(tmp_path_factory, request):
  root = tmp_path_factory.mktemp("readme")
  readme.build_stand_ins(root)
  runner = Runner(root)
  selected = [item.callspec.params["command"] for item in request.session.items
              if getattr(item, "module", None) is sys.modules[__name__] and hasattr(item, "callspec")
              and "command" in item.callspec.params]
  if any(item.name.startswith(("test_tpu_flags", "test_cluster_without"))
         for item in request.session.items):
    selected += commands_of("create_pretraining_data")
  runner.start(selected, WORKERS)
  yield runner
  reporter = request.config.pluginmanager.get_plugin("terminalreporter")
  capture = request.config.pluginmanager.get_plugin("capturemanager")
  if reporter and capture and runner.results:
    with capture.global_and_fixture_disabled():
      reporter.write_line(
          f"\nREADME commands ({WORKERS} threads), wall / CPU seconds: " + ", ".join(
              f"{test_id} {seconds:.0f}/{runner.cpu_seconds.get(test_id, 0):.0f}"
              for test_id, (_, seconds, _) in runner.results.items()) +
          f"; CPU total {sum(runner.cpu_seconds.values()):.0f} s")


def _describe(command, text, proc):
  return (f"{command.where}, run as:\n{text}\n"
          f"exit {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n"
          f"{proc.stderr[-4000:]}")


@pytest.mark.parametrize("command", COMMANDS, ids=[c.test_id for c in COMMANDS])
def test_readme_command(command, readme_runner):
  rule = classify(command)
  if rule.marked:
    pytest.skip(f"not run: {rule.marked}")
  proc, seconds, error = readme_runner.run(command)
  print(f"{command.test_id}: {seconds:.1f} s")
  assert not error, f"{command.where}: {error}"
  assert proc.returncode == 0, _describe(command, tiny(command), proc)
  assert "Traceback" not in proc.stderr, _describe(command, tiny(command), proc)
  root = readme_runner.root
  missing = [pattern for pattern in rule.produces if not list(root.glob(pattern))]
  assert not missing, f"{command.test_id}: did not write {missing}\n" + _describe(
      command, tiny(command), proc)
  for pattern, expressions in rule.contents.items():
    text = sorted(root.glob(pattern))[0].read_text(encoding="utf-8")
    for expression in expressions:
      assert re.search(expression, text, re.M), (
          f"{command.test_id}: {pattern} lacks {expression!r}:\n{text[:3000]}")
  if command.language == "bash" and rule.quiet:
    noise = [n for n in TENSORFLOW_NOISE if n in proc.stderr]
    assert not noise, f"TensorFlow log lines {noise}:\n" + _describe(command, tiny(command), proc)
  if rule.output:
    assert re.search(rule.output, proc.stdout + proc.stderr), _describe(
        command, tiny(command), proc)
  if rule.stdout:
    assert re.search(rule.stdout, proc.stdout), _describe(command, tiny(command), proc)


def test_every_rule_is_used():
  """A rule no README command matches is a stale entry of the table (or a command gone)."""
  used = {classify(c).name for c in COMMANDS}
  assert not [r.name for r in RULES if r.name not in used]


def test_tpu_flags_without_a_tpu_are_one_line(readme_runner):
  """The TPU flags of docs/distributed_training.md on the README's pretraining command, on a
  machine without a TPU: exit 2 with one line naming the TPU, no traceback and no wait."""
  flags = re.search(r"\*\*TPU\*\*: `([^`\[]+)",
                    (readme.DOCS / "distributed_training.md").read_text(encoding="utf-8"))
  assert flags, "docs/distributed_training.md: the TPU flags moved"
  pretraining = commands_of("run_pretraining")[0]
  for dep in commands_of("create_pretraining_data"):
    readme_runner.run(dep)
  text = re.sub(r"--output_dir=\S+", "--output_dir=pretrain_tpu", tiny(pretraining))
  text += " " + flags.group(1).strip()
  proc = subprocess.run(["bash", "-c", text], cwd=str(readme_runner.root), env=_env(),
                        capture_output=True, text=True, timeout=120, check=False)
  lines = proc.stderr.strip().splitlines()
  assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
  assert lines[-1].startswith("error: --tpu_name=my-tpu: "), proc.stderr[-3000:]


def test_cluster_without_its_peers_is_one_line(readme_runner):
  """The TF_CONFIG of docs/distributed_training.md (worker 0 of host0/host1) with the README's
  pretraining command: no
  host1 answers, so after --worker_wait_seconds it gives up with one line, exit 2."""
  export, = commands_of("tf_config")
  pretraining = commands_of("run_pretraining")[0]
  for dep in commands_of("create_pretraining_data"):
    readme_runner.run(dep)
  command = re.sub(r"--output_dir=\S+", "--output_dir=pretrain_cluster", tiny(pretraining))
  text = f"{export.text}\n{command} --worker_wait_seconds=3"
  proc = subprocess.run(["bash", "-c", text], cwd=str(readme_runner.root), env=_env(),
                        capture_output=True, text=True, timeout=120, check=False)
  lines = proc.stderr.strip().splitlines()
  assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
  assert lines[-1].startswith("error: gave up after 3 s waiting for worker 1 at host1:12345"), (
      proc.stderr[-3000:])
