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


# ------------------------------------------------------------------------ the size axis
def _mib(row):
  return f"{row['peak_mib'] / 1024:.2f} GiB" if row.get("peak_mib") else ""


def _row_cells(row):
  """(median, ratio, peak memory, prob diff, status) of one size-axis row."""
  if row.get("status") != "ok":
    return "", "", "", "", row.get("status", "?")
  ratio = row.get("vs_ours_fp32")
  diff = row.get("max_prob_diff")
  median = row["median_ms"]
  return (f"{median / 1000:.2f} s" if median >= 10000 else f"{median:.1f} ms",
          "" if ratio is None else f"{ratio:.2f}x", _mib(row),
          "" if diff is None else f"{diff:.1e}", f"ok ({row['calls']} calls, {row['passes']} passes)")


def markdown_sizes(result):
  """The size-axis result (bench/peers/sizes.py) as markdown: the machine and its ISA class,
  one row per size x seq x batch x variant (time, ratio, peak memory, probability difference,
  or why it did not run), the exports' sizes on disk, the goals."""
  isa = result["isa"]
  flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in result["cpu_flags"].items())
  versions = ", ".join(f"{k} {v}" for k, v in sorted(result["versions"].items()))
  s = result["settings"]
  lines = [f"CPU: {result['cpu']}; vector extensions: {flags}",
           f"ISA class: {isa['label']} (native {isa['native']}"
           + (f"; ONEDNN_MAX_CPU_ISA={isa['cap']} for TensorFlow and torch, ONNX Runtime and "
              "TFLite run native" if isa["cap"] else "") + ")",
           f"versions: {versions}",
           f"settings: {s['passes']} passes, {s['calls']} calls at b1 s128, "
           f"{s['budget_s']:g} s per variant, {s['total_budget_h']:g} h in all, "
           f"{s['mem_gib']:g} GiB", f"load before: {result['load_before']}",
           f"load after: {result.get('load_after', '')}", ""]
  for cell in result["cells"]:
    if cell.get("batch_reason"):
      lines.append(f"- {cell['size']} seq {cell['seq']}: {cell['batch_reason']}")
  lines += ["", "| size | seq | batch | model | ISA | median | time vs ours fp32 | peak memory | "
            "max prob. diff | status |", "|---|---|---|---|---|---|---|---|---|---|"]
  order = lambda kv: (kv[1].get("status") != "ok", kv[1].get("median_ms", 0))  # noqa: E731
  for cell in result["cells"]:
    for name, row in sorted(cell["rows"].items(), key=order):
      median, ratio, peak, diff, status = _row_cells(row)
      lines.append(f"| {cell['size']} | {cell['seq']} | {cell['batch']} | {name} | "
                   f"{row.get('isa', '')} | {median} | {ratio} | {peak} | {diff} | {status} |")
  for cell in result["training"]:
    for name, row in sorted(cell["rows"].items(), key=order):
      median, ratio, peak, _, status = _row_cells(row)
      lines.append(f"| {cell['size']} train step | {cell['seq']} | {cell['batch']} | {name} | "
                   f"{row.get('isa', '')} | {median} | {ratio} | {peak} | | {status} |")
  lines += ["", "| size | export | size on disk |", "|---|---|---|"]
  for size, built in result["sizes"].items():
    for name, nbytes in sorted(built["disk"].items()):
      lines.append(f"| {size} | {name} | {nbytes / 2**20:.1f} MiB |")
  lines += ["", "| goal | measured (median ratio) | limit | met |", "|---|---|---|---|"]
  for g in result["goals"]:
    measured = "not measured" if g["ratio"] is None else f"{g['ratio']:.2f}"
    met = "not run" if g["met"] is None else ("met" if g["met"] else "NOT met")
    lines.append(f"| {g['where']}: {g['ours']} / {g['peer']} | {measured} | "
                 f"<= {g['goal']:.2f} | {met} |")
  for size, built in result["sizes"].items():
    for name, reason in built.get("failures", {}).items():
      lines.append(f"\n{size}, {name}: {reason}")
  return "\n".join(lines) + "\n"
