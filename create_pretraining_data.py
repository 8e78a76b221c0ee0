"""Creates ALBERT pretraining TFRecords (SOP pairs + n-gram masked LM) from raw text.

Same flags, defaults and output format as the official ALBERT create_pretraining_data.py, e.g.

  python create_pretraining_data.py --input_file=corpus/*.txt --output_file=out/train.tfrecord \
      --spm_model_file=30k-clean.model --max_seq_length=512 --dupe_factor=40

Input: one sentence per line, a blank line between documents. Additions: --num_workers,
--chunk_mb, --invalid_utf8, --output_shards, and --runner (Apache Beam, with Beam's pipeline
options after it: docs/data_at_scale.md). The output depends only on the inputs, the flags and
--random_seed. Beside the output, `<output_file>.vocab.json` records which vocabulary made it
(run_pretraining.py checks it: albert_tf/data/pretraining/vocab_record.py).
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

import logging
import os
import sys

from absl import flags

from albert_tf.cli import command
from albert_tf.cli import pretraining_flags
from albert_tf.data.pretraining import creation as pretraining_data_creation
from albert_tf.data.pretraining import vocab_record
from albert_tf.errors import AlbertError
from albert_tf.training.preemption import StopSignals

FLAGS = flags.FLAGS

# The official flags (names and defaults unchanged).
flags.DEFINE_string("input_file", None, "Raw text: comma-separated files or globs; one sentence "
                    "per line, a blank line between documents.")
flags.DEFINE_string("output_file", None, "Comma-separated TFRecord outputs (written "
                    "round-robin).")
command.output_flags(output_file=command.FILE_LIST)
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary, used when --spm_model_file is "
                    "not given.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (e.g. 30k-clean.model).")
flags.DEFINE_string("input_file_mode", "r", "Accepted for compatibility ('r' or 'rb'); input "
                    "is always read as UTF-8 bytes.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the text before tokenizing.")
flags.DEFINE_bool("do_whole_word_mask", True, "Mask whole words (all pieces of a word) instead "
                  "of single pieces.")
flags.DEFINE_bool("do_permutation", False, "Also permute the tokens of extra n-grams and "
                  "predict them.")
flags.DEFINE_bool("favor_shorter_ngram", True, "p(n) proportional to 1/n; when false, longer "
                  "n-grams are favoured instead.")
flags.DEFINE_bool("random_next_sentence", False, "Make BERT next-sentence pairs (B from a "
                  "random document) instead of sentence-order pairs.")
flags.DEFINE_integer("max_seq_length", 512, "Tokens per instance, [CLS] and [SEP]s included.")
flags.DEFINE_integer("ngram", 3, "Longest masked n-gram (in words).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Most masked positions per instance.")
flags.DEFINE_integer("random_seed", 12345, "Seed; the output depends only on it, the inputs and "
                     "the flags.")
flags.DEFINE_integer("dupe_factor", 40, "Passes over the input, each with new pairs and masks.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Share of tokens to mask.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length for an "
                   "instance.")

# Additions.
flags.DEFINE_integer("num_workers", os.cpu_count() or 1, "Worker processes (the output is the "
                     "same for any value).")
flags.DEFINE_float("chunk_mb", 1.0, "Documents are paired and shuffled in chunks of about this "
                   "many MB of text; memory grows with it and --dupe_factor, not with the corpus.")
flags.DEFINE_enum("invalid_utf8", "stop", ["stop", "skip"], "A line that is not UTF-8: stop "
                  "with an error naming file and line, or skip it and count it.")
flags.DEFINE_bool("progress", True, "Print a progress line every few seconds.")
flags.DEFINE_integer("output_shards", 0, "When > 0: --output_file is a prefix and the output is "
                     "that many files <prefix>-00000-of-0000n ... (read them with <prefix>-*).")
flags.DEFINE_string("runner", None, "Run on Apache Beam with this runner (DirectRunner, "
                    "DataflowRunner, FlinkRunner, SparkRunner; needs pip install '.[beam]'), "
                    "the same bytes as without; Beam's pipeline options follow as further "
                    "flags (e.g. --direct_num_workers=2). See docs/data_at_scale.md.")


def main(argv):
  extra = argv[1:]
  common = dict(input_file=FLAGS.input_file, output_file=FLAGS.output_file,
                spm_model_file=FLAGS.spm_model_file, vocab_file=FLAGS.vocab_file,
                do_lower_case=FLAGS.do_lower_case, options=pretraining_flags.instance_options(),
                random_seed=FLAGS.random_seed, chunk_mb=FLAGS.chunk_mb,
                invalid_utf8=FLAGS.invalid_utf8, output_shards=FLAGS.output_shards)
  if FLAGS.runner:
    # Beam's import warns about cloud clients it does not need here (no gs:// without [gcp]).
    previous_level = logging.root.level
    logging.root.setLevel(logging.ERROR)
    try:
      from albert_tf.data.pretraining import beam_pipeline  # lazy: Apache Beam is an optional extra
    except ImportError as e:
      raise AlbertError(f"--runner={FLAGS.runner} needs Apache Beam ({e}): pip install "
                        f"'.[beam]' (docs/data_at_scale.md)")
    finally:
      logging.root.setLevel(previous_level)
    report = beam_pipeline.create_pretraining_data(
        beam_args=[f"--runner={FLAGS.runner}"] + extra, **common)
  elif extra:
    raise AlbertError(f"unknown flag {extra[0]} (Apache Beam pipeline options need --runner)"
                      if extra[0].startswith("-") else f"unexpected arguments: {' '.join(extra)}")
  else:
    report = pretraining_data_creation.create_pretraining_data(
        num_workers=FLAGS.num_workers, show_progress=FLAGS.progress, **common)
  for line in pretraining_data_creation.format_report(report):
    print(line, file=sys.stderr)
  # Beside the records, which vocabulary made them: run_pretraining.py checks and uses it.
  for path in vocab_record.write(
      pretraining_data_creation.output_paths(FLAGS.output_file, FLAGS.output_shards),
      spm_model_file=FLAGS.spm_model_file, vocab_file=FLAGS.vocab_file,
      do_lower_case=FLAGS.do_lower_case):
    print(f"vocabulary record: {path}", file=sys.stderr)


if __name__ == "__main__":
  # SIGTERM/SIGINT: one line and exit 42, as the trainers; the workers are stopped and the
  # temporary output files removed (outputs appear only when complete).
  with StopSignals("no output file was written (each appears only when complete) and the "
                   "workers and temporary files are gone; run the same command again to start "
                   "over"):
    command.run(main, pass_unknown_flags=True)
