"""The peers bench's result: one dict (written as JSON) and its markdown table, with the machine,
the versions, every median, every ratio and each goal met or not."""

import platform

from bench import common


def _cpu_flags():
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")),
                   [])
  except OSError:
    flags = []
  return {name: name in flags for name in ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile")}


def _best(medians, prefix, kind):
  """The fastest of the ORT variants of one kind ("fp32" or "int8")."""
  names = [n for n in medians if n.startswith(prefix) and kind in n]
  return min(names, key=medians.get) if names else None


def build(serving, training, failures, versions, load_before, load_after, goals,
          agreement_goals=None):
  """serving: [(batch label, {name: [ms]}, {name: max prob diff})]; training: {name: [ms]};
  goals: {(where, ours, peer): largest time ratio}; agreement_goals: {(where, name): largest
  max prob diff to ours fp32}."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  result = {"cpu": common.cpu_model(), "cpu_flags": _cpu_flags(),
            "python": platform.python_version(),
            "versions": dict(versions, tensorflow=tf.__version__), "load_before": load_before,
            "load_after": load_after, "failures": {k: str(v) for k, v in failures.items()},
            "serving": {}, "training": {}, "goals": []}
  for label, times, diffs in serving:
    medians = {name: common.summarize(ms)["median"] for name, ms in times.items()}
    best_fp32, best_int8 = _best(medians, "ORT", "fp32"), _best(medians, "ORT", "int8")
    rows = {}
    for name, ms in times.items():
      rows[name] = {"median_ms": medians[name], "rounds": len(ms),
                    "vs_ours_fp32": common.paired_ratio(ms, times["ours fp32"]),
                    "max_prob_diff": diffs.get(name)}
    result["serving"][label] = {"rows": rows, "ORT best fp32": best_fp32, "ORT int8": best_int8}
    for (where, ours, peer), goal in goals.items():
      if where != label:
        continue
      peer_name = {"ORT best fp32": best_fp32, "ORT int8": best_int8}.get(peer, peer)
      if peer_name in times and ours in times:
        ratio = common.paired_ratio(times[ours], times[peer_name])
        result["goals"].append({"where": label, "ours": ours, "peer": peer_name,
                                "ratio": ratio, "goal": goal, "met": ratio <= goal})
    for (where, name), limit in (agreement_goals or {}).items():
      if where == label and diffs.get(name) is not None:
        result["goals"].append({"where": label, "ours": name, "peer": "max prob diff to ours fp32",
                                "ratio": diffs[name], "goal": limit,
                                "met": diffs[name] <= limit})
  if training:
    for name, ms in training.items():
      result["training"][name] = {"median_ms": common.summarize(ms)["median"], "rounds": len(ms),
                                  "vs_ours": common.paired_ratio(ms, training["ours fp32"])}
    for (where, ours, peer), goal in goals.items():
      if where == "train" and peer in training and ours in training:
        ratio = common.paired_ratio(training[ours], training[peer])
        result["goals"].append({"where": "train step", "ours": ours, "peer": peer,
                                "ratio": ratio, "goal": goal, "met": ratio <= goal})
  return result


def markdown(result):
  """The result as the README's kind of table."""
  flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in result["cpu_flags"].items())
  versions = ", ".join(f"{k} {v}" for k, v in sorted(result["versions"].items()))
  lines = [f"CPU: {result['cpu']} ({flags}); {versions}",
           f"load before: {result['load_before']}", f"load after: {result['load_after']}", "",
           "| inputs | model | median | time vs ours fp32 | max prob. diff |",
           "|---|---|---|---|---|"]
  for label, block in result["serving"].items():
    for name, row in sorted(block["rows"].items(), key=lambda kv: kv[1]["median_ms"]):
      diff = row["max_prob_diff"]
      lines.append(f"| {label}, seq 128 | {name} | {row['median_ms']:.1f} ms | "
                   f"{row['vs_ours_fp32']:.2f}x | {'' if diff is None else f'{diff:.1e}'} |")
  for name, row in result["training"].items():
    lines.append(f"| train step b8 s128 | {name} | {row['median_ms'] / 1000:.2f} s | "
                 f"{row['vs_ours']:.2f}x (vs ours fp32) | |")
  lines += ["", "| goal | measured (time: paired median ratio; or max prob. diff) | limit | met |",
            "|---|---|---|---|"]
  for g in result["goals"]:
    number = (lambda v: f"{v:.1e}") if g["goal"] < 0.1 else (lambda v: f"{v:.2f}")
    lines.append(f"| {g['where']}: {g['ours']} / {g['peer']} | {number(g['ratio'])} | "
                 f"<= {number(g['goal'])} | {'met' if g['met'] else 'NOT met'} |")
  for name, reason in result["failures"].items():
    lines.append(f"\n{name}: {reason}")
  return "\n".join(lines) + "\n"
