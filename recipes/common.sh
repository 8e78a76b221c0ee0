# Shared by run_glue.sh and recipes/run_*.sh (sourced, not run): the official fine-tuning
# hyper-parameters, in one table, and the command line every recipe takes.
#
#   bash <recipe> MODEL_DIR DATA_DIR OUTPUT_DIR [extra flags for the script...]
#
# MODEL_DIR   the pretrained model: an untarred official directory (albert_config.json,
#             30k-clean.model, model.ckpt-best; v1: variables/variables), our TF2 checkpoint
#             directory (albert_config.json and 30k-clean.model beside the checkpoint) or an HF
#             transformers directory (config.json, model.safetensors, spiece.model). It is the
#             script's --init_checkpoint; the script reads the config and the SentencePiece
#             model from it, and stops with one line when it holds no weights.
# Extra flags come last, so they override the recipe's (e.g. --train_step=2, or
# --spm_model_file=... for a directory without its SentencePiece model).
# Environment: ALBERT_VERSION=v2 (default) or v1 picks the rows of the table below; PYTHON the
# interpreter (default: python, else python3).

# The official values: the paper's Table 14 (Lan et al. 2019, appendix A.4: LR learning rate,
# BSZ batch, DR ALBERT dropout, CDR classifier dropout, TS train steps, WS warmup steps, MSL
# max sequence length), for the v1 models it reports. The v2 models take the same values except
# for RACE: learning rate 1e-5 and DR 0, "the original (v1) RACE hyperparameter will cause model
# divergence for v2 models" (the official README). SAVE: the official run_glue.sh's
# --save_checkpoints_steps (every checkpoint is evaluated); the official README's 100 (RACE) and
# 5000 (SQuAD). SQuAD's steps are epochs in the official scripts (EPOCHS, with 10 % warmup):
# 2 x 87,599 v1.1 and 3 x 130,319 v2.0 training questions at batch 48 give the table's 3649 and
# 8144 steps (warmup int(0.1 x steps): 364 and 814).
ALBERT_HPARAMS='
# task      models LR    BSZ  DR   CDR  TS     WS    MSL  SAVE  EPOCHS
CoLA        v1,v2  1e-5  16   0    0.1  5336   320   512  100   -
STS-B       v1,v2  2e-5  16   0    0.1  3598   214   512  100   -
SST-2       v1,v2  1e-5  32   0    0.1  20935  1256  512  100   -
MNLI        v1,v2  3e-5  128  0    0.1  10000  1000  512  100   -
QNLI        v1,v2  1e-5  32   0    0.1  33112  1986  512  200   -
QQP         v1,v2  5e-5  128  0.1  0.1  14000  1000  512  100   -
RTE         v1,v2  3e-5  32   0.1  0.1  800    200   512  100   -
MRPC        v1,v2  2e-5  32   0    0.1  800    200   512  100   -
WNLI        v1,v2  2e-5  16   0.1  0.1  2000   250   512  100   -
SQuAD-v1.1  v1,v2  5e-5  48   0    0.1  3649   365   384  5000  2
SQuAD-v2.0  v1,v2  3e-5  48   0    0.1  8144   814   512  5000  3
RACE        v1     2e-5  32   0.1  0.1  12000  1000  512  100   -
RACE        v2     1e-5  32   0    0.1  12000  1000  512  100   -
'

# The GLUE tasks of the official run_glue.sh, in its order (WNLI has a row above; name it in
# GLUE_TASKS to run it).
GLUE_OFFICIAL_TASKS="SST-2 MNLI CoLA QNLI QQP RTE STS-B MRPC"

RECIPE_ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
RECIPE_NAME="$(basename "$0")"

recipe_fail() {  # one line on stderr, exit status 2 (as the scripts' bad input)
  echo "error: $RECIPE_NAME: $*" >&2
  exit 2
}

