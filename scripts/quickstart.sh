#!/usr/bin/env bash
# The main job end to end on a corpus built from the docstrings of the installed Python packages:
#   corpus (pretraining part + held-out documents) -> SentencePiece -> create_pretraining_data.py
#   -> run_pretraining.py (MLM + SOP; held-out MLM accuracy beside its frequency baseline)
#   -> a sentence-pair task from the held-out documents (MRPC format): are A and B in order?
#   -> run_classifier.py twice with the same steps and seed: from the pretrained checkpoint
#      (and export a SavedModel) and from random initialisation; both dev accuracies side by side
#   -> query the exported SavedModel with held-out raw sentence pairs (N of M right, beside the
#      majority-class baseline).
# Every step is the real script with real flags: swap in your corpus, SentencePiece model or an
# official checkpoint (--init_checkpoint) by changing a flag. The settings and why: README.md,
# "Quickstart".
#
# Environment: PYTHON (default .venv/bin/python), QUICKSTART_DIR (default quickstart_output),
# QUICKSTART_SMALL=1 for a short run (CI), QUICKSTART_SEED (fine-tuning seed, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${QUICKSTART_DIR:-quickstart_output}
SEED=${QUICKSTART_SEED:-1}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}

if [ "${QUICKSTART_SMALL:-0}" = "1" ]; then
  CORPUS_MB=3; PRETRAIN_STEPS=1200; NUM_TRAIN=300; NUM_DEV=200; NUM_HELDOUT=50; FINETUNE_STEPS=60
else
  CORPUS_MB=8; PRETRAIN_STEPS=9600; NUM_TRAIN=1500; NUM_DEV=1000; NUM_HELDOUT=100
  FINETUNE_STEPS=200
fi
# Why these: README.md, "Quickstart" (the settings tried and what each gave).
VOCAB=3000; LAYERS=2; SEQ=64; PREDS=10; BATCH=32
PRETRAIN_OPT=adamw; PRETRAIN_LR=7e-4
FINETUNE_LR=1e-4
PAIR_KIND=order; SPAN=2  # "are A (2 sentences) and B (the next 2) in their order, or swapped?"
HELDOUT_EVERY=10  # every 10th document of the corpus is held out of pretraining
CONFIG="$OUT/albert_config.json"
start=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - start ))s] $*"; }
# `key = value` from an eval_results.txt (the last one if a key repeats).
result() { sed -n "s/^$2 = //p" "$1" | tail -n 1; }

rm -rf "$OUT"
mkdir -p "$OUT"
# The model config: the quickstart shape (H=128, one shared layer group) with the vocabulary size
# we train below and LAYERS layers.
"$PY" - "$CONFIG" "$VOCAB" "$LAYERS" <<'PYEOF'
import json, sys
cfg = json.load(open("configs/albert_quickstart.json"))
cfg["vocab_size"] = int(sys.argv[2])
cfg["num_hidden_layers"] = int(sys.argv[3])
json.dump(cfg, open(sys.argv[1], "w"), indent=2, sort_keys=True)
PYEOF

step "1/8 corpus from the docstrings of installed packages; every ${HELDOUT_EVERY}th document held out"
"$PY" -m albert_tf.cli.build_corpus --output_file="$OUT/corpus.txt" --max_mb=$CORPUS_MB
# Documents are separated by a blank line (awk's paragraph mode reads one document a record).
awk -v RS= -v ORS='\n\n' -v n=$HELDOUT_EVERY 'NR % n != 0' "$OUT/corpus.txt" > "$OUT/pretrain_corpus.txt"
awk -v RS= -v ORS='\n\n' -v n=$HELDOUT_EVERY 'NR % n == 0' "$OUT/corpus.txt" > "$OUT/heldout_corpus.txt"
echo "pretraining documents: $(grep -c '^$' "$OUT/pretrain_corpus.txt"), held out: $(grep -c '^$' "$OUT/heldout_corpus.txt")"

step "2/8 SentencePiece model (official settings) on the pretraining documents, normalised"
# Normalised as every later step reads the text (--preprocess_text: the records' own
# preprocess_text with --do_lower_case): a vocabulary trained on the cased, accented text spends
# its pieces on words that tokenisation never sees.
"$PY" -m albert_tf.cli.train_spm --input_file="$OUT/pretrain_corpus.txt" --preprocess_text \
  --do_lower_case --model_prefix="$OUT/spm/30k-clean" --vocab_size=$VOCAB

step "3/8 pretraining TFRecords (SOP + masking), and the same from the held-out documents"
for part in pretrain heldout; do
  "$PY" create_pretraining_data.py --input_file="$OUT/${part}_corpus.txt" \
    --output_file="$OUT/pretrain_data/$part.tfrecord" --spm_model_file="$OUT/spm/30k-clean.model" \
    --vocab_file="$OUT/spm/30k-clean.vocab" --do_lower_case --max_seq_length=$SEQ \
    --max_predictions_per_seq=$PREDS --masked_lm_prob=0.15 --ngram=1 --nodo_whole_word_mask \
    --dupe_factor=$([ $part = pretrain ] && echo 2 || echo 1) --random_seed=12345 --noprogress
done

