#!/usr/bin/env bash
# Early exit's accuracy sweep (bench/early_exit.py --part=accuracy) on a quickstart pair task
# with a 12-layer model (H=128, one shared group: configs/albert_quickstart.json with 12 layers):
#   corpus from docstrings -> SentencePiece -> [pretraining, EE_PRETRAIN_STEPS > 0]
#   -> the pair task from held-out documents (MRPC format; EE_PAIR_KIND "next": is B the
#      sentence after A, or from another document?)
#   -> run_classifier.py --early_exit=patience (train, dev evaluation at patience 2)
#   -> the sweep: dev accuracy and mean exit layer at patience 1..6 beside the full model.
# The defaults are what bench/results/early_exit_accuracy.json holds. They fine-tune from random
# initialisation because 1200 pretraining steps of the 12-layer model on 2 shared cores (20 min)
# learned nothing (step 600: masked-LM accuracy 0.056, sentence order 0.50). The quickstart's
# "order" task needs pretraining (from scratch it answers one class); "next" is learnable without.
#
# Environment: PYTHON (default .venv/bin/python), EE_DIR (default early_exit_output),
# EE_PRETRAIN_STEPS (default 0: none), EE_PAIR_KIND (default next), EE_FINETUNE_STEPS (400).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${EE_DIR:-early_exit_output}
PRETRAIN_STEPS=${EE_PRETRAIN_STEPS:-0}
PAIR_KIND=${EE_PAIR_KIND:-next}
FINETUNE_STEPS=${EE_FINETUNE_STEPS:-400}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
SEQ=64; PREDS=10
start=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - start ))s] $*"; }

rm -rf "$OUT"
mkdir -p "$OUT"
CONFIG="$OUT/albert_config.json"
"$PY" -c 'import json, sys; c = json.load(open("configs/albert_quickstart.json")); c.update(
  vocab_size=3000, num_hidden_layers=12); json.dump(c, open(sys.argv[1], "w"), indent=2)' "$CONFIG"

step "corpus, every 10th document held out for the pair task; SentencePiece"
"$PY" -m albert_tf.cli.build_corpus --output_file="$OUT/corpus.txt" --max_mb=3
awk -v RS= -v ORS='\n\n' 'NR % 10 != 0' "$OUT/corpus.txt" > "$OUT/pretrain_corpus.txt"
awk -v RS= -v ORS='\n\n' 'NR % 10 == 0' "$OUT/corpus.txt" > "$OUT/heldout_corpus.txt"
awk '{ print tolower($0) }' "$OUT/pretrain_corpus.txt" > "$OUT/spm_input.txt"
"$PY" -m albert_tf.cli.train_spm --input_file="$OUT/spm_input.txt" \
  --model_prefix="$OUT/spm/30k-clean" --vocab_size=3000

INIT=()
if [ "$PRETRAIN_STEPS" -gt 0 ]; then
  step "pretraining, $PRETRAIN_STEPS steps"
  "$PY" create_pretraining_data.py --input_file="$OUT/pretrain_corpus.txt" \
    --output_file="$OUT/pretrain_data/pretrain.tfrecord" \
    --spm_model_file="$OUT/spm/30k-clean.model" --vocab_file="$OUT/spm/30k-clean.vocab" \
    --do_lower_case --max_seq_length=$SEQ --max_predictions_per_seq=$PREDS \
    --masked_lm_prob=0.15 --ngram=1 --nodo_whole_word_mask --dupe_factor=2 \
    --random_seed=12345 --noprogress
  "$PY" run_pretraining.py --input_file="$OUT/pretrain_data/pretrain.tfrecord" \
    --output_dir="$OUT/pretrain" --albert_config_file="$CONFIG" --do_train \
    --train_batch_size=32 --max_seq_length=$SEQ --max_predictions_per_seq=$PREDS \
    --optimizer=adamw --learning_rate=7e-4 --num_train_steps=$PRETRAIN_STEPS \
    --num_warmup_steps=$(( PRETRAIN_STEPS / 10 )) --save_checkpoints_steps=$PRETRAIN_STEPS \
    --log_every_n_steps=$(( PRETRAIN_STEPS / 4 )) --seed=1
  INIT=(--init_checkpoint="$OUT/pretrain")
fi

step "the pair task ($PAIR_KIND, MRPC format)"
"$PY" -m albert_tf.cli.make_pair_task --input_file="$OUT/heldout_corpus.txt" \
  --output_dir="$OUT/glue/MRPC" --num_train=1300 --num_dev=800 --num_test=20 \
  --pair_kind="$PAIR_KIND" --span=1

step "fine-tuning with early exit, dev evaluation at patience 2"
"$PY" run_classifier.py --task_name=MRPC --data_dir="$OUT/glue" --output_dir="$OUT/classifier" \
  --albert_config_file="$CONFIG" --spm_model_file="$OUT/spm/30k-clean.model" --do_lower_case \
  "${INIT[@]}" --do_train --do_eval --max_seq_length=$SEQ --train_batch_size=32 \
  --eval_batch_size=64 --learning_rate=2e-4 --train_step=$FINETUNE_STEPS \
  --warmup_step=$(( FINETUNE_STEPS / 10 )) --save_checkpoints_steps=$FINETUNE_STEPS \
  --log_every_n_steps=$(( FINETUNE_STEPS / 4 )) --seed=1 --early_exit=patience \
  --early_exit_patience=2

step "the patience sweep on the dev set"
"$PY" bench/early_exit.py --part=accuracy --run_dir="$OUT/classifier" --data_dir="$OUT/glue" \
  --spm_model_file="$OUT/spm/30k-clean.model" --max_seq_length=$SEQ
step "done"
