"""The command lines of the quickstart tools, `python -m albert_tf.tools.<tool>`: each tool's
flags (defined only when it runs) and their conversion into one call of its library function.

  build_corpus       albert_tf.tools.build_corpus.build_docstring_corpus
  make_pair_task     albert_tf.tools.make_pair_task.write_mrpc_task
  query_savedmodel   albert_tf.tools.query_savedmodel.query
  train_spm          albert_tf.text.train_sentencepiece
"""

from absl import flags

from albert_tf.cli.flags import require_flags, run_command
from albert_tf.errors import AlbertError
from albert_tf.text import train_sentencepiece
from albert_tf.tools.build_corpus import build_docstring_corpus
from albert_tf.tools.make_pair_task import write_mrpc_task

FLAGS = flags.FLAGS


# ------------------------------------------------------------------------------ build_corpus
def _build_corpus_flags():
  flags.DEFINE_string("output_file", None, "Text file to write (one sentence per line, blank "
                      "line between documents).")
  flags.DEFINE_float("max_mb", 8.0, "Stop at this many megabytes.")


def _build_corpus():
  written = build_docstring_corpus(FLAGS.output_file, max_bytes=int(FLAGS.max_mb * 1e6))
  print(f"wrote {written / 1e6:.1f} MB of docstring sentences to {FLAGS.output_file}")


# ---------------------------------------------------------------------------- make_pair_task
def _make_pair_task_flags():
  flags.DEFINE_string("input_file", None, "Corpus: one sentence per line, blank line between "
                      "documents.")
  flags.DEFINE_string("output_dir", None, "Directory for train.tsv, dev.tsv and test.tsv.")
  flags.DEFINE_integer("num_train", 2000, "Training pairs.")
  flags.DEFINE_integer("num_dev", 400, "Development pairs.")
  flags.DEFINE_integer("num_test", 100, "Test pairs (unlabelled, as GLUE's).")
  flags.DEFINE_integer("random_seed", 12345, "Seed of the pair draw.")


def _make_pair_task():
  counts = write_mrpc_task(FLAGS.input_file, FLAGS.output_dir, FLAGS.num_train, FLAGS.num_dev,
                           FLAGS.num_test, FLAGS.random_seed)
  print(f"wrote {counts} sentence pairs (MRPC format) to {FLAGS.output_dir}")


# -------------------------------------------------------------------------- query_savedmodel
def _query_savedmodel_flags():
  flags.DEFINE_string("export_dir", None, "SavedModel directory written by --export_dir.")
  flags.DEFINE_multi_string("text_a", [], "First sentence(s).")
  flags.DEFINE_multi_string("text_b", [], "Second sentence(s), one per --text_a (sentence-pair "
                            "models; none for a single-sentence export).")
  flags.DEFINE_string("pair_file", None, "Or: an MRPC-format TSV (label, id, id, text_a, "
                      "text_b).")
  flags.DEFINE_integer("num_pairs", 5, "With --pair_file: how many rows to send.")


def _query_savedmodel():
  # Imported here: it loads TensorFlow and tensorflow_text, which the other tools do without.
  from albert_tf.tools import query_savedmodel  # pylint: disable=g-import-not-at-top
  if FLAGS.pair_file:
    rows = query_savedmodel.read_pairs(FLAGS.pair_file, FLAGS.num_pairs)
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
  outputs = query_savedmodel.query(FLAGS.export_dir, [r[1] for r in rows], [r[2] for r in rows])
  for i, (gold, a, b) in enumerate(rows):
    label = outputs["label"][i].decode()
    probability = outputs["probabilities"][i].max()
    gold_text = f"  (gold {gold})" if gold is not None else ""
    second = f"B: {b[:90]}\n" if b else ""
    print(f"A: {a[:90]}\n{second}-> label {label} with p={probability:.2f}{gold_text}\n")


# -------------------------------------------------------------------------------- train_spm
def _train_spm_flags():
  flags.DEFINE_string("input_file", None, "Comma-separated text files, one sentence per line.")
  flags.DEFINE_string("model_prefix", None, "Writes <prefix>.model and <prefix>.vocab.")
  flags.DEFINE_integer("vocab_size", 30000, "Vocabulary size (30000 for the released models).")


def _train_spm():
  path = train_sentencepiece(FLAGS.input_file.split(","), FLAGS.model_prefix,
                             vocab_size=FLAGS.vocab_size)
  print(f"wrote SentencePiece model {path}")


# tool -> (its flag definitions, the flags it requires, what it does with them)
_TOOLS = {
    "build_corpus": (_build_corpus_flags, ("output_file",), _build_corpus),
    "make_pair_task": (_make_pair_task_flags, ("input_file", "output_dir"), _make_pair_task),
    "query_savedmodel": (_query_savedmodel_flags, ("export_dir",), _query_savedmodel),
    "train_spm": (_train_spm_flags, ("input_file", "model_prefix"), _train_spm),
}


def run(tool):
  """Defines `tool`'s flags, parses the command line and runs it (exit 2 on bad input)."""
  define_flags, required, work = _TOOLS[tool]

  def main(argv):
    del argv
    require_flags(required)
    work()

  run_command(define_flags, main)
