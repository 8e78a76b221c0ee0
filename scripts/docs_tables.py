"""The measured figures of README.md and docs/: the tables written from the bench's results files,
and the figures quoted in the text, each a link to its file.

  python -m scripts.docs_tables            # rewrites the generated tables
  python -m scripts.docs_tables --check    # exit 1 if a table differs from its files

Tables: each sits in a page of docs/ between `<!-- generated: NAME -->` and
`<!-- end generated -->`; they are written from bench/peers/results/*.json. Quoted figures (any
results file under bench/): a Markdown link whose text holds the figure and whose
target is a results file, with a title saying where in the file it is:
`[0.25](../bench/peers/results/sizes_batch1.json "cells[size=base,seq=128,batch=1]/rows/ours
TFLite int8/vs_ours_fp32")`; the title is a path of keys and list filters (`name[k=v,...]`: the
one element whose fields have those values), optionally followed by ` MiB` (bytes shown in MiB)
or ` x<factor>` (e.g. ` x0.001`: ms shown in s). The figure must equal the value rounded to the
decimals it is written with. tests/test_docs_figures.py fails when a table or a quoted figure
disagrees with its file, so each figure has one value, its file's.

Reads JSON only (no TensorFlow).
"""

import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join("bench", "peers", "results")
DOCS = os.path.join(REPO, "docs")
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)",
                   re.S)


def load(name):
  with open(os.path.join(REPO, RESULTS, name), encoding="utf-8") as f:
    return json.load(f)


def fmt_ms(ms):
  """A median as the tables print it: 131 ms, 1.64 s, 11.1 s."""
  if ms < 1000:
    return f"{ms:.0f} ms"
  seconds = ms / 1000
  return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def _row(rows, names):
  """The fastest ok row among `names` (ORT's best of plain and fused), or None."""
  ok = [rows[n] for n in names if n in rows and rows[n].get("status", "ok") == "ok"]
  return min(ok, key=lambda r: r["median_ms"]) if ok else None


def _cell(rows, names, ratio=True):
  row = _row(rows, names)
  if row is None:
    statuses = [rows[n]["status"] for n in names if n in rows]
    if not statuses:
      return "—"
    return "not run (budget)" if any("budget" in s for s in statuses) else (
        "export failed" if any("export failed" in s for s in statuses) else "failed")
  ratio_text = f" ({row['vs_ours_fp32']:.2f})" if ratio and "vs_ours_fp32" in row else ""
  return fmt_ms(row["median_ms"]) + ratio_text


COLUMNS = [("ours fp32", ["ours fp32"]),
           ("ours fp32, frozen weights", ["ours fp32, frozen weights"]),
           ("ours bf16", ["ours bf16"]),
           ("ours TFLite int8", ["ours TFLite int8"]),
           ("ORT best fp32", ["ORT fp32", "ORT fp32 fused"]),
           ("ORT best int8", ["ORT int8", "ORT int8 fused"]),
           ("HF torch fp32", ["HF torch fp32"]),
           ("HF torch bf16", ["HF torch bf16"]),
           ("model garden fp32", ["model garden fp32"])]


def cells_table(result_file, batches):
  """Median per request (time / ours fp32 in brackets) of the cells with these batch sizes."""
  result = load(result_file)
  cells = [c for c in result["cells"] if c["batch"] in batches or (
      c["batch_requested"] in batches and c["batch"] != c["batch_requested"])]
  present = [(title, names) for title, names in COLUMNS
             if any(n in c["rows"] for c in cells for n in names)]
  lines = ["| size | seq × batch | " + " | ".join(t for t, _ in present) + " |",
           "|---|---|" + "---|" * len(present)]
  for c in cells:
    values = [_cell(c["rows"], names, ratio=title != "ours fp32") for title, names in present]
    lines.append(f"| {c['size']} | {c['seq']} × {c['batch']} | " + " | ".join(values) + " |")
  return "\n".join(lines)


