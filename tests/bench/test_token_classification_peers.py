"""bench/peers/token_classification.py (issue 61 item 5: NER serving and training speed beside HF
torch and ONNX Runtime): the committed result holds every row with its machine, date and load,
its figures follow from the per-round times beside them, the peers served the same weights, and
its .md is the .json's report. Runs without torch (the measurement runs in the peers' venv)."""

import json
import statistics

import pytest

from bench import common
from bench.peers import token_classification as bench

SERVING_ROWS = [bench.OURS, bench.SAVEDMODEL, "HF torch fp32", "ORT fp32", "ORT fp32 fused"]


@pytest.fixture(scope="module")
def result():
  with open(bench.RESULTS + ".json", encoding="utf-8") as f:
    return json.load(f)


def test_the_result_records_machine_date_load_and_the_shapes(result):
  assert result["cpu"] and result["cpus"] >= 1 and result["date"].startswith("20")
  assert "load average" in result["uptime_before"] and "load average" in result["uptime_after"]
  assert result["seq"] == 128 and result["tags"] == bench.TAGS and len(bench.TAGS) == 9
  assert result["threads"] == 2 and result["versions"]["torch_threads"] == 2
  assert "quickstart" in result["shapes"]
  quickstart = result["shapes"]["quickstart"]["config"]
  assert (quickstart["hidden_size"], quickstart["num_hidden_layers"],
          quickstart["vocab_size"]) == (128, 4, 8000)
  if "base" in result["shapes"]:
    assert result["shapes"]["base"]["config"] == common.ALBERT_BASE


def test_peers_served_the_same_weights(result):
  for block in result["shapes"].values():
    assert sorted(block["serving"]) == ["batch 1", "batch 32"]
    for cell in block["serving"].values():
      assert list(cell["rows"]) == SERVING_ROWS
      assert sorted(cell["max_logit_diff"]) == sorted(SERVING_ROWS[1:])
      assert max(cell["max_logit_diff"].values()) <= result["agreement_limit"] == 1e-4
    training = block["training"]
    assert training["first_loss_diff"] <= 1e-4  # one loss, one batch, one set of weights
    assert training["first_loss_diff"] == pytest.approx(
        abs(training["first_loss"][bench.OURS] - training["first_loss"]["HF torch fp32"]))


def _check_rows(rows, rounds, batch=None):
  ours = rows[bench.OURS]["ms"]
  for row in rows.values():
    assert len(row["ms"]) == rounds
    assert row["median"] == pytest.approx(statistics.median(row["ms"]), rel=1e-3)
    assert row["time_vs_ours"] == pytest.approx(common.paired_ratio(row["ms"], ours), rel=1e-3)
    if batch:
      assert row["sequences_per_s"] == pytest.approx(batch * 1000 / row["median"])
    else:
      assert row["steps_per_s"] == pytest.approx(1000 / row["median"])
  assert rows[bench.OURS]["time_vs_ours"] == 1.0


def test_figures_follow_from_the_per_round_times(result):
  for block in result["shapes"].values():
    for cell in block["serving"].values():
      _check_rows(cell["rows"], cell["rounds"], cell["batch"])
    training = block["training"]
    assert list(training["rows"]) == [bench.OURS, "HF torch fp32"]
    _check_rows(training["rows"], training["rounds"])


def test_the_markdown_is_the_json_report():
  with open(bench.RESULTS + ".json", encoding="utf-8") as f:
    expected = bench.markdown(json.load(f))
  with open(bench.RESULTS + ".md", encoding="utf-8") as f:
    assert f.read() == expected


def test_rows_of_pairs_each_round_with_ours():
  times = {bench.OURS: [10.0, 20.0, 10.0], "HF torch fp32": [30.0, 20.0, 25.0]}
  rows = bench.rows_of(times, bench.OURS, batch=32)
  assert rows["HF torch fp32"]["time_vs_ours"] == pytest.approx(2.5)  # ratios 3, 1, 2.5
  assert rows["HF torch fp32"]["median"] == 25.0
  assert rows[bench.OURS]["sequences_per_s"] == pytest.approx(3200.0)
  assert "steps_per_s" in bench.rows_of(times, bench.OURS)[bench.OURS]


def test_inputs_label_every_other_piece_with_one_of_the_tags():
  ids, mask, segments, labels = bench.inputs(2, 8000)
  assert ids.shape == labels.shape == (2, 128) and mask.all() and not segments.any()
  assert (labels[:, ::2] == -100).all()
  assert ((labels[:, 1::2] >= 0) & (labels[:, 1::2] < 9)).all()
  assert (ids >= 5).all() and (ids < 8000).all()
