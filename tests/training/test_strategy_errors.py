"""TF_CONFIGs and TPUs TensorFlow would answer with a traceback or an endless wait: one-line
AlbertErrors from albert_tf/training/strategy.py (the scripts' side: tests/integration/
test_clean_errors.py)."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from albert_tf.errors import AlbertError
from tests.helpers.paths import REPO

TWO_WORKERS = ["127.0.0.1:1111", "127.0.0.1:2222"]


@pytest.mark.parametrize("tf_config, message", [
    ({"cluster": {"worker": TWO_WORKERS}, "task": {"type": "worker", "index": 5}},
     'TF_CONFIG: task index 5 is out of range: the cluster has 2 "worker" tasks'),
    ({"cluster": {"worker": TWO_WORKERS}, "task": {"type": "chief", "index": 0}},
     'TF_CONFIG: task type "chief" is not in the cluster, which has "worker"'),
    ({"cluster": {"worker": TWO_WORKERS}},
     'TF_CONFIG does not say which task of the cluster this process is: expected "task": '
     '{"type": "worker", "index": <0-based index>}'),
    ({"cluster": {"worker": TWO_WORKERS}, "task": {"type": "worker"}},
     "TF_CONFIG does not say which task of the cluster this process is"),
    ({"cluster": {"worker": TWO_WORKERS}, "task": {"type": "worker", "index": -1}},
     "TF_CONFIG: task index -1 is invalid: expected an integer >= 0"),
    ({"cluster": {"worker": ",".join(TWO_WORKERS)}, "task": {"type": "worker", "index": 0}},
     'TF_CONFIG: cluster "worker" is a string: expected a list of "host:port" addresses'),
    ({"cluster": {"worker": ["127.0.0.1", "127.0.0.1:2222"]},
      "task": {"type": "worker", "index": 0}},
     'TF_CONFIG: cluster "worker" task 0 is "127.0.0.1": expected a "host:port" address'),
    ({"cluster": ["127.0.0.1:1111"], "task": {"type": "worker", "index": 0}},
     'TF_CONFIG: "cluster" is a list: expected an object'),
    (["worker"], "TF_CONFIG: found a list, expected an object"),
])
def test_malformed_tf_config_is_one_line(monkeypatch, tf_config, message):
  from albert_tf.training import strategy as strategy_lib  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
  with pytest.raises(AlbertError) as e:
    strategy_lib.get_strategy()
  assert str(e.value).startswith(message), str(e.value)
  assert "\n" not in str(e.value)


@pytest.mark.parametrize("tf_config", [
    {"cluster": {"worker": TWO_WORKERS}, "task": {"type": "worker", "index": 1}},
    {"cluster": {"worker": TWO_WORKERS}, "task": {"type": "worker", "index": "1"}},
    {"cluster": {"chief": ["[::1]:1111"], "worker": TWO_WORKERS},
     "task": {"type": "chief", "index": 0}},
    {"cluster": {"worker": TWO_WORKERS}, "task": {"type": "evaluator", "index": 0}},
    {"cluster": {"worker": ["127.0.0.1:1111"]}},  # one task: nothing to distribute
    {"task": {"type": "worker", "index": 0}},
])
def test_valid_tf_config_is_accepted(monkeypatch, tf_config):
  from albert_tf.training import strategy as strategy_lib  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
  assert strategy_lib.read_tf_config() == tf_config


def test_multi_worker_strategy_needs_this_process_task(monkeypatch):
  from albert_tf.training import strategy as strategy_lib  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:1111"]}}))
  with pytest.raises(AlbertError, match="does not say which task"):
    strategy_lib.get_strategy("multi_worker_mirrored")


def test_tpu_that_never_answers_ends_the_process_with_one_line(tmp_path):
  """A port that accepts connections but is no TPU: TensorFlow would wait forever in C++ code
  no exception interrupts; the deadline ends the process (here after 1 s)."""
  program = tmp_path / "silent_tpu.py"
  program.write_text(textwrap.dedent("""
      import socket
      from albert_tf.training import strategy
      silent = socket.socket()
      silent.bind(("127.0.0.1", 0))
      silent.listen(5)
      strategy.get_strategy(tpu_name=f"grpc://127.0.0.1:{silent.getsockname()[1]}",
                            tpu_connect_timeout=1)
      print("returned")
  """), encoding="utf-8")
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
  started = time.monotonic()
  proc = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                        env=env, timeout=120, check=False)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert proc.stdout == ""
  lines = proc.stderr.strip().splitlines()
  assert lines[-1].startswith("error: --tpu_name=grpc://127.0.0.1:") and lines[-1].endswith(
      " did not answer within 1 s (--tpu_connect_timeout)"), proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  assert time.monotonic() - started < 60
