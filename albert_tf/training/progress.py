"""The training progress line and its TensorBoard twin.

Every `log_every_n_steps` the trainer prints one line,

  step 200/1000 | loss 7.6211 | mlm_loss 6.9286 | ... | learning_rate 1.1e-05 | 821.7 examples/s
  | ETA 0:00:11 | peak RSS 842 MB

and writes the same values as scalars to `<output_dir>/train/`. Values are means over the steps
since the previous line.
"""

import math
import time

import tensorflow as tf

from albert_tf.training import memory


def format_duration(seconds):
  """H:MM:SS, or "?" when unknown."""
  if not math.isfinite(seconds):
    return "?"
  seconds = int(round(seconds))
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def format_value(value):
  """A metric for the console: 4 decimals, or 4 significant digits for tiny values."""
  value = float(value)
  return f"{value:.4g}" if abs(value) < 1e-3 and value != 0 else f"{value:.4f}"


class TrainingProgress:
  """Accumulates loss/aux sums between progress lines; prints and summarises them.

  Args:
    num_train_steps: the run's last step (for the ETA).
    train_batch_size: global batch size (for examples/s).
    start_step: the step the run starts (or resumes) at.
    log: callable printing one line (the chief's console).
    writer: a tf.summary writer (a no-op writer on non-chief workers).
  """

  def __init__(self, num_train_steps, train_batch_size, start_step, log, writer):
    self.num_train_steps = num_train_steps
    self.train_batch_size = train_batch_size
    self._log = log
    self._writer = writer
    self._start_time = time.time()
    self._interval_time, self._interval_step = self._start_time, start_step
    self._loss, self._aux, self._count = 0.0, {}, 0
    self.summary = {"global_step": start_step}

  @property
  def seconds(self):
    return time.time() - self._start_time

  def add(self, loss_sum, aux_sum, steps_run):
    """Adds one loop call's sums (tensors or floats) over `steps_run` steps."""
    self._loss += float(loss_sum)
    self._count += int(steps_run)
    for name, value in (aux_sum or {}).items():
      self._aux[name] = self._aux.get(name, 0.0) + float(value)

  def report(self, step, metrics, learning_rate):
    """Prints the line for `step`, writes its summaries and resets the interval.

    Args:
      step: the global step reached.
      metrics: the train metrics (tf_keras Metric objects), read and reset here.
      learning_rate: the current learning rate (float).
    Returns:
      The reported values (dict, with global_step).
    """
    now = time.time()
    steps_per_s = (step - self._interval_step) / max(now - self._interval_time, 1e-9)
    denom = max(self._count, 1)
    values = {"loss": self._loss / denom}
    values.update({n: v / denom for n, v in self._aux.items()})
    for metric in metrics:
      values[metric.name] = float(metric.result().numpy())
      metric.reset_state()
    values["learning_rate"] = float(learning_rate)
    examples_per_second = steps_per_s * self.train_batch_size
    eta = ((self.num_train_steps - step) / steps_per_s if steps_per_s > 0 else float("inf"))
    self._log(" | ".join([f"step {step}/{self.num_train_steps}"]
                         + [f"{n} {format_value(v)}" for n, v in values.items()]
                         + [f"{examples_per_second:.1f} examples/s",
                            f"ETA {format_duration(eta)}", memory.memory_report()]))
    values["examples_per_second"] = examples_per_second
    with self._writer.as_default(step=step):
      for name, value in values.items():
        tf.summary.scalar(name, value)
    self._writer.flush()
    self.summary = dict(values, global_step=step)
    self._interval_time, self._interval_step = now, step
    self._loss, self._aux, self._count = 0.0, {}, 0
    return self.summary
