"""Sums the per-test records of ALBERT_TF_TEST_CPU_PROFILE (tests/conftest.py) per test file.

  ALBERT_TF_TEST_CPU_PROFILE=/tmp/prof make test
  .venv/bin/python -m tests.helpers.cpu_profile /tmp/prof [--top=40]

Prints, most CPU first: CPU seconds (the worker and the scripts it ran), wall seconds and the
number of tests of each file, then the totals. The CPU total over the machine's cores is the
suite's wall time if the workers never waited.
"""

import collections
import glob
import json
import sys


def per_file(prefix):
  """{file: [cpu seconds, wall seconds, tests]} from every <prefix>.<pid>.jsonl."""
  totals = collections.defaultdict(lambda: [0.0, 0.0, 0])
  for path in glob.glob(f"{prefix}.*.jsonl"):
    with open(path, encoding="utf-8") as f:
      for line in f:
        record = json.loads(line)
        row = totals[record["test"].split("::")[0]]
        row[0] += record["cpu"]
        row[1] += record["wall"]
        row[2] += 1
  return dict(totals)


def main(argv):
  top = 40
  args = [a for a in argv if not a.startswith("--top=")]
  for a in argv:
    if a.startswith("--top="):
      top = int(a.split("=", 1)[1])
  if len(args) != 1:
    sys.exit("usage: python -m tests.helpers.cpu_profile PREFIX [--top=N]")
  totals = per_file(args[0])
  if not totals:
    sys.exit(f"error: no {args[0]}.*.jsonl records")
  rows = sorted(totals.items(), key=lambda kv: -kv[1][0])
  print(f"{'cpu s':>8} {'wall s':>8} {'tests':>5}  file")
  for name, (cpu, wall, count) in rows[:top]:
    print(f"{cpu:8.0f} {wall:8.0f} {count:5d}  {name}")
  cpu, wall, count = (sum(r[i] for _, r in rows) for i in range(3))
  print(f"{cpu:8.0f} {wall:8.0f} {count:5d}  total ({len(rows)} files)")


if __name__ == "__main__":
  main(sys.argv[1:])
