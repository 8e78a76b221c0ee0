"""Which checkpoint of an output dir a run resumes from, evaluates, predicts with or exports.

An output dir holds our checkpoints `ckpt-<step>` (model, optimizer, step; resumable), those of
the official scripts `model.ckpt-<step>` (TF1, name-based) and, after an evaluation sweep,
`model.ckpt-best`. Every choice here looks at the files themselves (not only at the `checkpoint`
state file, which a copy or a crash may lose) and verifies the checkpoint it picks
(`checkpoints.integrity`): a run never starts from scratch beside checkpoints it could not read,
never computes with half a checkpoint and never overwrites or deletes an intact one.

  * resume: the newest intact checkpoint. Newer ones that are incomplete or unreadable (a save
    cut short) are moved to `<output_dir>/broken_checkpoints/` with a one-line warning each; if
    checkpoints exist but none is intact, the run stops with an error naming them.
  * evaluation sweep: every numbered checkpoint; an unreadable one is skipped with a warning
    (and the sweep fails if none is readable).
  * predict / export: `model.ckpt-best` (an error if it is broken: the sweep must be rerun),
    else the newest intact numbered checkpoint, else a fine-tuned --init_checkpoint.
"""

import os
import re

from absl import logging
import tensorflow as tf

from albert_tf.common import fileio, output_layout
from albert_tf.checkpoints import formats
from albert_tf.checkpoints import init as checkpoint_init
from albert_tf.checkpoints import integrity
from albert_tf.checkpoints import tf1
from albert_tf.checkpoints import tf2
from albert_tf.errors import AlbertError

BEST_CHECKPOINT = output_layout.BEST_CHECKPOINT
BROKEN_DIR = "broken_checkpoints"
# A checkpoint whose weights gave a non-finite loss at the next step (a diverged run).
DIVERGED_DIR = "diverged_checkpoints"


def _warn(message):
  logging.warning("%s", message)


def _set_aside(prefix, output_dir, folder=BROKEN_DIR):
  """Moves a checkpoint's files into <output_dir>/<folder>/ (kept, not deleted)."""
  target_dir = os.path.join(output_dir, folder)
  fileio.makedirs(target_dir)
  for path in integrity.checkpoint_files(prefix):
    fileio.replace(path, os.path.join(target_dir, os.path.basename(path)))
  return target_dir


def _rewrite_state(output_dir, intact):
  """Points the `checkpoint` state file at the intact checkpoints only (newest last); removes it
  when none is left."""
  if intact:
    tf1.write_checkpoint_state(intact[-1], intact)  # basenames: right from any working directory
  else:
    fileio.remove(os.path.join(output_dir, "checkpoint"))


def resume_checkpoint(output_dir, repair=True):
  """The checkpoint a training run in `output_dir` resumes from, or None for a fresh start.

  Args:
    output_dir: the run's --output_dir.
    repair: move broken checkpoints newer than the one resumed from aside and rewrite the state
      file (the chief does; other workers only read).
  Returns:
    The newest intact checkpoint's prefix, or None when the directory holds no checkpoint at all.
  Raises:
    AlbertError: checkpoints are there but none reads whole.
  """
  numbered = integrity.numbered_checkpoints(output_dir)
  broken = []
  for _, prefix in reversed(numbered):
    problem = integrity.checkpoint_problem(prefix)
    if problem is None:
      if broken and repair:
        for bad_prefix, bad_problem in broken:
          where = _set_aside(bad_prefix, output_dir)
          _warn(f"{bad_prefix}: {bad_problem}; moved to {where}/ and resuming from the newest "
                f"intact checkpoint {prefix}")
        bad = {p for p, _ in broken}
        _rewrite_state(output_dir, [p for _, p in numbered if p not in bad
                                    and os.path.basename(p).startswith("ckpt-")])
      return prefix
    broken.append((prefix, problem))
  if broken:
    listing = "; ".join(f"{os.path.basename(p)}: {problem}" for p, problem in broken[:3])
    raise AlbertError(f"--output_dir={output_dir} holds checkpoints but none is intact ({listing})"
                      f"; nothing was changed: move them away to start from scratch, or restore "
                      f"a good copy to resume")
  return None