step "4/8 pretraining (MLM + SOP, $PRETRAIN_OPT)"
"$PY" run_pretraining.py --input_file="$OUT/pretrain_data/pretrain.tfrecord" \
  --output_dir="$OUT/pretrain" --albert_config_file="$CONFIG" --do_train \
  --train_batch_size=$BATCH --max_seq_length=$SEQ --max_predictions_per_seq=$PREDS \
  --optimizer=$PRETRAIN_OPT --learning_rate=$PRETRAIN_LR --num_train_steps=$PRETRAIN_STEPS \
  --num_warmup_steps=$(( PRETRAIN_STEPS / 10 )) --save_checkpoints_steps=$PRETRAIN_STEPS \
  --log_every_n_steps=$(( PRETRAIN_STEPS / 10 )) --seed=$SEED

step "5/8 pretraining evaluation on the held-out documents"
"$PY" run_pretraining.py --input_file="$OUT/pretrain_data/heldout.tfrecord" \
  --output_dir="$OUT/pretrain" --albert_config_file="$CONFIG" --do_train=false --do_eval \
  --eval_batch_size=64 --max_seq_length=$SEQ --max_predictions_per_seq=$PREDS
R="$OUT/pretrain/eval_results.txt"
mlm=$(result "$R" masked_lm_accuracy); base=$(result "$R" masked_lm_baseline_accuracy)
sop=$(result "$R" sentence_order_accuracy)
awk -v m="$mlm" -v b="$base" -v s="$sop" 'BEGIN {
  printf "held-out masked-LM accuracy %.3f vs %.3f always answering the most frequent masked token (%.1fx, %+.1f points)\n", m, b, (b > 0 ? m / b : 0), 100 * (m - b)
  printf "held-out sentence-order accuracy %.3f vs 0.500 chance\n", s }'

step "6/8 a sentence-pair task from the held-out documents (are A and B in order?), MRPC format"
"$PY" -m albert_tf.cli.make_pair_task --input_file="$OUT/heldout_corpus.txt" \
  --output_dir="$OUT/glue/MRPC" --num_train=$NUM_TRAIN --num_dev=$NUM_DEV --num_test=20 \
  --num_heldout=$NUM_HELDOUT --pair_kind=$PAIR_KIND --span=$SPAN

finetune() {  # finetune <output dir> [extra flags]: the same steps, seed and settings each time
  local dir=$1; shift
  "$PY" run_classifier.py --task_name=MRPC --data_dir="$OUT/glue" --output_dir="$dir" \
    --albert_config_file="$CONFIG" --spm_model_file="$OUT/spm/30k-clean.model" --do_lower_case \
    --do_train --do_eval --max_seq_length=$SEQ --train_batch_size=32 --eval_batch_size=64 \
    --learning_rate=$FINETUNE_LR --train_step=$FINETUNE_STEPS \
    --warmup_step=$(( FINETUNE_STEPS / 10 )) --save_checkpoints_steps=$FINETUNE_STEPS \
    --log_every_n_steps=$(( FINETUNE_STEPS / 5 )) --seed=$SEED "$@"
}

step "7/8 fine-tuning from the pretrained checkpoint (+ SavedModel export), then from random initialisation"
finetune "$OUT/classifier" --init_checkpoint="$OUT/pretrain" --do_predict \
  --predict_batch_size=64 --export_dir="$OUT/export"
finetune "$OUT/classifier_scratch"
pre=$(result "$OUT/classifier/eval_results.txt" eval_accuracy)
scratch=$(result "$OUT/classifier_scratch/eval_results.txt" eval_accuracy)
# The dev set's majority class: what a model answering one label throughout scores.
majority=$(awk -F'\t' 'NR > 1 { n[$1]++; t++ } END { for (k in n) if (n[k] > m) m = n[k]; printf "%.3f", m / t }' "$OUT/glue/MRPC/dev.tsv")
awk -v p="$pre" -v s="$scratch" -v m="$majority" -v n=$NUM_TRAIN -v k=$FINETUNE_STEPS -v seed=$SEED 'BEGIN {
  printf "pair task dev accuracy (%d training pairs, %d steps, seed %d): pretrained %.3f, from random initialisation %.3f (%+.1f points); the majority class scores %.3f\n", n, k, seed, p, s, 100 * (p - s), m }'

step "8/8 query the SavedModel with held-out raw sentence pairs"
"$PY" -m albert_tf.cli.query_savedmodel --export_dir="$OUT/export" \
  --pair_file="$OUT/glue/MRPC/heldout.tsv" --num_pairs=0 --show=3

step "done in $(( $(date +%s) - start ))s. Artefacts:"
cat <<EOT
  corpus                 $OUT/corpus.txt (= pretrain_corpus.txt + heldout_corpus.txt)
  SentencePiece model    $OUT/spm/30k-clean.model
  pretraining TFRecords  $OUT/pretrain_data/
  pretrained checkpoints $OUT/pretrain/            (TensorBoard: tensorboard --logdir $OUT)
  pretraining eval       $OUT/pretrain/eval_results.txt (held-out documents)
  sentence-pair task     $OUT/glue/MRPC/          (heldout.tsv: pairs only the query step reads)
  fine-tuned classifier  $OUT/classifier/          (eval_results.txt, test predictions)
  the same from scratch  $OUT/classifier_scratch/
  SavedModel (serving)   $OUT/export/<version>/   (TF Serving: --model_base_path=$OUT/export)
EOT
