#!/usr/bin/env bash
# Early exit's accuracy sweep (sweep.py beside this file) with a 12-layer model (H=128,
# one shared group: configs/albert_quickstart.json with 12 layers), on sentence-pair tasks made
# from held-out documents the way the quickstart makes its task:
#   corpus from docstrings -> SentencePiece
#   -> [pretraining at 2 layers, the quickstart's recipe, EE_SHALLOW_STEPS > 0]
#   -> [pretraining at 12 layers, EE_PRETRAIN_STEPS > 0; it starts from the 2-layer checkpoint
#       when there is one: with one shared group the 2-layer and 12-layer models have the same
#       variables, so the deep model starts from the shallow one's weights ("growing" the depth,
#       as progressive stacking does for BERT, without copying anything)]
#   -> per task kind in EE_PAIR_KINDS ("order": are A and B in order or swapped, the quickstart's
#      task; "next": is B the sentence after A or from another document):
#      run_classifier.py --early_exit=patience (train, dev evaluation at patience 2), then the
#      sweep: dev accuracy and mean exit layer at patience 1..6 beside the full model, written to
#      bench/experiments/results/early_exit_accuracy_<kind>.json (EE_RESULTS_SUFFIX is appended
#      to <kind>).
# What bench/experiments/results/early_exit_accuracy_{order,next}.json hold (about 45 minutes on
# 2 cores):
#   EE_CORPUS_MB=8 EE_SHALLOW_STEPS=9600 EE_PRETRAIN_STEPS=1500 EE_PAIR_KINDS="order next" \
#   EE_NUM_TRAIN=1500 EE_NUM_DEV=1000 EE_FINETUNE_STEPS=200 EE_FINETUNE_LR=1e-4 \
#   bash bench/experiments/early_exit_accuracy/run.sh
# (early_exit_accuracy_{order,next}_lr2e-4_400.json: the same with the defaults 400 and 2e-4.)
# With no pretraining (the defaults) the deep model starts from random initialisation; pretraining
# the 12-layer model from scratch for 1200 steps here learned nothing (step 600: masked-LM
# accuracy 0.056, sentence order 0.50), which is why the deep run starts from the shallow one.
#
# Environment: PYTHON (default .venv/bin/python), EE_DIR (default early_exit_output),
# EE_CORPUS_MB (3), EE_SHALLOW_STEPS (0), EE_PRETRAIN_STEPS (0), EE_PAIR_KINDS ("next"),
# EE_FINETUNE_STEPS (400), EE_FINETUNE_LR (2e-4), EE_NUM_TRAIN (1300), EE_NUM_DEV (800),
# EE_RESULTS_SUFFIX (""), EE_REUSE_PRETRAINING (0).
set -euo pipefail
cd "$(dirname "$0")/../../.."  # the repository's root
PY=${PYTHON:-.venv/bin/python}
OUT=${EE_DIR:-early_exit_output}
CORPUS_MB=${EE_CORPUS_MB:-3}
SHALLOW_STEPS=${EE_SHALLOW_STEPS:-0}
PRETRAIN_STEPS=${EE_PRETRAIN_STEPS:-0}
PAIR_KINDS=${EE_PAIR_KINDS:-next}
FINETUNE_STEPS=${EE_FINETUNE_STEPS:-400}
FINETUNE_LR=${EE_FINETUNE_LR:-2e-4}
REUSE=${EE_REUSE_PRETRAINING:-0}
NUM_TRAIN=${EE_NUM_TRAIN:-1300}
NUM_DEV=${EE_NUM_DEV:-800}
SUFFIX=${EE_RESULTS_SUFFIX:-}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
SEQ=64; PREDS=10; BATCH=32
start=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - start ))s] $*"; }

