#!/bin/bash
# Fine-tunes and evaluates ALBERT on GLUE with the official hyper-parameters (the official
# run_glue.sh's tasks, learning rates, batches, steps, warmup and checkpoint intervals at max
# length 512, with the paper's ALBERT and classifier dropout: recipes/common.sh holds the table).
#
#   bash run_glue.sh MODEL_DIR GLUE_DIR OUTPUT_DIR [extra run_classifier.py flags...]
#
# MODEL_DIR: the pretrained model (an untarred official directory such as albert_base_v2/, our
# TF2 directory or an HF directory; see recipes/common.sh). GLUE_DIR: the GLUE download (CoLA/,
# MNLI/, ...). Each task trains, evaluates every checkpoint, keeps the best (model.ckpt-best,
# eval_results.txt) and writes the test-set submission file in OUTPUT_DIR/<task>/.
# GLUE_TASKS="MRPC STS-B" runs those tasks only (default: the official eight, in its order);
# ALBERT_VERSION=v1 for the v1 models (the same values for GLUE).
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/recipes/common.sh"
recipe_args "$@"

for task in ${GLUE_TASKS:-$GLUE_OFFICIAL_TASKS}; do
  recipe_hparams "$task"
  recipe_run "$task" run_classifier.py --task_name="$task" --data_dir="$DATA_DIR" \
    --output_dir="$OUTPUT_DIR/$task" --init_checkpoint="$MODEL_DIR" --do_lower_case \
    --do_train --do_eval --do_predict --optimizer=adamw --max_seq_length="$MSL" \
    --learning_rate="$LR" --train_batch_size="$BSZ" --train_step="$TS" --warmup_step="$WS" \
    --save_checkpoints_steps="$SAVE" --albert_dropout_prob="$DR" --dropout_prob="$CDR"
done
