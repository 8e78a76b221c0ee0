#!/bin/bash
# SQuAD v2.0 with the official hyper-parameters (recipes/common.sh): trains on
# DATA_DIR/train-v2.0.json, evaluates every checkpoint on DATA_DIR/dev-v2.0.json (EM, F1,
# HasAns/NoAns, best threshold) and keeps the best (OUTPUT_DIR/model.ckpt-best,
# predictions.json, null_odds.json).
#
#   bash recipes/run_squad_v2.sh MODEL_DIR DATA_DIR OUTPUT_DIR [extra run_squad.py flags...]
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh"
recipe_args "$@"
recipe_squad v2.0 run_squad_v2.py
