"""Training a SentencePiece model with the flags of the official ALBERT release.

The released `30k-clean.model` files were trained as a unigram model with `<pad>`=0, `<unk>`=1,
no BOS/EOS, and the control symbols [CLS], [SEP], [MASK] (ids 2, 3, 4). Models trained here follow
the same conventions, so every tokenizer and data tool in albert_tf accepts them unchanged.

  python -m albert_tf.cli.train_spm --input_file=corpus.txt --model_prefix=spm/30k-clean \
      --vocab_size=30000
"""

import os
import tempfile
import threading

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from albert_tf.common import fileio
from albert_tf.errors import AlbertError
from albert_tf.text import tokenization

CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
# The official README's --user_defined_symbols: always kept as single pieces (ids 5..).
OFFICIAL_USER_DEFINED_SYMBOLS = ("(", ")", "\"", "-", ".", "–", "£", "€")

# SentencePieceTrainer has process-global state (random seed, logging); serialise its use.
_TRAIN_LOCK = threading.Lock()


def _csv_field(symbol):
  # SentencePiece parses list flags as CSV: a symbol containing '"' or ',' must be quoted, with
  # '"' doubled. (The official command line passed a bare '"', which made SentencePiece read
  # `",-,.,–,£,€` as a single symbol; we register each symbol separately as intended.)
  if '"' in symbol or "," in symbol:
    return '"' + symbol.replace('"', '""') + '"'
  return symbol


def _checked_input_files(input_files):
  """A path or paths -> a list of paths, each an existing non-empty file (else AlbertError)."""
  if isinstance(input_files, (str, os.PathLike)):
    input_files = [input_files]
  input_files = [os.fspath(p) for p in input_files]
  if not input_files:
    raise AlbertError("train_sentencepiece: no input files given")
  for path in input_files:
    if not fileio.isfile(path):
      raise AlbertError(f"train_sentencepiece: input file {path} does not exist")
    if fileio.getsize(path) == 0:
      raise AlbertError(f"train_sentencepiece: input file {path} is empty")
  return input_files


def records_normalisation(do_lower_case):
  """line -> line as create_pretraining_data.py normalises text before SentencePiece
  (tokenization.preprocess_text: whitespace collapsed, accents stripped; lower-cased when
  do_lower_case), so that the vocabulary is trained on the text the records tokenize."""
  def normalise(line):
    return tokenization.preprocess_text(line, lower=do_lower_case)
  return normalise


def _write_preprocessed(path, local, preprocess):
  """`path` (local or a URL), each line through `preprocess`, into the local file `local`."""
  with fileio.open_file(path, "rb") as source, fileio.open_file(local, "w") as target:
    for number, line in enumerate(source, start=1):
      try:
        text = line.decode("utf-8")
      except UnicodeDecodeError as e:
        raise AlbertError(f"{path}: line {number} is not UTF-8 ({e.reason} at byte {e.start}): "
                          "expected UTF-8 text") from None
      target.write(preprocess(text.rstrip("\r\n")) + "\n")


