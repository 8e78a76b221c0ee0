"""bench/experiments/domain_pretraining/diagnostics.py without TensorFlow: the PTB detokeniser on
SST-2-style
lines, the numpy logistic regression, and the result files written from a made-up result."""

import json

import numpy as np
import pytest

from bench.experiments.domain_pretraining import diagnostics as dg


@pytest.mark.parametrize("ptb, text", [
    ("proves once again he has n't lost his touch , bringing off a superb performance .",
     "proves once again he hasn't lost his touch, bringing off a superb performance."),
    ("it 's a film that , no doubt , we 're touched by ; they 've seen it",
     "it's a film that, no doubt, we're touched by; they've seen it"),
    ("we all ca n't stand it , and i wo n't", "we all can't stand it, and i won't"),
    ("drag along the dead -lrb- water -rrb- weight", "drag along the dead (water) weight"),
    ("the dead ( water ) weight : schmidt 's novel", "the dead (water) weight: schmidt's novel"),
    ("should come with the warning `` for serious film buffs only ! ''",
     'should come with the warning "for serious film buffs only!"'),
    ("this is standard fare ... instantly forgettable .", "this is standard fare... instantly "
     "forgettable."),
    ("pay your $ 8 and get ready ", "pay your $8 and get ready"),
    # left alone: single quotes, "--", a quote mark with nothing quoted on its side
    ("most ` right-thinking ' films -- loud", "most ` right-thinking ' films -- loud"),
    ("'' is a shapeless move", "'' is a shapeless move"),
    ("in `` stuart little 2 `` : there", 'in "stuart little 2 ``: there'),
])
def test_detokenize_ptb(ptb, text):
  assert dg.detokenize_ptb(ptb) == text


def test_detokenized_task_keeps_labels_and_layout(tmp_path):
  src = tmp_path / "sst2_low" / "SST-2"
  src.mkdir(parents=True)
  for split in ("train", "dev"):
    (src / f"{split}.tsv").write_text("sentence\tlabel\nit 's good .\t1\ndoes n't work\t0\n")
  out = dg.detokenized_task(str(tmp_path / "sst2_low"), str(tmp_path / "detok"))
  for split in ("train", "dev"):
    assert (tmp_path / "detok" / "SST-2" / f"{split}.tsv").read_text() == (
        "sentence\tlabel\nit's good.\t1\ndoesn't work\t0\n")
  assert out == str(tmp_path / "detok")


def test_fit_logistic_separates_and_is_regularised():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(400, 5))
  y = (x[:, 0] - 0.5 * x[:, 1] > 0).astype(int)
  w, b = dg.fit_logistic(x, y)
  assert dg.logistic_accuracy(w, b, x, y) > 0.95
  assert w[0] > 0 > w[1] and abs(w[2]) < abs(w[0]) / 3
  # at the optimum the gradient of sum(logloss) + |w|^2 / (2c) is zero
  p = 1 / (1 + np.exp(-(x @ w + b)))
  assert np.abs(x.T @ (p - y) + w).max() < 1e-6 and abs((p - y).sum()) < 1e-6
  w_strong, _ = dg.fit_logistic(x, y, c=1e-3)
  assert np.linalg.norm(w_strong) < np.linalg.norm(w) / 10


def _made_up_result():
  return dict(
      date="2026-01-01 00:00 UTC", machine="a CPU, 2 cores", load_at_start="1.00 1.00 1.00",
      finetune=[dict(arm="tokenised", data="SST-2", lr=1e-4, init="pretrained", seeds=[1, 2],
                     accuracy=[0.6, 0.62], mean=0.61),
                dict(arm="LR 0.0003", data="SST-2", lr=3e-4, init="random", seeds=[1],
                     accuracy=[0.7], mean=0.7)],
      probe=dict(train_examples=20, dev_examples=10, majority=0.5, rows=[
          dict(init="random", checkpoint="none", pooled=0.5, cls=0.55, mean=0.6),
          dict(init="pretrained", checkpoint="ckpt-9", pooled=0.51, cls=0.52, mean=0.58)]),
      carried_over=dict(checkpoint="ckpt-9", rows=[
          dict(run="sst2_low_pretrained_s1", variables=3, min=0.97, median=0.99, max=1.0)]),
      embeddings=dict(
          checkpoint="ckpt-9", mean_cosine_all_pairs={"pretrained": 0.089, "random": 0.0},
          pairs=[dict(a="good", b="bad", pretrained=0.515, random=-0.007)],
          words=[dict(word="good", piece=True, neighbours=[
              dict(piece="\u2581bad", cosine=0.52), dict(piece="\u2581great", cosine=0.48)]),
                 dict(word="love", piece=False)]))


def test_write_results(tmp_path):
  result = _made_up_result()
  path = tmp_path / "results" / "diag.json"
  dg.write_results(result, str(path))
  assert json.loads(path.read_text()) == result
  md = path.with_suffix(".md").read_text()
  assert md.startswith("# Domain pretraining diagnostics (2026-01-01 00:00 UTC, a CPU, 2 cores, "
                       "load 1.00 1.00 1.00 at start)")
  for line in ("| tokenised | SST-2 | 0.0001 | pretrained | 0.600, 0.620 | 0.610 |",
               "| LR 0.0003 | SST-2 | 0.0003 | random | 0.700 | 0.700 |",
               "| random | none | 0.500 | 0.550 | 0.600 |",
               "| pretrained | ckpt-9 | 0.510 | 0.520 | 0.580 |",
               "| sst2_low_pretrained_s1 | 3 | 0.970 | 0.990 | 1.000 |",
               "| good / bad | 0.515 | -0.007 |",
               "| good | \u2581bad 0.52, \u2581great 0.48 |",
               "| love | (not one piece) |"):
    assert line in md.splitlines(), line
  assert "majority class 0.500" in md and "pretrained 0.089, random 0.000" in md
  # the sections are optional: fine-tuning rows alone still make a file
  dg.write_results({k: v for k, v in result.items()
                    if k not in ("probe", "embeddings", "carried_over")}, str(path))
  assert "Linear probe" not in path.with_suffix(".md").read_text()


def test_a_study_dir_missing_its_files_is_a_one_line_error(tmp_path, capsys):
  assert dg.main([str(tmp_path), str(tmp_path / "work")]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and err.count("\n") == 1 and "albert_config.json" in err
  assert not (tmp_path / "work").exists()


def test_cached_recomputes_for_other_inputs(tmp_path):
  path = str(tmp_path / "probe.json")
  calls = []
  make = lambda: calls.append(1) or {"n": len(calls)}
  assert dg._cached(path, ["ckpt-1"], make) == {"n": 1}
  assert dg._cached(path, ["ckpt-1"], make) == {"n": 1}  # saved: not computed again
  assert dg._cached(path, ["ckpt-2"], make) == {"n": 2}
