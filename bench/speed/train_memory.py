"""Peak host memory and step time of one pretraining step, with and without recomputation.

One training step (MLM + SOP, LAMB, global-norm clip) of ALBERT-large / ALBERT-xxlarge shapes
(configs/albert_{large,xxlarge}_v2.json) at seq 512 with 20 predictions, for each mode:
  none, attention, layer: our Trainer's train loop with `recompute=<mode>`;
  garden: the model garden's AlbertEncoder + BertPretrainerV2 + its LAMB (a plain tf.function).
Every configuration runs in its own child process (`nice -n 10`), one at a time; the child
reports its peak RSS (ru_maxrss) and step times. A watchdog kills a child whose RSS passes
--max_child_gb or when the machine's available memory drops below --min_available_gb, and
reports "OOM >X MB". Before launching, a configuration whose peak, extrapolated from the
per-example slope already measured for that shape and mode, would pass --max_child_gb is
reported as not fitting without being run.

Step time: the second step, after a warm-up step (which traces); --timed_steps=0 runs the
warm-up step only (memory only).

Prints one summary line per shape and batch:
  <shape> batch <B>: peak RSS none X MB, attention A MB (A/X), layer Y MB (Y/X), garden Z MB;
  layer/garden ...; step time attention/none ..., layer/none T
and, per shape and mode, the per-example slope and the largest batch that would fit in
--budget_gb.

Run: .venv/bin/python -m bench.speed.train_memory --shapes=large --batches=2,8 --modes=none,layer
"""

import json
import os
import resource
import subprocess
import time

from absl import app
from absl import flags

from bench import common

SHAPES = {"large": "configs/albert_large_v2.json", "xxlarge": "configs/albert_xxlarge_v2.json",
          "tiny": "configs/albert_tiny.json"}
MODES = ("none", "attention", "layer", "garden")