def train_sentencepiece(input_files,
                        model_prefix,
                        vocab_size=30000,
                        model_type="unigram",
                        character_coverage=0.99995,
                        user_defined_symbols=OFFICIAL_USER_DEFINED_SYMBOLS,
                        input_sentence_size=10_000_000,
                        shuffle_input_sentence=True,
                        hard_vocab_limit=False,
                        num_threads=1,
                        seed=12345,
                        max_sentence_length=8192,
                        extra_flags=None,
                        preprocess=None):
  """Trains a SentencePiece model with the official ALBERT flags and returns the .model path.

  Args:
    input_files: a path or a list of paths of plain-text files (one sentence per line; blank lines
      are ignored by SentencePiece), local or tf.io.gfile URLs (gs://...: copied to a local
      temporary directory first, since SentencePiece reads only local files).
    model_prefix: output prefix, local or a URL; writes `<model_prefix>.model` and
      `<model_prefix>.vocab`. SentencePiece trains into a local temporary directory; the files
      are then written whole at the prefix (its directory created if missing), the model last,
      so a reader never finds half a model or a model without its vocabulary.
    vocab_size: the vocabulary size (30000 for the released models; tests use a few hundred).
    model_type: "unigram" as released; "bpe", "char" and "word" are accepted for experiments.
    character_coverage: share of characters covered by the vocabulary (official 0.99995).
    user_defined_symbols: symbols always kept as single pieces, placed right after [MASK].
    input_sentence_size: at most this many sentences are sampled for training.
    shuffle_input_sentence: shuffle before sampling (official True).
    hard_vocab_limit: when False (default) a small corpus may yield fewer pieces than vocab_size
      instead of failing, which is what tiny test models need.
    num_threads: trainer threads.
    seed: SentencePiece's random generator seed, so the same corpus gives the same model.
    max_sentence_length: longest line (bytes) used for training; longer lines are skipped.
    extra_flags: optional dict of further `spm_train` flags (name -> value).
    preprocess: optional function applied to every line (str, no newline) before training, e.g.
      the records' normalisation `tokenization.preprocess_text` (see `records_normalisation`).

  Returns:
    The path of the written `.model` file.

  Raises:
    AlbertError: an input file is missing or empty, or SentencePiece rejects the settings.
  """
  input_files = _checked_input_files(input_files)
  model_prefix = os.fspath(model_prefix)
  flags = dict(
      model_prefix=model_prefix,
      vocab_size=int(vocab_size),
      model_type=model_type,
      character_coverage=character_coverage,
      pad_id=0,
      unk_id=1,
      bos_id=-1,
      eos_id=-1,
      control_symbols=",".join(CONTROL_SYMBOLS),
      input_sentence_size=int(input_sentence_size),
      shuffle_input_sentence=bool(shuffle_input_sentence),
      hard_vocab_limit=bool(hard_vocab_limit),
      num_threads=int(num_threads),
      max_sentence_length=int(max_sentence_length),
  )
  if user_defined_symbols:
    flags["user_defined_symbols"] = ",".join(_csv_field(s) for s in user_defined_symbols)
  if extra_flags:
    flags.update(extra_flags)

  model_path = model_prefix + ".model"
  with tempfile.TemporaryDirectory(prefix="albert_tf_spm_") as local_dir:
    local_inputs = []
    for i, path in enumerate(input_files):
      local = os.path.join(local_dir, f"input-{i}.txt")
      if preprocess is not None:
        _write_preprocessed(path, local, preprocess)
        path = local
      elif not fileio.is_local(path):  # SentencePiece opens its inputs itself
        fileio.copy(path, local)
        path = local
      local_inputs.append(path)
    temp = os.path.join(local_dir, "spm")
    with _TRAIN_LOCK:
      spm.set_random_generator_seed(int(seed))
      try:
        spm.SentencePieceTrainer.train(**dict(flags, input=",".join(local_inputs),
                                              model_prefix=temp), minloglevel=2)
      except (RuntimeError, OSError) as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise AlbertError(f"train_sentencepiece: SentencePiece training failed: {first_line}")
    if not fileio.isfile(temp + ".model"):
      raise AlbertError(f"train_sentencepiece: SentencePiece wrote no model at {model_path}")
    # The model records its inputs and prefix: the user's, as a direct run's would.
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(fileio.read_bytes(temp + ".model"))
    proto.trainer_spec.model_prefix = model_prefix
    del proto.trainer_spec.input[:]
    proto.trainer_spec.input.extend(input_files)
    fileio.write_bytes(model_prefix + ".vocab", fileio.read_bytes(temp + ".vocab"))
    fileio.write_bytes(model_path, proto.SerializeToString())
  return model_path


def pieces_of(model_file):
  """The number of pieces of a SentencePiece model file (local or a URL)."""
  processor = spm.SentencePieceProcessor()
  processor.LoadFromSerializedProto(fileio.read_bytes(model_file))
  return processor.GetPieceSize()