# recipe_args "$@": MODEL_DIR DATA_DIR OUTPUT_DIR, and EXTRA_ARGS (the rest, passed through).
recipe_args() {
  if [ "$#" -lt 3 ] || [ -z "$1" ] || [ -z "$2" ] || [ -z "$3" ]; then
    recipe_fail "usage: bash $RECIPE_NAME MODEL_DIR DATA_DIR OUTPUT_DIR [extra flags...]"
  fi
  MODEL_DIR="$1" DATA_DIR="$2" OUTPUT_DIR="$3"
  shift 3
  EXTRA_ARGS=("$@")
  [ -d "$MODEL_DIR" ] || recipe_fail "MODEL_DIR $MODEL_DIR: no such directory (expected the \
pretrained model: an untarred official directory, our TF2 directory or an HF directory)"
  [ -d "$DATA_DIR" ] || recipe_fail "DATA_DIR $DATA_DIR: no such directory"
  ALBERT_VERSION="${ALBERT_VERSION:-v2}"
  case "$ALBERT_VERSION" in
    v1|v2) ;;
    *) recipe_fail "ALBERT_VERSION=$ALBERT_VERSION: expected v1 or v2" ;;
  esac
  PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
  [ -n "$PYTHON" ] || recipe_fail "no python or python3 on PATH (set PYTHON)"
}

# recipe_hparams TASK: sets LR BSZ DR CDR TS WS MSL SAVE EPOCHS from the table's row of TASK for
# ALBERT_VERSION (task names compared without case).
recipe_hparams() {
  local row
  row="$(printf '%s\n' "$ALBERT_HPARAMS" | awk -v task="$1" -v version="$ALBERT_VERSION" '
    $1 !~ /^#/ && NF == 11 && tolower($1) == tolower(task) && index("," $2 ",", "," version ",") {
      print; exit }')"
  [ -n "$row" ] || recipe_fail "no hyper-parameters for task $1 ($ALBERT_VERSION) in recipes/common.sh"
  read -r _ _ LR BSZ DR CDR TS WS MSL SAVE EPOCHS <<< "$row"
}

# recipe_run WHAT SCRIPT FLAGS...: prints the values it uses in one line, then runs the script
# with FLAGS and the extra arguments last (they override).
recipe_run() {
  local what="$1" script="$2" schedule
  shift 2
  if [ "$EPOCHS" = "-" ]; then
    schedule="$TS steps ($WS warmup)"
  else
    schedule="$EPOCHS epochs, 10 % warmup ($TS steps on the official data)"
  fi
  echo "$RECIPE_NAME: $what, ALBERT $ALBERT_VERSION values: learning rate $LR, batch $BSZ," \
       "ALBERT dropout $DR, classifier dropout $CDR, $schedule, max length $MSL" \
       "${EXTRA_ARGS[*]:+(then ${EXTRA_ARGS[*]})}"
  "$PYTHON" "$RECIPE_ROOT/$script" "$@" "${EXTRA_ARGS[@]}"
}

# recipe_squad VERSION SCRIPT: SQuAD v1.1 or v2.0 (the official run_squad_v1.py / _v2.py flags):
# trains on DATA_DIR/train-VERSION.json, evaluates every checkpoint on dev-VERSION.json.
recipe_squad() {
  local version="$1" script="$2"
  recipe_hparams "SQuAD-$version"
  recipe_run "SQuAD $version" "$script" --init_checkpoint="$MODEL_DIR" \
    --train_file="$DATA_DIR/train-$version.json" --predict_file="$DATA_DIR/dev-$version.json" \
    --output_dir="$OUTPUT_DIR" --do_lower_case --do_train --do_predict \
    --max_seq_length="$MSL" --doc_stride=128 --max_query_length=64 \
    --train_batch_size="$BSZ" --predict_batch_size=8 --learning_rate="$LR" \
    --num_train_epochs="$EPOCHS" --warmup_proportion=0.1 --save_checkpoints_steps="$SAVE" \
    --n_best_size=20 --max_answer_length=30 --albert_dropout_prob="$DR" --dropout_prob="$CDR"
}
