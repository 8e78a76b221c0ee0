"""Every official flag of the official scripts, with its official default, in ours.

OFFICIAL holds the flags each script of google-research/albert (commit b772393) defines, read
from its DEFINE_* calls; ours may add extras (they say "Extra:" in their help), never drop or
change one of these. The scripts' flags come from the shared groups of albert_tf/cli/ and the
scripts' own files: this checks the sum, script by script, in one interpreter.
"""

import json
import os
import subprocess
import sys

from tests.helpers.paths import REPO

_NAN = "nan"  # run_classifier's --threshold_to_export defaults to float('nan')

OFFICIAL = {
    "run_classifier.py": dict(
        data_dir=None, albert_config_file=None, task_name=None, vocab_file=None,
        spm_model_file=None, output_dir=None, cached_dir=None, init_checkpoint=None,
        albert_hub_module_handle=None, do_lower_case=True, max_seq_length=512, do_train=False,
        do_eval=False, do_predict=False, train_batch_size=32, eval_batch_size=8,
        predict_batch_size=8, learning_rate=5e-05, train_step=1000, warmup_step=0,
        save_checkpoints_steps=1000, keep_checkpoint_max=5, iterations_per_loop=1000,
        use_tpu=False, optimizer="adamw", tpu_name=None, tpu_zone=None, gcp_project=None,
        master=None, num_tpu_cores=8, export_dir=None, threshold_to_export=_NAN),
    "run_pretraining.py": dict(
        albert_config_file=None, input_file=None, output_dir=None, init_checkpoint=None,
        max_seq_length=512, max_predictions_per_seq=20, do_train=True, do_eval=False,
        train_batch_size=4096, eval_batch_size=64, optimizer="lamb", learning_rate=0.00176,
        poly_power=1.0, num_train_steps=125000, num_warmup_steps=3125, start_warmup_step=0,
        save_checkpoints_steps=5000, keep_checkpoint_max=5, iterations_per_loop=1000,
        max_eval_steps=100, use_tpu=False, init_from_group0=False, tpu_name=None,
        tpu_zone=None, gcp_project=None, master=None, num_tpu_cores=8, masked_lm_budget=0),
    "run_race.py": dict(
        data_dir=None, albert_config_file=None, task_name="race", vocab_file=None,
        train_file=None, eval_file=None, predict_file=None, spm_model_file=None,
        output_dir=None, init_checkpoint=None, albert_hub_module_handle=None,
        do_lower_case=True, dropout_prob=0.1, max_seq_length=512, max_qa_length=128,
        num_keep_checkpoint=5, high_only=False, middle_only=False, do_train=True,
        do_eval=True, do_predict=False, train_batch_size=32, eval_batch_size=8,
        predict_batch_size=8, learning_rate=1e-05, train_step=12000, warmup_step=1000,
        save_checkpoints_steps=100, iterations_per_loop=1000, use_tpu=False, tpu_name=None,
        tpu_zone=None, gcp_project=None, master=None, num_tpu_cores=8),
    "create_pretraining_data.py": dict(
        input_file=None, output_file=None, vocab_file=None, spm_model_file=None,
        input_file_mode="r", do_lower_case=True, do_whole_word_mask=True,
        do_permutation=False, favor_shorter_ngram=True, random_next_sentence=False,
        max_seq_length=512, ngram=3, max_predictions_per_seq=20, random_seed=12345,
        dupe_factor=40, masked_lm_prob=0.15, short_seq_prob=0.1),
    "export_checkpoints.py": dict(
        albert_directory=None, checkpoint_name="model.ckpt-best", do_lower_case=True,
        export_path=None),
    # export_to_tfhub.py's command line is our export_savedmodel.py's.
    "export_savedmodel.py": dict(
        albert_directory=None, checkpoint_name="model.ckpt-best", do_lower_case=True,
        use_einsum=True, export_path=None),
}
_SQUAD_V1 = dict(
    albert_config_file=None, vocab_file=None, spm_model_file=None, output_dir=None,
    train_file=None, predict_file=None, train_feature_file=None, predict_feature_file=None,
    predict_feature_left_file=None, init_checkpoint=None, albert_hub_module_handle=None,
    do_lower_case=True, max_seq_length=384, doc_stride=128, max_query_length=64,
    do_train=False, do_predict=False, train_batch_size=32, predict_batch_size=8,
    learning_rate=5e-05, num_train_epochs=3.0, warmup_proportion=0.1,
    save_checkpoints_steps=1000, iterations_per_loop=1000, n_best_size=20,
    max_answer_length=30, use_tpu=False, tpu_name=None, tpu_zone=None, gcp_project=None,
    master=None, num_tpu_cores=8)
OFFICIAL["run_squad_v1.py"] = dict(_SQUAD_V1, use_einsum=True, export_dir=None)
OFFICIAL["run_squad_v2.py"] = dict(_SQUAD_V1, start_n_top=5, end_n_top=5, dropout_prob=0.1)

# Defines each script's flags (its module level, as when it runs) and prints their defaults;
# a script's flags are deleted before the next one defines its own.
_DEFAULTS = r"""
import json, math, os, runpy, sys
from absl import flags
import absl.logging
REPO, scripts = sys.argv[1], sys.argv[2:]
sys.path.insert(0, REPO)
before = set(flags.FLAGS)
found = {}
for script in scripts:
  sys.modules.pop("run_squad", None)  # run_squad_v1/_v2 import it: define its flags again
  runpy.run_path(os.path.join(REPO, script), run_name="flag_check")
  if script == "export_savedmodel.py":  # its flags are defined when it runs
    from albert_tf.cli import export
    export.define_flags()
  defaults = {}
  for name in sorted(set(flags.FLAGS) - before):
    value = flags.FLAGS[name].default
    defaults[name] = "nan" if isinstance(value, float) and math.isnan(value) else value
    delattr(flags.FLAGS, name)
  found[script] = defaults
print(json.dumps(found))
"""


def test_every_official_flag_keeps_its_official_default():
  proc = subprocess.run([sys.executable, "-c", _DEFAULTS, REPO] + sorted(OFFICIAL),
                        capture_output=True, text=True, cwd=REPO, timeout=600, check=False,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr[-3000:]
  ours = json.loads(proc.stdout.strip().splitlines()[-1])
  wrong = {}
  for script, official in OFFICIAL.items():
    for name, default in official.items():
      if name not in ours[script]:
        wrong[f"{script} --{name}"] = "missing"
      elif ours[script][name] != default:
        wrong[f"{script} --{name}"] = f"default {ours[script][name]!r}, official {default!r}"
  assert wrong == {}