GOALS = [("ours fp32", "model garden fp32"), ("ours fp32, frozen weights", "model garden fp32"),
         ("ours fp32", "ORT fp32"), ("ours fp32, frozen weights", "ORT fp32"),
         ("ours bf16", "ORT fp32"), ("ours bf16", "HF torch bf16"),
         ("ours TFLite int8", "ORT int8")]
PEER_TITLES = {"ORT fp32": "ORT's best fp32", "ORT int8": "ORT's best int8"}


def _peer_matches(goal_peer, wanted):
  return goal_peer == wanted or goal_peer.startswith(wanted + " ")  # "ORT fp32 fused"


def goals_table(result_file, batch):
  """Each goal's paired time ratio per cell of one batch size; bold: not met."""
  result = load(result_file)
  wheres = [f"{c['size']} s{c['seq']} b{c['batch']}" for c in result["cells"]
            if c["batch"] == batch]
  found = [g for g in result["goals"] if g["where"] in wheres and g["ratio"] is not None]
  wheres = [w for w in wheres if any(g["where"] == w for g in found)]
  lines = ["| goal | " + " | ".join(w.replace(" s", " ").replace(f" b{batch}", "")
                                     for w in wheres) + " |",
           "|---|" + "---|" * len(wheres)]
  for ours, peer in GOALS:
    matches = [[g for g in found if g["where"] == where and g["ours"] == ours
                and _peer_matches(g["peer"], peer)] for where in wheres]
    if not any(matches):
      continue
    limit = next(m[0]["goal"] for m in matches if m)
    values = []
    for match in matches:
      if not match:
        values.append("—")
        continue
      g = match[0]
      text = f"{g['ratio']:.2f}"
      if not g["met"] and float(text) <= g["goal"]:
        text = f"{g['ratio']:.3f}"  # 0.805 against 0.8: two decimals would read as met
      values.append(text if g["met"] else f"**{text}**")
    lines.append(f"| {ours} ≤ {limit:.2g}× {PEER_TITLES.get(peer, peer)} | "
                 + " | ".join(values) + " |")
  return "\n".join(lines)


def training_table(result_file):
  """The train step cells: median per step and the ratio to ours fp32."""
  result = load(result_file)
  lines = ["| size, batch × seq | model | median per step | / ours fp32 |", "|---|---|---|---|"]
  for cell in result["training"]:
    for name, row in sorted(cell["rows"].items(), key=lambda kv: kv[1]["median_ms"]):
      lines.append(f"| {cell['size']}, {cell['batch']} × {cell['seq']} | {name} | "
                   f"{fmt_ms(row['median_ms'])} | {row['vs_ours_fp32']:.2f} |")
  return "\n".join(lines)


DISK = [("ours fp32 SavedModel", ["ours fp32"]), ("ours bf16 SavedModel", ["ours bf16"]),
        ("ours TFLite int8", ["ours TFLite int8 s128"]),
        ("model garden SavedModel", ["model garden fp32"]),
        ("ONNX fp32 (plain / fused)", ["ORT fp32", "ORT fp32 fused"]),
        ("ONNX int8 (plain / fused)", ["ORT int8", "ORT int8 fused"])]


def disk_table(result_file):
  """Size on disk in MiB per export and model size."""
  result = load(result_file)
  sizes = list(result["sizes"])
  lines = ["| export | " + " | ".join(sizes) + " |", "|---|" + "---|" * len(sizes)]
  for title, names in DISK:
    values = []
    for size in sizes:
      disk = result["sizes"][size]["disk"]
      values.append(" / ".join(f"{disk[n] / 2**20:.1f}" if n in disk else "failed"
                               for n in names))
    lines.append(f"| {title} | " + " | ".join(values) + " |")
  return "\n".join(lines)


def history_table(result_file):
  """The one-process ALBERT-base run (bench/peers/run.py without --sizes): every row."""
  result = load(result_file)
  lines = ["| inputs | model | median | time / ours fp32 | max prob. diff |",
           "|---|---|---|---|---|"]
  for label, block in result["serving"].items():
    for name, row in sorted(block["rows"].items(), key=lambda kv: kv[1]["median_ms"]):
      diff = row.get("max_prob_diff")
      lines.append(f"| {label} | {name} | {fmt_ms(row['median_ms'])} | "
                   f"{row['vs_ours_fp32']:.2f} | {'' if diff is None else f'{diff:.1e}'} |")
  for name, row in sorted(result["training"].items(), key=lambda kv: kv[1]["median_ms"]):
    lines.append(f"| train step, batch 8 | {name} | {fmt_ms(row['median_ms'])} | "
                 f"{row['vs_ours']:.2f} | |")
  return "\n".join(lines)