# EE_REUSE_PRETRAINING=1 keeps a finished run's corpus, vocabulary and pretraining (the same
# EE_DIR, corpus size and steps) and runs the fine-tunings and sweeps again.
reuse=0
if [ "$REUSE" = 1 ]; then
  if [ ! -f "$OUT/pretrain_done" ] || \
     [ "$(cat "$OUT/pretrain_done")" != "$CORPUS_MB $SHALLOW_STEPS $PRETRAIN_STEPS" ]; then
    echo "error: EE_REUSE_PRETRAINING=1: $OUT/pretrain_done does not say a finished run with" \
      "EE_CORPUS_MB=$CORPUS_MB EE_SHALLOW_STEPS=$SHALLOW_STEPS EE_PRETRAIN_STEPS=$PRETRAIN_STEPS" \
      "(nothing deleted)" >&2
    exit 2
  fi
  reuse=1
else
  rm -rf "$OUT"
fi
mkdir -p "$OUT"
config() {  # config <layers> <file>: the quickstart shape with a 3000-piece vocabulary
  "$PY" -c 'import json, sys; c = json.load(open("configs/albert_quickstart.json")); c.update(
    vocab_size=3000, num_hidden_layers=int(sys.argv[1])); json.dump(c, open(sys.argv[2], "w"),
    indent=2)' "$1" "$2"
}
CONFIG="$OUT/albert_config.json"
config 12 "$CONFIG"

if [ $reuse = 0 ]; then
step "corpus ($CORPUS_MB MB), every 10th document held out for the pair tasks; SentencePiece"
"$PY" -m albert_tf.cli.build_corpus --output_file="$OUT/corpus.txt" --max_mb=$CORPUS_MB
awk -v RS= -v ORS='\n\n' 'NR % 10 != 0' "$OUT/corpus.txt" > "$OUT/pretrain_corpus.txt"
awk -v RS= -v ORS='\n\n' 'NR % 10 == 0' "$OUT/corpus.txt" > "$OUT/heldout_corpus.txt"
awk '{ print tolower($0) }' "$OUT/pretrain_corpus.txt" > "$OUT/spm_input.txt"
"$PY" -m albert_tf.cli.train_spm --input_file="$OUT/spm_input.txt" \
  --model_prefix="$OUT/spm/30k-clean" --vocab_size=3000
fi

pretrain() {  # pretrain <config> <output dir> <steps> <learning rate> [extra flags]
  local cfg=$1 dir=$2 steps=$3 lr=$4; shift 4
  "$PY" run_pretraining.py --input_file="$OUT/pretrain_data/pretrain.tfrecord" \
    --output_dir="$dir" --albert_config_file="$cfg" --do_train \
    --train_batch_size=$BATCH --max_seq_length=$SEQ --max_predictions_per_seq=$PREDS \
    --optimizer=adamw --learning_rate=$lr --num_train_steps=$steps \
    --num_warmup_steps=$(( steps / 10 )) --save_checkpoints_steps=$steps \
    --log_every_n_steps=$(( steps / 4 )) --seed=1 "$@"
  "$PY" run_pretraining.py --input_file="$OUT/pretrain_data/heldout.tfrecord" \
    --output_dir="$dir" --albert_config_file="$cfg" --do_train=false --do_eval \
    --eval_batch_size=64 --max_seq_length=$SEQ --max_predictions_per_seq=$PREDS
}

INIT=()
if [ $reuse = 1 ]; then
  [ "$SHALLOW_STEPS" -gt 0 ] && INIT=(--init_checkpoint="$OUT/pretrain_2_layers")
  [ "$PRETRAIN_STEPS" -gt 0 ] && INIT=(--init_checkpoint="$OUT/pretrain")
  step "reusing the corpus, vocabulary and pretraining in $OUT"
  SHALLOW_RUN=0; DEEP_RUN=0
else
  SHALLOW_RUN=$SHALLOW_STEPS; DEEP_RUN=$PRETRAIN_STEPS
fi
if [ "$SHALLOW_RUN" -gt 0 ] || [ "$DEEP_RUN" -gt 0 ]; then
  step "pretraining TFRecords (the quickstart's settings), and the same from the held-out documents"
  for part in pretrain heldout; do
    "$PY" create_pretraining_data.py --input_file="$OUT/${part}_corpus.txt" \
      --output_file="$OUT/pretrain_data/$part.tfrecord" \
      --spm_model_file="$OUT/spm/30k-clean.model" --vocab_file="$OUT/spm/30k-clean.vocab" \
      --do_lower_case --max_seq_length=$SEQ --max_predictions_per_seq=$PREDS \
      --masked_lm_prob=0.15 --ngram=1 --nodo_whole_word_mask \
      --dupe_factor=$([ $part = pretrain ] && echo 2 || echo 1) --random_seed=12345 --noprogress
  done
