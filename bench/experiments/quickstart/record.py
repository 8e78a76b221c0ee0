"""Runs `make quickstart`'s script once and writes its summary, with the whole log, to
bench/experiments/results/quickstart.json: the file README.md and docs/quickstart.md quote.

    python -m bench.experiments.quickstart.record            # the full quickstart (~11 min)
    QUICKSTART_SMALL=1 python -m bench.experiments.quickstart.record --output=/tmp/q.json

Every value is read from the lines the script printed (nothing is typed by hand): the step
times from its `== [Ns]` headers, the results from its summary lines. A line that is missing
(the script changed its wording) stops the recorder with one line rather than writing a partial
file.
"""

import argparse
import datetime
import os
import re
import subprocess
import sys

from bench import common

RESULT = os.path.join(common.REPO, "bench", "experiments", "results", "quickstart.json")

# What each figure is, read from which printed line (the script's own wording).
_PATTERNS = {
    "mlm": r"held-out masked-LM accuracy (?P<mlm_accuracy>[\d.]+) vs (?P<mlm_baseline_accuracy>"
           r"[\d.]+) always answering",
    "sop": r"held-out sentence-order accuracy (?P<sop_accuracy>[\d.]+) vs",
    "pair": r"pair task dev accuracy .*: pretrained (?P<pair_dev_accuracy_pretrained>[\d.]+), "
            r"from random initialisation (?P<pair_dev_accuracy_scratch>[\d.]+) .*the majority "
            r"class scores (?P<pair_dev_majority_class>[\d.]+)",
    "query": r"^(?P<savedmodel_right>\d+) of (?P<savedmodel_queried>\d+) right; majority-class "
             r"baseline \(always label [^)]*\): (?P<savedmodel_majority_right>\d+) of",
    "done": r"^== \[(?P<seconds_total>\d+)s\] done in",
}
_STEP = re.compile(r"^== \[(\d+)s\] (\d)/8 ")
_RATE = re.compile(r"\| ([\d.]+) examples/s")


def parse_log(lines):
  """{figure: number} from the quickstart's printed lines; ValueError names a missing line."""
  text = "\n".join(lines)
  figures = {}
  for name, pattern in _PATTERNS.items():
    match = re.search(pattern, text, re.MULTILINE)
    if not match:
      raise ValueError(f"the quickstart printed no {name!r} line (pattern {pattern!r})")
    for key, value in match.groupdict().items():
      figures[key] = float(value) if "." in value else int(value)
  starts = {}
  rates = []
  step = None
  for line in lines:
    header = _STEP.match(line)
    if header:
      step = int(header.group(2))
      starts[step] = int(header.group(1))
    elif step == 4:
      rate = _RATE.search(line)
      if rate:
        rates.append(float(rate.group(1)))
  if 4 not in starts or 5 not in starts or not rates:
    raise ValueError("the quickstart printed no pretraining step header or progress line")
  figures["seconds_pretraining"] = starts[5] - starts[4]
  # The steady rate: the last progress line (the first includes tracing).
  figures["pretraining_examples_per_second"] = round(rates[-1])
  return figures


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output", default=RESULT, help="the results file to write")
  args = parser.parse_args(argv)
  env = dict(os.environ, PYTHON=os.environ.get("PYTHON", sys.executable))
  uptime_before = common.uptime()
  started = datetime.datetime.now(datetime.timezone.utc)
  lines = []
  with subprocess.Popen(["bash", "scripts/quickstart.sh"], cwd=common.REPO, env=env, text=True,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
    for line in proc.stdout:
      sys.stdout.write(line)
      lines.append(line.rstrip("\n"))
  if proc.returncode:
    sys.exit(f"error: scripts/quickstart.sh exited {proc.returncode}; nothing written")
  try:
    figures = parse_log(lines)
  except ValueError as e:
    sys.exit(f"error: {e}; nothing written")
  small = os.environ.get("QUICKSTART_SMALL", "0") == "1"
  record = {
      "what": "one run of `make quickstart` (scripts/quickstart.sh"
              + (", QUICKSTART_SMALL=1" if small else "") + ", seed "
              + os.environ.get("QUICKSTART_SEED", "1") + "), written by "
              "bench/experiments/quickstart/record.py from the lines the script printed",
      "date": started.strftime("%Y-%m-%d %H:%M UTC"),
      "commit": subprocess.run(["git", "describe", "--always", "--dirty"], cwd=common.REPO,
                               text=True, capture_output=True, check=False).stdout.strip(),
      "cpu": f"{common.cpu_model()}, {os.cpu_count()} cores",
      "uptime_before": uptime_before,
      "uptime_after": common.uptime(),
      **figures,
      "log": lines,
  }
  common.write_results(args.output, record)


if __name__ == "__main__":
  main()