def goals_list(result_file, where_prefix=""):
  """Every goal of the file (those of cells whose name starts with where_prefix), one a row."""
  result = load(result_file)
  lines = ["| where | ours | against | ratio | limit | met |", "|---|---|---|---|---|---|"]
  for g in result["goals"]:
    if not g["where"].startswith(where_prefix) or g["ratio"] is None:
      continue
    ratio = f"{g['ratio']:.1e}" if g["goal"] < 0.1 else f"{g['ratio']:.2f}"
    lines.append(f"| {g['where']} | {g['ours']} | {g['peer']} | {ratio} | {g['goal']:.2g} | "
                 f"{'met' if g['met'] else '**not met**'} |")
  return "\n".join(lines)


def frozen_table(files):
  """Time with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 relative to the same export without it (the
  paired ratio of the unrolled exports), per request shape and size, fp32 / bf16."""
  cells = [c for name in files for c in load(name)["cells"]
           if c["rows"].get("ours fp32 unrolled, frozen", {}).get("status") == "ok"]
  sizes = list(dict.fromkeys(c["size"] for c in cells))
  shapes = list(dict.fromkeys((c["batch"], c["seq"]) for c in cells))
  lines = ["| request | " + " | ".join(f"{s} fp32 / bf16" for s in sizes) + " |",
           "|---|" + "---|" * len(sizes)]
  for batch, seq in shapes:
    values = []
    for size in sizes:
      cell = [c for c in cells if (c["size"], c["batch"], c["seq"]) == (size, batch, seq)]
      if not cell:
        values.append("not run")
        continue
      rows = cell[0]["rows"]
      pair = [rows[f"ours {p} unrolled, frozen"] for p in ("fp32", "bf16")]
      text = " / ".join(f"{r['vs_unrolled']:.2f}" for r in pair)
      values.append(text + (" (one pass)" if pair[0]["passes"] == 1 else ""))
    lines.append(f"| batch {batch} × {seq} | " + " | ".join(values) + " |")
  return "\n".join(lines)


EARLY_EXIT_MODELS = ("full depth", "exit at layer 2", "exit at layer 4", "exit at layer 6",
                     "exit at layer 8", "ORT fp32", "ORT fp32 fused", "model garden fp32")


def early_exit_table(files):
  """Early exit beside the peers (bench/peers/early_exit_peers.py), one column group per
  results file (its ISA label): median ms, and the time as a fraction of our full depth's and
  of ORT fp32's (medians of per-round ratios)."""
  results = [load(name) for name in files]
  header = ["batch", "model"]
  for result in results:
    label = "AVX2 cap" if result["isa"]["cap"] else result["isa"]["effective"]
    ort = " (native)" if result["isa"]["cap"] else ""
    header += [f"{label}: ms", f"{label}: time ÷ our full depth",
               f"{label}: time ÷ ORT fp32{ort}"]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for batch in results[0]["batches"]:
    for model in EARLY_EXIT_MODELS:
      cells = [str(batch), model]
      for result in results:
        row = [r for r in result["rows"] if (r["batch"], r["model"]) == (batch, model)]
        if not row or row[0]["status"] != "ok":
          cells += ["not run", "", ""]
          continue
        row = row[0]
        cells += [f"{row['median']:.0f}", f"{row['vs_full_depth']:.2f}",
                  f"{row['vs_ort_fp32']:.2f}"]
      lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


