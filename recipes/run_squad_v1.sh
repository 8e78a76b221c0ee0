#!/bin/bash
# SQuAD v1.1 with the official hyper-parameters (recipes/common.sh): trains on
# DATA_DIR/train-v1.1.json, evaluates every checkpoint on DATA_DIR/dev-v1.1.json (EM, F1) and
# keeps the best (OUTPUT_DIR/model.ckpt-best, predictions.json).
#
#   bash recipes/run_squad_v1.sh MODEL_DIR DATA_DIR OUTPUT_DIR [extra run_squad.py flags...]
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/common.sh"
recipe_args "$@"
recipe_squad v1.1 run_squad_v1.py
