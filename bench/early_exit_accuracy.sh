#!/usr/bin/env bash
# Early exit's accuracy sweep (bench/early_exit.py --part=accuracy) on the quickstart's pair
# task, with a 12-layer model (one shared group) pretrained as scripts/quickstart.sh does:
#   corpus from docstrings -> SentencePiece -> pretraining TFRecords -> run_pretraining.py
#   -> the pair task ("are A and B in order?", MRPC format)
#   -> run_classifier.py --early_exit=patience (train, dev evaluation, export with patience 2)
#   -> the sweep: dev accuracy and mean exit layer at patience 1..6 beside the full model.
# Small settings (a few minutes of pretraining on 2 cores): the point is the difference between
# patience values and the full model on one fine-tuned model, not the absolute accuracy.
#
# Environment: PYTHON (default .venv/bin/python), EE_DIR (default early_exit_output),
# EE_PRETRAIN_STEPS (default 1200), EE_FINETUNE_STEPS (default 300).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${EE_DIR:-early_exit_output}
PRETRAIN_STEPS=${EE_PRETRAIN_STEPS:-1200}
FINETUNE_STEPS=${EE_FINETUNE_STEPS:-300}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
VOCAB=3000; LAYERS=12; SEQ=64; PREDS=10; BATCH=32
start=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - start ))s] $*"; }

rm -rf "$OUT"
mkdir -p "$OUT"
CONFIG="$OUT/albert_config.json"
"$PY" - "$CONFIG" "$VOCAB" "$LAYERS" <<'PYEOF'
import json, sys
cfg = json.load(open("configs/albert_quickstart.json"))
cfg["vocab_size"] = int(sys.argv[2])
cfg["num_hidden_layers"] = int(sys.argv[3])
json.dump(cfg, open(sys.argv[1], "w"), indent=2, sort_keys=True)
PYEOF

step "corpus, every 10th document held out for the pair task"
"$PY" -m albert_tf.cli.build_corpus --output_file="$OUT/corpus.txt" --max_mb=3
awk -v RS= -v ORS='\n\n' 'NR % 10 != 0' "$OUT/corpus.txt" > "$OUT/pretrain_corpus.txt"
awk -v RS= -v ORS='\n\n' 'NR % 10 == 0' "$OUT/corpus.txt" > "$OUT/heldout_corpus.txt"
awk '{ print tolower($0) }' "$OUT/pretrain_corpus.txt" > "$OUT/spm_input.txt"
"$PY" -m albert_tf.cli.train_spm --input_file="$OUT/spm_input.txt" \
  --model_prefix="$OUT/spm/30k-clean" --vocab_size=$VOCAB
"$PY" create_pretraining_data.py --input_file="$OUT/pretrain_corpus.txt" \
  --output_file="$OUT/pretrain_data/pretrain.tfrecord" --spm_model_file="$OUT/spm/30k-clean.model" \
  --vocab_file="$OUT/spm/30k-clean.vocab" --do_lower_case --max_seq_length=$SEQ \
  --max_predictions_per_seq=$PREDS --masked_lm_prob=0.15 --ngram=1 --nodo_whole_word_mask \
  --dupe_factor=2 --random_seed=12345 --noprogress

step "pretraining, $LAYERS layers, $PRETRAIN_STEPS steps"
"$PY" run_pretraining.py --input_file="$OUT/pretrain_data/pretrain.tfrecord" \
  --output_dir="$OUT/pretrain" --albert_config_file="$CONFIG" --do_train \
  --train_batch_size=$BATCH --max_seq_length=$SEQ --max_predictions_per_seq=$PREDS \
  --optimizer=adamw --learning_rate=7e-4 --num_train_steps=$PRETRAIN_STEPS \
  --num_warmup_steps=$(( PRETRAIN_STEPS / 10 )) --save_checkpoints_steps=$PRETRAIN_STEPS \
  --log_every_n_steps=$(( PRETRAIN_STEPS / 4 )) --seed=1

step "the pair task (MRPC format)"
"$PY" -m albert_tf.cli.make_pair_task --input_file="$OUT/heldout_corpus.txt" \
  --output_dir="$OUT/glue/MRPC" --num_train=1500 --num_dev=1000 --num_test=20 \
  --pair_kind=order --span=2

step "fine-tuning with early exit (+ export at patience 2)"
"$PY" run_classifier.py --task_name=MRPC --data_dir="$OUT/glue" --output_dir="$OUT/classifier" \
  --albert_config_file="$CONFIG" --spm_model_file="$OUT/spm/30k-clean.model" --do_lower_case \
  --init_checkpoint="$OUT/pretrain" --do_train --do_eval --max_seq_length=$SEQ \
  --train_batch_size=32 --eval_batch_size=64 --learning_rate=1e-4 \
  --train_step=$FINETUNE_STEPS --warmup_step=$(( FINETUNE_STEPS / 10 )) \
  --save_checkpoints_steps=$FINETUNE_STEPS --seed=1 --early_exit=patience \
  --early_exit_patience=2 --export_dir="$OUT/export"

step "the patience sweep on the dev set"
"$PY" bench/early_exit.py --part=accuracy --run_dir="$OUT/classifier" --data_dir="$OUT/glue" \
  --spm_model_file="$OUT/spm/30k-clean.model" --max_seq_length=$SEQ
step "done"