def checkpoints_to_evaluate(output_dir):
  """[(step, prefix)]: every intact numbered checkpoint, or else an official run's lone
  model.ckpt-best (the official scripts delete the checkpoints that lost).

  Broken checkpoints are skipped with a one-line warning each.
  Raises:
    AlbertError: there are checkpoints but none is intact.
  """
  found, broken = [], []
  for step, prefix in integrity.numbered_checkpoints(output_dir):
    problem = integrity.checkpoint_problem(prefix)
    if problem:
      broken.append(prefix)
      _warn(f"{prefix}: {problem}; not evaluated")
    else:
      found.append((step, prefix))
  best = os.path.join(output_dir, BEST_CHECKPOINT)
  if not found and fileio.exists(best + integrity.INDEX_SUFFIX):
    integrity.verify_checkpoint(best, BEST_CHECKPOINT)
    found = [(checkpoint_init.checkpoint_global_step(best) or 0, best)]
  if not found and broken:
    raise AlbertError(f"--do_eval: no intact checkpoint in --output_dir={output_dir} "
                      f"({len(broken)} unreadable, e.g. {broken[-1]})")
  return found


def latest_checkpoint(output_dir):
  """The newest intact numbered checkpoint of `output_dir` (newer broken ones warned about), or
  None when there is none."""
  for _, prefix in reversed(integrity.numbered_checkpoints(output_dir)):
    problem = integrity.checkpoint_problem(prefix)
    if problem is None:
      return prefix
    _warn(f"{prefix}: {problem}; using an older checkpoint")
  return None


def checkpoint_for_inference(output_dir, init_checkpoint, flag, checkpoint_path=None,
                             prefer_best=True):
  """The one rule for the fine-tuned model to evaluate, predict with or export.

  `checkpoint_path` when given (a checkpoint prefix, an HF transformers directory, or a
  directory of checkpoints: its newest intact one). Else `model.ckpt-best` of `output_dir`
  when `prefer_best` and it exists (verified: an error if broken, never a silent fall back to
  an older model), else the newest intact numbered checkpoint, else `init_checkpoint`
  (verified).

  Args:
    output_dir: the run's --output_dir (None: none).
    init_checkpoint: the task's --init_checkpoint (None: none).
    flag: what asks, for the error ("--do_eval", "--do_predict", "--export_dir").
  Raises:
    AlbertError: there is no such checkpoint (one message for every caller).
  """
  if checkpoint_path:
    return _named_checkpoint(checkpoint_path)
  best = os.path.join(output_dir, BEST_CHECKPOINT) if output_dir else None
  if best and prefer_best and fileio.exists(best + integrity.INDEX_SUFFIX):
    problem = integrity.checkpoint_problem(best)
    if problem:
      raise AlbertError(f"{best}: {problem}; rerun --do_eval to write it again, or delete "
                        f"{best}.* to use the latest checkpoint")
    return best
  if best and prefer_best and integrity.checkpoint_files(best):
    _warn(f"{best}: {integrity.checkpoint_problem(best)}; using the latest checkpoint")
  latest = latest_checkpoint(output_dir) if output_dir else None
  if latest:
    return latest
  if init_checkpoint:
    return tf1.resolve_checkpoint_path(init_checkpoint, "--init_checkpoint") if not (
        _is_directory_model(init_checkpoint)) else init_checkpoint
  raise AlbertError(f"{flag}: no checkpoint in --output_dir={output_dir} and no "
                    f"--init_checkpoint (train first with --do_train, or point --output_dir at "
                    f"a fine-tuned model)")


def _named_checkpoint(path):
  """A checkpoint the caller named: a prefix, an HF directory, or a directory of checkpoints
  (its newest intact one)."""
  is_hf = formats.directory_format(path, hub_modules=False) == formats.HF
  if fileio.isdir(path) and not is_hf:
    latest = latest_checkpoint(path)
    if not latest:
      raise AlbertError(f"{path}: no checkpoint in this directory")
    return latest
  if not (is_hf or fileio.exists(path + integrity.INDEX_SUFFIX)
          or integrity.checkpoint_files(path)):
    raise AlbertError(f"{path}: no such checkpoint (expected {path}.index)")
  return path