flags.DEFINE_list("shapes", ["large", "xxlarge"], f"Shapes: {', '.join(SHAPES)}.")
flags.DEFINE_list("batches", ["2", "8"], "Batch sizes.")
flags.DEFINE_list("modes", list(MODES), f"Modes: {', '.join(MODES)}.")
flags.DEFINE_integer("seq_length", 512, "Sequence length.")
flags.DEFINE_integer("num_predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("timed_steps", 1, "Timed steps after the warm-up step (0: memory only).")
flags.DEFINE_integer("timing_rounds", 0,
                     "If > 0: also one timing child per shape and batch that builds our modes "
                     "in one process and times them interleaved, this many rounds of one step "
                     "each (robust to other load on the CPU); its medians give the step-time "
                     "ratios.")
flags.DEFINE_bool("timing_only", False, "Run only the timing children (--timing_rounds).")
flags.DEFINE_bool("summarize", False, "Only print the summary of --results_file.")
flags.DEFINE_float("max_child_gb", 18.0, "Kill a child whose RSS passes this.")
flags.DEFINE_float("min_available_gb", 3.0, "Kill the child when the machine has less free.")
flags.DEFINE_float("budget_gb", 22.0,
                   "Memory a training process may use on this machine, for the largest-batch "
                   "estimate.")
flags.DEFINE_bool("skip_by_estimate", True,
                  "Report a configuration whose estimated peak passes --max_child_gb as not "
                  "fitting instead of running it (the watchdog still guards what runs).")
flags.DEFINE_string("results_file", None, "Append every child's result here (JSON lines).")
# Child mode.
flags.DEFINE_string("child", None, "Internal: run one configuration, shape:batch:mode.")
FLAGS = flags.FLAGS


# --------------------------------------------------------------------------- child
def _ours(config, features, labels, batch, mode):
  """One step of our Trainer with `recompute=mode`, as a function returning the loss."""
  run, _ = common.build_our_pretraining_step(config, features, labels, batch, FLAGS.seq_length,
                                             FLAGS.num_predictions, recompute=mode)
  return lambda: run(1)


def _garden(config, features, labels):
  """One step of the model garden's pretrainer, as a function returning the loss."""
  step, inputs, _ = common.build_model_garden_step(config, features, labels)
  return lambda: float(step(inputs, labels).numpy())


def run_timing_child(config, features, labels, shape, batch, modes):
  """Our modes in one process, timed interleaved (one step each per round); medians."""
  import statistics  # pylint: disable=g-import-not-at-top
  steps = {mode: _ours(config, features, labels, batch, mode) for mode in modes}
  for step in steps.values():
    step()  # trace + warm up
  times = {mode: [] for mode in modes}
  for _ in range(FLAGS.timing_rounds):
    for mode, step in steps.items():
      start = time.perf_counter()
      step()
      times[mode].append(time.perf_counter() - start)
  print("RESULT " + json.dumps(dict(
      shape=shape, batch=batch, mode="timing", times=times,
      median={m: statistics.median(t) for m, t in times.items()})), flush=True)


def run_child(spec):
  """Runs one configuration; prints `RESULT <json>`."""
  shape, batch, mode = spec.split(":")
  batch = int(batch)
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  config = AlbertConfig.from_json_file(os.path.join(common.REPO, SHAPES[shape]))
  features, labels = common.synthetic_pretraining_batch(batch, FLAGS.seq_length,
                                                      FLAGS.num_predictions, config.vocab_size)
  if mode.startswith("timing="):
    run_timing_child(config, features, labels, shape, batch, mode[len("timing="):].split("+"))
    return
  step = (_garden(config, features, labels) if mode == "garden"
          else _ours(config, features, labels, batch, mode))
  times, losses = [], []
  for _ in range(1 + FLAGS.timed_steps):
    start = time.perf_counter()
    losses.append(step())
    times.append(time.perf_counter() - start)
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
  print("RESULT " + json.dumps(dict(shape=shape, batch=batch, mode=mode, peak_rss_mb=peak,
                                    step_times=times, losses=losses)), flush=True)


# --------------------------------------------------------------------------- parent
def launch(shape, batch, mode):
  """Runs one child under the memory watchdog. Returns its result dict (with "oom_mb" if
  killed, "error" if it failed)."""
  import psutil  # pylint: disable=g-import-not-at-top
  cmd = ["nice", "-n", "10"] + common.module_command(
      __spec__.name, f"--child={shape}:{batch}:{mode}", f"--seq_length={FLAGS.seq_length}",
      f"--num_predictions={FLAGS.num_predictions}", f"--timed_steps={FLAGS.timed_steps}",
      f"--timing_rounds={FLAGS.timing_rounds}")
  env = common.child_env(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  log_path = os.path.join("/tmp", f"train_memory_{shape}_{batch}_{mode.replace('+', '_')}_"
                                  f"{os.getpid()}.log")
  start = time.time()
  with open(log_path, "w") as log:
    child = subprocess.Popen(  # pylint: disable=consider-using-with
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=common.REPO)
    proc = psutil.Process(child.pid)
    max_rss, killed = 0, None
    while child.poll() is None:
      try:
        rss = sum(p.memory_info().rss for p in [proc] + proc.children(recursive=True))
      except psutil.Error:
        rss = 0
      max_rss = max(max_rss, rss)
      available = psutil.virtual_memory().available
      if rss > FLAGS.max_child_gb * 2**30:
        killed = f"RSS above {FLAGS.max_child_gb} GB"
      elif available < FLAGS.min_available_gb * 2**30:
        killed = f"machine available memory below {FLAGS.min_available_gb} GB"
      if killed:
        for p in proc.children(recursive=True) + [proc]:
          try:
            p.kill()
          except psutil.Error:
            pass
        child.wait()
        break
      time.sleep(0.2)
  elapsed = time.time() - start
  with open(log_path) as f:
    output = f.read()
  result = dict(shape=shape, batch=batch, mode=mode, seconds=elapsed)
  if killed:
    result.update(oom_mb=max_rss / 2**20, reason=killed)
  else:
    lines = [l for l in output.splitlines() if l.startswith("RESULT ")]
    if child.returncode == 0 and lines:
      result.update(json.loads(lines[-1][len("RESULT "):]))
    else:
      result.update(error=f"exit {child.returncode}: " + " / ".join(output.splitlines()[-3:]))
  if FLAGS.results_file:
    with open(FLAGS.results_file, "a") as f:
      f.write(json.dumps(result) + "\n")
  print(f"  {shape} batch {batch} {mode}: " + _describe(result) + f" [{elapsed:.0f} s]",
        flush=True)
  return result


def _describe(r):
  if r is None:
    return "not run"
  if "skipped_mb" in r:
    return f"does not fit (est. {r['skipped_mb']:.0f} MB)"
  if "oom_mb" in r:
    return f"OOM >{r['oom_mb']:.0f} MB"
  if "error" in r:
    return "error " + r["error"][:200]
  if "median" in r:
    return ", ".join(f"{m} {t:.1f} s" for m, t in r["median"].items()) + (
        f" (median of {len(next(iter(r['times'].values())))} interleaved rounds)")
  times = r["step_times"]
  step = f", step {times[-1]:.1f} s" if len(times) > 1 else f", first step {times[0]:.1f} s"
  return f"{r['peak_rss_mb']:.0f} MB{step}"


def _fit(points):
  """Least-squares (intercept, slope) MB of peak RSS against batch size."""
  n = len(points)
  mx = sum(b for b, _ in points) / n
  my = sum(m for _, m in points) / n
  var = sum((b - mx) ** 2 for b, _ in points)
  slope = sum((b - mx) * (m - my) for b, m in points) / var
  return my - slope * mx, slope


def _measured(results, shape, mode):
  return sorted((r["batch"], r["peak_rss_mb"]) for r in results
                if r["shape"] == shape and r["mode"] == mode and "peak_rss_mb" in r)


def summary_line(shape, batch, by_mode):
  def mb(mode):
    r = by_mode.get(mode)
    return r["peak_rss_mb"] if r and "peak_rss_mb" in r else None

  def step(mode):
    timing = by_mode.get("timing")
    if timing and "median" in timing:
      return timing["median"].get(mode)
    r = by_mode.get(mode)
    return r["step_times"][-1] if r and "step_times" in r and len(r["step_times"]) > 1 else None

  def oom(mode):
    r = by_mode.get(mode)
    return r["oom_mb"] if r and "oom_mb" in r else None

  parts = []
  base = mb("none")
  for mode in ("none", "attention", "layer", "garden"):
    if mode not in by_mode:
      continue
    text = f"{mode} " + _describe(by_mode[mode]).split(",")[0]
    if mode in ("attention", "layer") and base and mb(mode):
      text += f" ({mb(mode) / base:.2f})"
    elif mode in ("attention", "layer") and oom("none") and mb(mode):
      text += f" (< {mb(mode) / oom('none'):.2f})"  # none needed more than it reached
    parts.append(text)
  line = f"{shape} batch {batch}: peak RSS " + ", ".join(parts)
  if mb("layer") and mb("garden"):
    line += f"; layer/garden {mb('layer') / mb('garden'):.2f}"
  elif mb("layer") and oom("garden"):
    line += f"; layer/garden < {mb('layer') / oom('garden'):.2f}"
  ratios = [f"{m}/none {step(m) / step('none'):.2f}" for m in ("attention", "layer")
            if step(m) and step("none")]
  if ratios:
    line += "; step time " + ", ".join(ratios)
  steps = [f"{m} {step(m):.1f} s" for m in MODES if step(m)]
  if steps:
    line += " (" + ", ".join(steps) + (", interleaved medians" if "timing" in by_mode else "")
    line += ")"
  return line


def main(argv):
  del argv
  if FLAGS.child:
    run_child(FLAGS.child)
    return
  for shape in FLAGS.shapes:
    if shape not in SHAPES:
      raise app.UsageError(f"--shapes: unknown {shape!r}")
  for mode in FLAGS.modes:
    if mode not in MODES:
      raise app.UsageError(f"--modes: unknown {mode!r}")
  batches = sorted(int(b) for b in FLAGS.batches)
  results = []
  if FLAGS.results_file and os.path.exists(FLAGS.results_file):
    with open(FLAGS.results_file) as f:
      earlier = [json.loads(l) for l in f if l.strip()]
    print(f"({len(earlier)} earlier results in {FLAGS.results_file} inform the estimates)")
    results.extend(earlier)
  import psutil  # pylint: disable=g-import-not-at-top
  print(f"CPU: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.1f} GiB RAM; "
        f"seq {FLAGS.seq_length}, {FLAGS.num_predictions} predictions; children limited to "
        f"{FLAGS.max_child_gb} GB", flush=True)
  lines = []
  if FLAGS.summarize:
    groups = {}
    for r in results:
      groups.setdefault((r["shape"], r["batch"]), {})[r["mode"]] = r
    for (shape, batch), by_mode in sorted(groups.items(), key=lambda kv: (
        list(SHAPES).index(kv[0][0]), kv[0][1])):
      lines.append(summary_line(shape, batch, by_mode))
  for shape in FLAGS.shapes if not FLAGS.summarize else []:
    for batch in batches:
      by_mode = {}
      timing_modes = [m for m in FLAGS.modes if m != "garden"]
      if FLAGS.timing_rounds > 0 and timing_modes:
        by_mode["timing"] = launch(shape, batch, "timing=" + "+".join(timing_modes))
      for mode in FLAGS.modes if not FLAGS.timing_only else []:
        points = _measured(results, shape, mode)
        estimate = None
        if len(points) >= 2:
          intercept, slope = _fit(points)
          estimate = intercept + slope * batch
        elif len(points) == 1:
          # One point: at least proportional growth of everything above a 1 GB runtime floor.
          b0, m0 = points[0]
          estimate = 1024 + (m0 - 1024) * batch / b0 if batch > b0 else None
        too_big = [r for r in results if r["shape"] == shape and r["mode"] == mode
                   and "oom_mb" in r and r["batch"] <= batch]
        if FLAGS.skip_by_estimate and (
            (estimate and estimate > FLAGS.max_child_gb * 1024) or too_big):
          r = dict(shape=shape, batch=batch, mode=mode,
                   skipped_mb=estimate or too_big[0]["oom_mb"])
          print(f"  {shape} batch {batch} {mode}: {_describe(r)}", flush=True)
        else:
          r = launch(shape, batch, mode)
        results.append(r)
        by_mode[mode] = r
      lines.append(summary_line(shape, batch, by_mode))
  print("\nSummary")
  for line in lines:
    print(line)
  for shape in sorted({r["shape"] for r in results}) if FLAGS.summarize else FLAGS.shapes:
    for mode in MODES:
      points = _measured(results, shape, mode)
      if len(points) >= 2:
        intercept, slope = _fit(points)
        largest = int((FLAGS.budget_gb * 1024 - intercept) // slope)
        print(f"{shape} {mode}: peak RSS ~ {intercept:.0f} MB + {slope:.0f} MB x batch "
              f"(from batches {', '.join(str(b) for b, _ in points)}): largest batch within "
              f"{FLAGS.budget_gb:.0f} GB ~ {largest}")


if __name__ == "__main__":
  app.run(main)
