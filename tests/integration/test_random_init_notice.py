"""A fine-tuning run with neither --init_checkpoint nor --albert_hub_module_handle trains from
random weights: run_classifier.py says so in one line (the official scripts said nothing, and
users got SQuAD F1 16), and says nothing when it resumes from its own checkpoint (runs that start
from a pretrained model say nothing either: tests/integration/test_recipes.py)."""

import os

from tests.helpers import finetune
from tests.helpers.scripts import describe, run_script

NOTICE = "training from random initialisation"


def _notices(proc):
  assert proc.returncode == 0, describe(proc)
  return [line for line in (proc.stdout + proc.stderr).splitlines() if NOTICE in line]


def test_random_initialisation_is_said_once_and_not_on_resume(tmp_path):
  setup = finetune.mrpc_setup(str(tmp_path))
  common = ["--task_name=MRPC", f"--data_dir={tmp_path / 'glue'}", "--do_train",
            f"--albert_config_file={setup['config']}", f"--spm_model_file={setup['spm']}",
            "--max_seq_length=32", "--train_batch_size=4", "--save_checkpoints_steps=1"]
  out = str(tmp_path / "out")
  first = _notices(run_script("run_classifier.py", common + [f"--output_dir={out}",
                                                              "--train_step=1"], str(tmp_path)))
  assert first == ["note: glue/mrpc: no --init_checkpoint or --albert_hub_module_handle: "
                   "training from random initialisation, not from a pretrained model"]
  # The same run continued: it resumes from its own ckpt-1, silently.
  resumed = run_script("run_classifier.py", common + [f"--output_dir={out}", "--train_step=2"],
                       str(tmp_path))
  assert _notices(resumed) == [] and os.path.exists(os.path.join(out, "ckpt-2.index"))