def _is_directory_model(path):
  """HF directories and hub modules are read by their own loaders, not as checkpoints."""
  return formats.directory_format(path) is not None


def write_best_checkpoint(model, best_path, output_dir, best_step, label_list=None):
  """Writes `<output_dir>/model.ckpt-best` in the official TF1 layout, as the official scripts do.

  The official run_classifier / run_race / run_squad leave the best checkpoint of their
  evaluation sweep there; official recipes continue from it (`--init_checkpoint`) and the
  official export tools read it. Ours holds the same names (`bert/...`, the task head,
  `global_step`), written atomically; the `checkpoint` state file keeps pointing at the
  training run's latest.
  """
  checkpoint_init.restore_model_weights(model, best_path, label_list=label_list)
  target = os.path.join(output_dir, BEST_CHECKPOINT)
  if os.path.abspath(best_path) != os.path.abspath(target):
    tf1.save_tf1_checkpoint(model, target, global_step=best_step or 0, update_state=False)
  return target


# ------------------------------------------------------------------------ a training run's saves
_INPUT_STATE_DIR = output_layout.INPUT_STATE_DIR
_INPUT_SIGNATURE_FILE = output_layout.INPUT_SIGNATURE


def _first_line(error):
  return integrity.first_line(error)


_WRITE_FAILURE = re.compile(r"No space left|File too large|quota|Read-only file system|"
                            r"Permission denied", re.IGNORECASE)


def _is_write_failure(error):
  """A full disk, a file size limit, a quota or permissions: not a collective or a bug."""
  return (isinstance(error, (OSError, tf.errors.ResourceExhaustedError,
                             tf.errors.PermissionDeniedError))
          or bool(_WRITE_FAILURE.search(str(error))))


def batch_shapes(element_spec, prefix=""):
  """{"0/input_ids": [batch, seq_len], ...} of a dataset's element_spec (tuples and dicts)."""
  if isinstance(element_spec, dict):
    items = sorted(element_spec.items())
  elif isinstance(element_spec, (list, tuple)):
    items = enumerate(element_spec)
  else:
    return {prefix.rstrip("/"): element_spec.shape.as_list()}
  shapes = {}
  for key, value in items:
    shapes.update(batch_shapes(value, f"{prefix}{key}/"))
  return shapes


def _signature_difference(saved, current):
  for key in ("train_batch_size", "num_workers"):
    if saved.get(key) != current.get(key):
      return f"{key} {saved.get(key)} -> {current.get(key)}"
  for name, shape in sorted(current["batch_shapes"].items()):
    if saved.get("batch_shapes", {}).get(name) != shape:
      return f"{name} shape {saved.get('batch_shapes', {}).get(name)} -> {shape}"
  return "input features changed"