TABLES = {
    "early-exit": lambda: early_exit_table(["early_exit.json", "early_exit_avx2.json"]),
    "sizes-batch1": lambda: cells_table("sizes_batch1.json", {1}),
    "sizes-batch1-goals": lambda: goals_table("sizes_batch1.json", 1),
    "sizes-batch32": lambda: cells_table("sizes.json", {32}),
    "sizes-batch32-goals": lambda: goals_table("sizes.json", 32),
    "sizes-train": lambda: training_table("sizes.json"),
    "sizes-train-goals": lambda: goals_list("sizes.json", "train"),
    "sizes-disk": lambda: disk_table("sizes_batch1.json"),
    "avx2": lambda: cells_table("sizes_avx2.json", {1, 32}),
    "avx2-batch1": lambda: cells_table("sizes_avx2_batch1.json", {1}),
    "history-intel": lambda: history_table("latest.json"),
    "history-intel-goals": lambda: goals_list("latest.json"),
    "frozen-weights": lambda: frozen_table(["shared_weights.json", "shared_weights_xxlarge.json"]),
}


def pages():
  """The pages of docs/ (paths)."""
  return sorted(os.path.join(DOCS, name) for name in os.listdir(DOCS) if name.endswith(".md"))


FIGURE = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]*bench/[^)\s]*\.json)"
                    r"\s+\"(?P<query>[^\"]+)\"\)")
NUMBER = re.compile(r"-?\d+(?:\.(?P<decimals>\d+))?(?:[eE](?P<exponent>[-+]?\d+))?")


def lookup(data, query):
  """The value at `query` (see the module docstring) in a loaded results file."""
  factor = 1.0
  if query.endswith(" MiB"):
    query, factor = query[:-len(" MiB")], 1 / 2**20
  scaled = re.search(r" x([\d.e-]+)$", query)
  if scaled:
    query, factor = query[:scaled.start()], float(scaled.group(1))
  value = data
  for segment in query.split("/"):
    match = re.fullmatch(r"(?P<key>[^\[]+)(?:\[(?P<filters>[^\]]*)\])?", segment)
    value = value[match.group("key")]
    if match.group("filters"):
      wanted = dict(item.split("=", 1) for item in match.group("filters").split(","))
      found = [e for e in value if all(str(e.get(k)) == v for k, v in wanted.items())]
      if len(found) != 1:
        raise KeyError(f"{segment}: {len(found)} elements match")
      value = found[0]
  return value * factor


def figure_mismatch(text, value):
  """None when the figure written as `text` is `value` at the precision it is written with,
  else what it should read."""
  match = NUMBER.search(text)
  if match is None:
    return f"no number in {text!r}"
  decimals = len(match.group("decimals") or "")
  if match.group("exponent") is not None:
    expected = f"{value:.{decimals}e}"
    same = float(expected) == float(match.group(0))
  else:
    expected = f"{value:.{decimals}f}"
    same = expected == match.group(0)
  return None if same else f"{text!r}: the file says {expected}"


def quoted_figures(page):
  """[(link text, target, query, problem or None)] of a page (a path below the repository)."""
  with open(os.path.join(REPO, page), encoding="utf-8") as f:
    text = f.read()
  found = []
  for match in FIGURE.finditer(text):
    target = os.path.normpath(os.path.join(REPO, os.path.dirname(page), match.group("target")))
    try:
      with open(target, encoding="utf-8") as f:
        value = lookup(json.load(f), match.group("query"))
      problem = figure_mismatch(match.group("text"), value)
    except (OSError, KeyError, TypeError, ValueError, IndexError) as e:
      problem = f"cannot read it: {type(e).__name__}: {e}"
    found.append((match.group("text"), match.group("target"), match.group("query"), problem))
  return found


def render(text):
  """The page with every generated block rewritten from its file."""
  def replace(match):
    name = match.group("name")
    if name not in TABLES:
      raise KeyError(f"no generator for table {name!r}")
    return match.group(1) + TABLES[name]() + "\n" + match.group(4)
  return BLOCK.sub(replace, text)


def main(argv):
  stale = []
  for page in pages():
    with open(page, encoding="utf-8") as f:
      text = f.read()
    new = render(text)
    if new == text:
      continue
    stale.append(page)
    if "--check" not in argv:
      with open(page, "w", encoding="utf-8") as f:
        f.write(new)
  return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