fi
if [ "$SHALLOW_RUN" -gt 0 ]; then
  step "pretraining at 2 layers, $SHALLOW_STEPS steps (the quickstart's recipe)"
  config 2 "$OUT/albert_config_2_layers.json"
  pretrain "$OUT/albert_config_2_layers.json" "$OUT/pretrain_2_layers" "$SHALLOW_STEPS" 7e-4
  INIT=(--init_checkpoint="$OUT/pretrain_2_layers")
fi
if [ "$DEEP_RUN" -gt 0 ]; then
  step "pretraining at 12 layers, $PRETRAIN_STEPS steps${INIT:+, from the 2-layer checkpoint}"
  # From the shallow checkpoint a lower peak rate keeps what it learnt (7e-4 is for a fresh start).
  pretrain "$CONFIG" "$OUT/pretrain" "$PRETRAIN_STEPS" "$([ ${#INIT[@]} -gt 0 ] && echo 2e-4 || echo 7e-4)" "${INIT[@]}"
  INIT=(--init_checkpoint="$OUT/pretrain")
fi
echo "$CORPUS_MB $SHALLOW_STEPS $PRETRAIN_STEPS" > "$OUT/pretrain_done"

for KIND in $PAIR_KINDS; do
  SPAN=$([ "$KIND" = order ] && echo 2 || echo 1)  # the quickstart's order task: 2 sentences a side
  step "the pair task '$KIND' (span $SPAN, MRPC format)"
  rm -rf "$OUT/glue_$KIND" "$OUT/classifier_$KIND"
  "$PY" -m albert_tf.cli.make_pair_task --input_file="$OUT/heldout_corpus.txt" \
    --output_dir="$OUT/glue_$KIND/MRPC" --num_train=$NUM_TRAIN --num_dev=$NUM_DEV --num_test=20 \
    --pair_kind="$KIND" --span=$SPAN

  step "'$KIND': fine-tuning with early exit, dev evaluation at patience 2"
  "$PY" run_classifier.py --task_name=MRPC --data_dir="$OUT/glue_$KIND" \
    --output_dir="$OUT/classifier_$KIND" --albert_config_file="$CONFIG" \
    --spm_model_file="$OUT/spm/30k-clean.model" --do_lower_case \
    "${INIT[@]}" --do_train --do_eval --max_seq_length=$SEQ --train_batch_size=32 \
    --eval_batch_size=64 --learning_rate=$FINETUNE_LR --train_step=$FINETUNE_STEPS \
    --warmup_step=$(( FINETUNE_STEPS / 10 )) --save_checkpoints_steps=$FINETUNE_STEPS \
    --log_every_n_steps=$(( FINETUNE_STEPS / 4 )) --seed=1 --early_exit=patience \
    --early_exit_patience=2

  step "'$KIND': the patience sweep on the dev set"
  "$PY" -m bench.experiments.early_exit_accuracy.sweep --run_dir="$OUT/classifier_$KIND" \
    --data_dir="$OUT/glue_$KIND" --spm_model_file="$OUT/spm/30k-clean.model" \
    --max_seq_length=$SEQ --pretrain_dirs="$OUT/pretrain_2_layers,$OUT/pretrain" \
    --setup="12-layer H=128 ALBERT, one shared group, vocab 3000; corpus $CORPUS_MB MB; pretraining: $SHALLOW_STEPS steps at 2 layers then $PRETRAIN_STEPS at 12 (0 = none); pair task '$KIND' (span $SPAN), $NUM_TRAIN train / $NUM_DEV dev pairs; fine-tuning $FINETUNE_STEPS steps, batch 32, lr $FINETUNE_LR, seq $SEQ, --early_exit=patience" \
    --output_json="bench/experiments/results/early_exit_accuracy_$KIND$SUFFIX.json"
done
step "done"
