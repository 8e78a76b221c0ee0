#!/usr/bin/env bash
# The main job end to end on a corpus built from the docstrings of the installed Python packages:
#   corpus -> SentencePiece -> create_pretraining_data.py -> run_pretraining.py (MLM + SOP)
#   -> sentence-pair task (MRPC format) -> run_classifier.py (fine-tune, eval, export)
#   -> query the exported SavedModel with raw sentences.
# Every step is the real script with real flags: swap in your corpus, SentencePiece model or an
# official checkpoint (--init_checkpoint) by changing a flag.
#
# Environment: PYTHON (default .venv/bin/python), QUICKSTART_DIR (default quickstart_output),
# QUICKSTART_SMALL=1 for a short run (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${QUICKSTART_DIR:-quickstart_output}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}

if [ "${QUICKSTART_SMALL:-0}" = "1" ]; then
  CORPUS_MB=2; VOCAB=3000; DUPE=1; PRETRAIN_STEPS=60; FINETUNE_STEPS=40; NUM_TRAIN=400
else
  CORPUS_MB=8; VOCAB=8000; DUPE=2; PRETRAIN_STEPS=400; FINETUNE_STEPS=300; NUM_TRAIN=3000
fi
SEQ=128
CONFIG="$OUT/albert_config.json"
start=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - start ))s] $*"; }

rm -rf "$OUT"
mkdir -p "$OUT"
# The model config: the quickstart shape with the vocabulary size we train below.
"$PY" - "$CONFIG" "$VOCAB" <<'PYEOF'
import json, sys
cfg = json.load(open("configs/albert_quickstart.json"))
cfg["vocab_size"] = int(sys.argv[2])
json.dump(cfg, open(sys.argv[1], "w"), indent=2, sort_keys=True)
PYEOF

step "1/7 corpus from the docstrings of installed packages"
"$PY" -m albert_tf.tools.build_corpus --output_file="$OUT/corpus.txt" --max_mb=$CORPUS_MB

step "2/7 SentencePiece model (official settings)"
"$PY" -m albert_tf.tools.train_spm --input_file="$OUT/corpus.txt" \
  --model_prefix="$OUT/spm/30k-clean" --vocab_size=$VOCAB

step "3/7 pretraining TFRecords (SOP + n-gram masking)"
"$PY" create_pretraining_data.py --input_file="$OUT/corpus.txt" \
  --output_file="$OUT/pretrain_data/train.tfrecord" --spm_model_file="$OUT/spm/30k-clean.model" \
  --vocab_file="$OUT/spm/30k-clean.vocab" --do_lower_case --max_seq_length=$SEQ \
  --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=$DUPE --random_seed=12345

step "4/7 pretraining (MLM + SOP, LAMB) and evaluation"
"$PY" run_pretraining.py --input_file="$OUT/pretrain_data/train*.tfrecord" \
  --output_dir="$OUT/pretrain" --albert_config_file="$CONFIG" --do_train --do_eval \
  --train_batch_size=32 --eval_batch_size=32 --max_seq_length=$SEQ --max_predictions_per_seq=20 \
  --optimizer=lamb --learning_rate=0.005 --num_train_steps=$PRETRAIN_STEPS \
  --num_warmup_steps=$(( PRETRAIN_STEPS / 10 )) --save_checkpoints_steps=100 \
  --max_eval_steps=20 --log_every_n_steps=20

step "5/7 a sentence-pair task from the same corpus (does B follow A?), MRPC format"
"$PY" -m albert_tf.tools.make_pair_task --input_file="$OUT/corpus.txt" \
  --output_dir="$OUT/glue/MRPC" --num_train=$NUM_TRAIN --num_dev=400 --num_test=100

step "6/7 fine-tuning, evaluation and SavedModel export"
"$PY" run_classifier.py --task_name=MRPC --data_dir="$OUT/glue" \
  --output_dir="$OUT/classifier" --init_checkpoint="$OUT/pretrain" \
  --albert_config_file="$CONFIG" --spm_model_file="$OUT/spm/30k-clean.model" --do_lower_case \
  --do_train --do_eval --do_predict --max_seq_length=$SEQ --train_batch_size=32 \
  --eval_batch_size=32 --predict_batch_size=32 --learning_rate=1e-4 \
  --train_step=$FINETUNE_STEPS --warmup_step=$(( FINETUNE_STEPS / 10 )) \
  --save_checkpoints_steps=$FINETUNE_STEPS --log_every_n_steps=20 --export_dir="$OUT/export"

step "7/7 query the SavedModel with raw sentences"
"$PY" -m albert_tf.tools.query_savedmodel --export_dir="$OUT/export" \
  --pair_file="$OUT/glue/MRPC/dev.tsv" --num_pairs=5

step "done in $(( $(date +%s) - start ))s. Artefacts:"
cat <<EOT
  corpus                 $OUT/corpus.txt
  SentencePiece model    $OUT/spm/30k-clean.model
  pretraining TFRecords  $OUT/pretrain_data/
  pretrained checkpoints $OUT/pretrain/            (TensorBoard: tensorboard --logdir $OUT)
  pretraining eval       $OUT/pretrain/eval_results.txt
  sentence-pair task     $OUT/glue/MRPC/
  fine-tuned classifier  $OUT/classifier/          (eval_results.txt, test predictions)
  SavedModel (serving)   $OUT/export/<version>/   (TF Serving: --model_base_path=$OUT/export)
EOT
