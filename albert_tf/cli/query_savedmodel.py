"""`python -m albert_tf.cli.query_savedmodel`, the SavedModel client command: its flags (defined
only when it runs) and their conversion into one call of albert_tf.tools.savedmodel_query.query."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

from absl import flags

from albert_tf.cli.command import require_flags, run_command
from albert_tf.errors import AlbertError
from albert_tf.tools import savedmodel_query

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("export_dir", None, "SavedModel directory written by --export_dir.")
  flags.DEFINE_multi_string("text_a", [], "First sentence(s); a token classifier's text(s).")
  flags.DEFINE_multi_string("text_b", [], "Second sentence(s), one per --text_a (sentence-pair "
                            "models; none for a single-sentence export).")
  flags.DEFINE_string("pair_file", None, "Or: an MRPC-format TSV (label, id, id, text_a, "
                      "text_b).")
  flags.DEFINE_integer("num_pairs", 5, "With --pair_file: how many rows to send (0: all). "
                       "Labelled rows are scored: how many the model got right, beside the "
                       "majority-class baseline of the same rows.")
  flags.DEFINE_integer("show", None, "Print at most this many of the queried rows (default: "
                       "all); the score counts every row.")


def _query_savedmodel(argv):
  del argv
  require_flags(("export_dir",))
  if FLAGS.pair_file:
    rows = savedmodel_query.read_pairs(FLAGS.pair_file, FLAGS.num_pairs)
  else:
    if not FLAGS.text_a:
      raise AlbertError("give --text_a (and --text_b for a sentence-pair model) or --pair_file")
    texts_b = list(FLAGS.text_b)
    if any(texts_b) and len(texts_b) != len(FLAGS.text_a):
      raise AlbertError(f"{len(FLAGS.text_a)} --text_a but {len(texts_b)} --text_b: give one "
                        f"--text_b per --text_a, or none for a single-sentence model")
    if not any(texts_b):
      texts_b = [""] * len(FLAGS.text_a)  # single sentences (a pair model reads "" as no text_b)
    rows = [(None, a, b) for a, b in zip(FLAGS.text_a, texts_b)]
  outputs = savedmodel_query.query(FLAGS.export_dir, [r[1] for r in rows], [r[2] for r in rows])
  if "num_entities" in outputs:  # a token classifier: each text's entities
    for i, (_, text, _) in enumerate(rows):
      found = savedmodel_query.entities(outputs, i)
      print(f"text: {text[:90]}\n-> " + ("; ".join(
          f"{kind} [{start}:{end}] {span!r} p={p:.2f}" for kind, start, end, span, p in found)
          or "no entity") + "\n")
    return
  predicted = [label.decode() for label in outputs["label"]]
  shown = len(rows) if FLAGS.show is None else max(FLAGS.show, 0)
  for i, (gold, a, b) in enumerate(rows[:shown]):
    probability = outputs["probabilities"][i].max()
    gold_text = ""
    if gold is not None:
      gold_text = "  (gold {}: {})".format(gold, "right" if gold == predicted[i] else "WRONG")
    second = f"B: {b[:90]}\n" if b else ""
    # An early-exit export says at which layer each answer was given.
    exit_text = (f" at layer {int(outputs['exit_layer'][i])}" if "exit_layer" in outputs
                 else "")
    print(f"A: {a[:90]}\n{second}-> label {predicted[i]} with p={probability:.2f}{exit_text}"
          f"{gold_text}\n")
  score = savedmodel_query.score(predicted, [r[0] for r in rows])
  if score:
    print(f"{score.right} of {score.total} right; majority-class baseline (always label "
          f"{score.majority_label}): {score.majority_right} of {score.total}")


def main():
  """Defines the flags, parses the command line and runs (exit 2 on bad input)."""
  run_command(define_flags, _query_savedmodel)


if __name__ == "__main__":
  main()