class TrainingCheckpoints:
  """The saves of one training run, and its resume.

  The chief writes `tf.train.Checkpoint(model, optimizer, global_step)` as `ckpt-<step>` into
  output_dir (tf.train.CheckpointManager: files appear index last, so a reader never sees half
  a save); other workers take part in every save (MultiWorkerMirroredStrategy needs them to)
  into a scratch dir they remove. Each worker saves the position of its input pipelines as
  `train_input_state/worker_<i>/ckpt-<step>` first, then (after a barrier) the model is saved:
  a model checkpoint never exists without the input position that goes with it.

  The input position is a count: the batches each input pipeline of the worker has given since
  the input began (one per pipeline and step). Distributed iterators cannot be saved (and
  `tf.distribute` keeps elements in flight), so a resumed run's pipelines skip that many batches
  of the same reproducible stream (`input_batches_to_skip`) and go on with the batch the
  interrupted run would have taken next.

  Args:
    output_dir: the run's --output_dir.
    checkpoint: tf.train.Checkpoint of the model, optimizer and global step.
    input_signature: what a saved position is valid for (batch size, workers, batch shapes); a
      position saved for another signature is not restored (the input restarts, with a note).
    worker_id, is_chief: this process's place in the cluster.
    keep_checkpoint_max: checkpoints kept (None: all).
    barrier: zero-arg callable synchronising all workers (no-op for one worker).
    log: callable printing one line (the chief's console).
  """

  def __init__(self, output_dir, checkpoint, input_signature, worker_id=0,
               is_chief=True, keep_checkpoint_max=None, barrier=lambda: None, log=print):
    self.output_dir = output_dir
    self.checkpoint = checkpoint
    self.is_chief = is_chief
    self.worker_id = worker_id
    self.input_signature = input_signature
    self._barrier = barrier
    self._log = log
    self._keep = keep_checkpoint_max
    # Batches given per input pipeline since the input began, as of the last save.
    self._input_position = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._input_checkpoint = tf.train.Checkpoint(batches_per_pipeline=self._input_position)
    # (batches per pipeline, global step) at the restore: each later step adds one batch.
    self._position_at_start = (0, 0)
    self.input_dir = os.path.join(output_dir, _INPUT_STATE_DIR, f"worker_{worker_id}")
    self._manager = self._input_manager = None
    self.last_saved = None

  def _make_managers(self):
    # After resume_checkpoint's repair: a manager reads the state file once, when it is made.
    # One more than asked while training: the newest checkpoint is only known to be good once
    # the step after it gave a finite loss; until then the one before it must still be there
    # for a diverged run to go back to (`diverged`). `finish` trims to keep_checkpoint_max.
    keep = self._keep + 1 if self._keep else None
    self._manager = (tf.train.CheckpointManager(self.checkpoint, self.output_dir,
                                                max_to_keep=keep)
                     if self.is_chief else None)
    self._input_manager = tf.train.CheckpointManager(self._input_checkpoint, self.input_dir,
                                                     max_to_keep=keep)

  # ------------------------------------------------------------------ resume
  def restore(self, step_of):
    """Restores the newest intact checkpoint (and this worker's input position) if there is one.

    Args:
      step_of: zero-arg callable giving the global step after the restore.
    Returns:
      True when the run resumed, False for a fresh start (nothing in output_dir).
    """
    latest = resume_checkpoint(self.output_dir, repair=self.is_chief)
    self._make_managers()
    self._position_at_start = (0, step_of())
    if latest is None:
      return False
    if formats.detect(latest).name != formats.TF2:
      raise AlbertError(f"{latest}: --output_dir holds an official TF1 checkpoint, which has "
                        f"no resumable training state here; train from it with "
                        f"--init_checkpoint={latest} and a new --output_dir")
    # A mode change would lose the internal classifiers silently (or never restore them).
    difference = tf2.early_exit_difference(getattr(self.checkpoint, "model", None), latest)
    if difference:
      raise AlbertError(f"{latest}: the run in --output_dir cannot resume with another early-exit "
                        f"mode: {difference}; resume with the --early_exit it was started with, "
                        f"or start a new --output_dir with --init_checkpoint={latest}")
    try:
      self.checkpoint.restore(latest).assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
      raise AlbertError(f"{latest}: the checkpoint in --output_dir does not match this model "
                        f"and optimizer (different config/precision?): {_first_line(e)}"
                        ) from None
    self.last_saved = latest
    step = step_of()
    restored = self._restore_input(step)
    self._position_at_start = (int(self._input_position.numpy()) if restored else 0, step)
    detail = ("input position restored" if restored else
              "input restarts from the beginning: no matching saved position for this worker")
    self._log(f"Resuming from {latest} at step {step} ({detail})")
    return True

  @property
  def input_batches_to_skip(self):
    """How many batches each input pipeline skips to go on where the saved run stopped (0 for a
    fresh start or a restarted input)."""
    return self._position_at_start[0]

  def _restore_input(self, step):
    path = os.path.join(self.input_dir, f"ckpt-{step}")
    signature_path = os.path.join(self.input_dir, _INPUT_SIGNATURE_FILE)
    saved = (fileio.read_json(signature_path) if fileio.exists(signature_path) else None)
    if saved is not None and saved != self.input_signature:
      # A saved position of batches of another shape would fail in the first step: the
      # input restarts instead (every example is still seen; the model state is resumed).
      self._log(f"note: the input differs from the saved run's "
                f"({_signature_difference(saved, self.input_signature)}): the input restarts "
                f"from the beginning")
      return False
    if integrity.checkpoint_problem(path):
      if fileio.exists(path + integrity.INDEX_SUFFIX):
        _warn(f"{path}: {integrity.checkpoint_problem(path)}; the input restarts")
      return False
    try:
      self._input_checkpoint.restore(path).assert_consumed()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
      # E.g. the input files changed: the old position means nothing.
      _warn(f"Input position in {path} not restored ({_first_line(e)})")
      return False
    return True

  # ------------------------------------------------------------------ save
  def save(self, step):
    """Saves the input position and the model at `step` (every worker calls it). Returns the
    checkpoint prefix.

    Raises:
      AlbertError: the save could not be written (e.g. disk full); the last complete
        checkpoint is named and untouched.
    """
    prefix = os.path.join(self.output_dir, f"ckpt-{step}")
    batches, start_step = self._position_at_start
    self._input_position.assign(batches + step - start_step)
    try:
      # The commit checks first (e.g. a run whose lock on a bucket was taken over stops here),
      # before the input position is written: a later write_json checks again, but too late
      # for the input checkpoint beside it.
      fileio.run_commit_checks()
      self._input_manager.save(checkpoint_number=step)
      fileio.write_json(os.path.join(self.input_dir, _INPUT_SIGNATURE_FILE),
                        self.input_signature, sort_keys=True)
      self._barrier()
      if self.is_chief:
        prefix = self._manager.save(checkpoint_number=step)
      else:
        scratch = os.path.join(self.output_dir, f".worker_{self.worker_id}_scratch")
        self.checkpoint.write(os.path.join(scratch, f"ckpt-{step}"))
        fileio.remove(scratch)
    except (tf.errors.OpError, OSError) as e:
      if not _is_write_failure(e):
        raise
      fileio.remove(prefix + "_temp")  # what TensorFlow leaves of a save that failed
      kept = self.last_saved or "none yet"
      raise AlbertError(f"cannot write checkpoint {prefix}: {_first_line(e)}; the last complete "
                        f"checkpoint ({kept}) is kept: make room (or fix the directory) and run "
                        f"the same command again to resume") from None
    self.last_saved = prefix
    return prefix

  def finish(self):
    """At the end of training: keeps only the keep_checkpoint_max newest checkpoints (found
    from the files: the managers forget those of earlier runs whose state file was rewritten)."""
    if not self._keep:
      return
    directories = [self.input_dir] + ([self.output_dir] if self.is_chief else [])
    for directory in directories:
      ours = [p for _, p in integrity.numbered_checkpoints(directory)
              if os.path.basename(p).startswith("ckpt-")]
      if len(ours) <= self._keep:
        continue
      for prefix in ours[:-self._keep]:
        for path in integrity.checkpoint_files(prefix):
          fileio.remove(path)
      _rewrite_state(directory, ours[-self._keep:])

  def diverged(self, bad_step):
    """After a non-finite loss at step `bad_step`: the checkpoint of step bad_step - 1 holds the
    weights that gave it, so it moves to <output_dir>/diverged_checkpoints/ (the chief's job)
    and a rerun resumes from the one before. Returns the sentence naming the last good
    checkpoint and how to go on."""
    moved = ""
    numbered = [p for _, p in integrity.numbered_checkpoints(self.output_dir)
                if os.path.basename(p).startswith("ckpt-")]
    bad = os.path.join(self.output_dir, f"ckpt-{bad_step - 1}")
    if bad in numbered:
      if self.is_chief:
        where = _set_aside(bad, self.output_dir, DIVERGED_DIR)
        _rewrite_state(self.output_dir, [p for p in numbered if p != bad])
        moved = f"its starting weights {bad} moved to {where}/; "
      numbered.remove(bad)
    if numbered:
      return (f"{moved}last good checkpoint: {numbered[-1]}: run again with a lower "
              f"--learning_rate (or --precision fp32) to resume from it")
    return (f"{moved}no earlier checkpoint: run again with a lower --learning_rate (or "
            f"--precision fp32) to start over")
