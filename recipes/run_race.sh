#!/bin/bash
# RACE with the official hyper-parameters (recipes/common.sh; v2 and v1 differ): trains on
# DATA_DIR/RACE/train, evaluates every checkpoint on DATA_DIR/RACE/dev (accuracy, middle and
# high) and keeps the best (OUTPUT_DIR/model.ckpt-best). DATA_DIR holds the RACE download's
# RACE/ folder, read as RACE/<train|dev|test>/<middle|high>/all.txt (see run_race.py).
#
#   bash recipes/run_race.sh MODEL_DIR DATA_DIR OUTPUT_DIR [extra run_race.py flags...]
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh"
recipe_args "$@"
recipe_hparams RACE
recipe_run RACE run_race.py --init_checkpoint="$MODEL_DIR" --data_dir="$DATA_DIR" \
  --output_dir="$OUTPUT_DIR" --do_lower_case --do_train --do_eval \
  --max_seq_length="$MSL" --max_qa_length=128 --train_batch_size="$BSZ" --eval_batch_size=8 \
  --learning_rate="$LR" --train_step="$TS" --warmup_step="$WS" --save_checkpoints_steps="$SAVE" \
  --albert_dropout_prob="$DR" --dropout_prob="$CDR"
