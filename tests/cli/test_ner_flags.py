"""run_ner.py's flags -> configs: early exit refused in one line, each action's file found in
--data_dir or named, a missing one named (in-process, no script run)."""

import types

import pytest

from albert_tf.cli import finetuning_flags
from albert_tf.errors import AlbertError


class _Flags(dict):
  """What ner_configs reads of absl's FlagValues: attributes and flag objects by name."""

  def __getattr__(self, name):
    return self[name].value

  def __contains__(self, name):
    return dict.__contains__(self, name)


def _flags(**values):
  defaults = dict(early_exit="none", early_exit_patience=None, data_dir=None, train_file=None,
                  dev_file=None, test_file=None, do_train=False, do_eval=False,
                  do_predict=False)
  defaults.update(values)
  return _Flags({k: types.SimpleNamespace(value=v, present=True) for k, v in defaults.items()})


@pytest.mark.parametrize("flag,values", [("--early_exit", {"early_exit": "patience"}),
                                         ("--early_exit_patience", {"early_exit_patience": 2})])
def test_early_exit_is_refused(flag, values):
  with pytest.raises(AlbertError, match=rf"^{flag}: early exit does not apply to token "
                                        "classification"):
    finetuning_flags.ner_configs(_flags(**values))


def test_files_from_data_dir_or_named(tmp_path):
  (tmp_path / "train.conll").write_text("a O\n")
  (tmp_path / "dev.jsonl").write_text('{"tokens": ["a"], "tags": ["O"]}\n')
  found = finetuning_flags._ner_files(_flags(data_dir=str(tmp_path), do_train=True,
                                             do_eval=True, test_file="mine.txt"))
  assert found == {"train_file": str(tmp_path / "train.conll"),
                   "dev_file": str(tmp_path / "dev.jsonl"), "test_file": "mine.txt"}
  with pytest.raises(AlbertError, match=r"^--do_predict needs --test_file \(none of test.txt, "
                                        r"test.conll, test.jsonl in --data_dir="):
    finetuning_flags._ner_files(_flags(data_dir=str(tmp_path), do_predict=True))
  with pytest.raises(AlbertError, match=r"^--do_eval needs --dev_file$"):
    finetuning_flags._ner_files(_flags(do_eval=True))


def test_export_of_a_wordpiece_model_is_refused_before_training(monkeypatch):
  monkeypatch.setattr(finetuning_flags, "model_source", lambda f: None)
  monkeypatch.setattr(finetuning_flags, "sentence_task_values",
                      lambda source, f: {"spm_model_file": None, "vocab_file": "vocab.txt"})
  monkeypatch.setattr(finetuning_flags, "step_job_config", lambda f: None)
  with pytest.raises(AlbertError, match=r"^--export_dir=out/ner: a token classifier of a "
                                        r"WordPiece model .* cannot be exported yet"):
    finetuning_flags.ner_configs(_flags(do_train=True, train_file="t.txt", export_dir="out/ner"))
