"""SavedModels for TF Serving: a fine-tuned classifier or multiple-choice model with three
signatures.

  serving_default  raw text in; in-graph SentencePiece (tensorflow-text ops) and packing.
  token_ids        input_ids / input_mask / segment_ids int32 [batch, seq_len]; core TF ops only.
  tf_example       serialized tf.Example (the official feature records); core TF ops only.

Every signature first checks its inputs (`albert_tf.export.input_checks`): one shape for all
token inputs, ids inside the vocabulary, segment ids below type_vocab_size, masks 0 or 1, a
sequence no longer than max_position_embeddings, tf.Example records of max_seq_length values,
text inputs of one batch size. Anything else is an InvalidArgumentError naming the input, never
an answer. It then drops the trailing positions that are padding in the whole batch
(`trim_padding`): same outputs, much less work for short inputs.

Loading a SavedModel registers every function in it, so a process without tensorflow-text cannot
load the full export even to call `token_ids`. The export therefore also holds `core_ops/`: the
same weights with only the token_ids and tf_example signatures, loadable by plain TensorFlow. Its
variable files are hard links to the version's own (`share_variables`), so the weights are on
disk once (on an object store, which has no links, core_ops/ keeps its own copy).

Outputs (classification): probabilities float32 [batch, num_labels], predictions int32 [batch]
(the official export's two outputs: the class index), label_id int32 [batch] (the same index),
label string [batch] (the task's label names). Regression (STS-B): score float32 [batch],
predictions float32 [batch] (the score, as the official), probabilities float32 [batch, 1].
Multiple choice: probabilities float32 [batch, 4], predictions / label_id int32, label string
("A".."D"). With the official --threshold_to_export, every signature also returns `threshold`
(float32 scalar), as the official export attached it to its outputs. A classifier with early
exit and a patience (docs/early_exit.md) stops each example early inside every signature and
also returns exit_layer int32 [batch] (1-based).
"""

import os

import tensorflow as tf

from albert_tf.export import input_checks
from albert_tf.networks import encoder as encoder_lib
from albert_tf.networks.sharing import make_sharing_plan
from albert_tf.export.saved_model_writer import write_new_version
from albert_tf.common.export_format import CORE_OPS_SUBDIR
from albert_tf.common import fileio
from albert_tf.common.fileio import file_sha1
from albert_tf.text.multiple_choice_preprocessor import encode_choices


def _id_spec(shape):
  return tf.TensorSpec(shape, tf.int32)


def _signature(input_signature):
  """The tf.function of a serving signature, without AutoGraph: nothing under it (checks,
  tokenizer, model) branches on tensors in Python, and converting it all is a third of the
  export's tracing time."""
  return tf.function(input_signature=input_signature, autograph=False)


def _parse_examples(examples, length, what):
  """Serialized tf.Examples -> {name: int64 [batch, length]} of the token features.

  Parsed as ragged rows and checked, so that a record of another length (or without a feature)
  is reported by record and feature, not as a parser failure.
  """
  spec = {name: tf.io.RaggedFeature(tf.int64) for name in input_checks.TOKEN_INPUTS}
  parsed = tf.io.parse_example(examples, spec)
  values = input_checks.after_checks({name: ragged.flat_values for name, ragged in parsed.items()},
                                     input_checks.record_length_checks(parsed, length, what))
  return {name: tf.reshape(flat, [-1, length]) for name, flat in values.items()}


def trim_padding(features):
  """Drops trailing positions that are padding in every sequence of the batch.

  Requests are padded to a fixed length, but attention cost grows with it: serving a batch of
  short inputs at their real length is several times faster. The outputs are unchanged, since
  masked keys get weight exp(-10000) = 0 and positions keep their absolute index. The cut is
  after the last position whose mask is 1 anywhere in the batch, so any mask pattern is safe.
  features: dict of int32 [..., seq_len] input_ids / input_mask / segment_ids.
  """
  mask = features["input_mask"]
  seq_len = tf.shape(mask)[-1]
  positions = tf.range(1, seq_len + 1, dtype=mask.dtype)
  length = tf.maximum(tf.reduce_max(tf.cast(mask != 0, mask.dtype) * positions), 1)
  return {name: value[..., :length] for name, value in features.items()}


# Serving exports run the layers that share their weights as one loop where that saves a server
# run with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (README, "Serving") at least this much memory: there
# every matmul kernel keeps its own reordered copy of its weights, so an unrolled graph keeps one
# per applied layer and the loop one per run of layers (ALBERT-xxlarge: 7.5 GiB saved; -large
# 1.0, -base 0.26). Below it the loop is not worth its cost without the setting (up to 1.05x the
# time at base and large, bf16; bench/peers/shared_weights.py).
LOOP_SAVES_AT_LEAST_BYTES = 2 * 2**30


def kept_copies_saved_by_loop(config):
  """Bytes of reordered float32 weight copies the loop saves a frozen-weights server: (applied
  layers - loop runs) x one layer's matmul weights (as a classifier runs them, pooled-only)."""
  h, i = config.hidden_size, config.intermediate_size
  schedule = make_sharing_plan(config).schedule
  runs = encoder_lib.layer_runs(schedule, pooled_only=True)
  return (len(schedule) - len(runs)) * (4 * h * h + 2 * h * i) * 4


def run_for_serving(model, features):
  """model(features, training=False) as every serving signature traces it: the layers that share
  their weights as one loop when that saves LOOP_SAVES_AT_LEAST_BYTES (networks/encoder.py,
  `shared_layers_in_one_loop`), else one after the other."""
  if kept_copies_saved_by_loop(model.config) < LOOP_SAVES_AT_LEAST_BYTES:
    return model(features, training=False)
  with encoder_lib.shared_layers_in_one_loop():
    return model(features, training=False)


class _ServingBase(tf.Module):
  """Holds the model and the label names; subclasses define the signatures.

  num_choices: the fixed middle dimension of multiple-choice inputs [batch, choices, seq_len].
  """

  def __init__(self, model, label_names, name=None, threshold=None, num_choices=None):
    super().__init__(name=name)
    # Track the weights, not the Keras model: saving a Keras model also traces and stores every
    # layer's call functions (slow, and unused by serving). The model is reached via a closure.
    self.model_variables = list(model.variables)
    self._run_model = lambda features: run_for_serving(model, features)
    self._is_regression = bool(getattr(model, "is_regression", False))
    self._label_names = tf.constant(list(label_names) if label_names else [""], tf.string)
    self._threshold = None if threshold is None else float(threshold)
    self._config = model.config
    self._num_choices = num_choices

  def _checked(self, features):
    """`features` gated on the token-input checks (any int dtype: tf.Example values are int64
    and are checked before their cast to int32)."""
    return input_checks.check_token_inputs(features, self._config, self._num_choices)

  def _classify(self, features):
    """The outputs for checked int32 features."""
    outputs = self._run_model(trim_padding(features))
    probabilities = tf.cast(outputs["probabilities"], tf.float32)
    if self._is_regression:
      result = {"score": probabilities[:, 0], "predictions": probabilities[:, 0],
                "probabilities": probabilities}
    else:
      label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
      result = {"probabilities": probabilities, "predictions": label_id, "label_id": label_id,
                "label": tf.gather(self._label_names, label_id)}
    if "exit_layer" in outputs:  # early exit: the 1-based layer each answer came from
      result["exit_layer"] = outputs["exit_layer"]
    if self._threshold is not None:
      result["threshold"] = tf.constant(self._threshold, tf.float32)
    return result


class ClassifierServing(_ServingBase):
  """Serving signatures for an AlbertClassifier.

  text_tokenizer: None (no raw-text signature) or an in-graph tokenizer (SentencePiece:
    albert_tf/text/in_graph_tokenizer.py; WordPiece: in_graph_wordpiece.py) built with the same
    max_seq_length (preprocessing, tokenization and official packing).
  """

  def __init__(self, model, label_names, max_seq_length, text_tokenizer=None, text_pair=True,
               threshold=None):
    super().__init__(model, label_names, threshold=threshold)
    self.max_seq_length = max_seq_length
    self.text_tokenizer = text_tokenizer
    self.text_pair = text_pair

  def token_ids_fn(self):
    @_signature([_id_spec([None, None])] * 3)
    def token_ids(input_ids, input_mask, segment_ids):
      return self._classify(self._checked({"input_ids": input_ids, "input_mask": input_mask,
                                           "segment_ids": segment_ids}))
    return token_ids

  def tf_example_fn(self):
    @_signature([tf.TensorSpec([None], tf.string, name="examples")])
    def tf_example(examples):
      parsed = _parse_examples(examples, self.max_seq_length, "max_seq_length")
      checked = self._checked(parsed)
      return self._classify({k: tf.cast(v, tf.int32) for k, v in checked.items()})
    return tf_example

  def raw_text_fn(self):
    tokenizer = self.text_tokenizer
    if self.text_pair:
      @_signature([tf.TensorSpec([None], tf.string, name="text_a"),
                   tf.TensorSpec([None], tf.string, name="text_b")])
      def raw_text(text_a, text_b):
        texts = input_checks.after_checks({"text_a": text_a, "text_b": text_b}, [
            input_checks.layout_check("text_a", text_a, ("batch",)),
            input_checks.same_shape_check("text_b", text_b, "text_a", text_a, rank=1)])
        ids_a, ids_b = tokenizer.tokenize(texts["text_a"]), tokenizer.tokenize(texts["text_b"])
        pair, single = tokenizer.pack(ids_a, ids_b), tokenizer.pack(ids_a)
        # As the official conversion: a text_b without tokens means a single-sentence input.
        no_b = tf.expand_dims(ids_b.row_lengths() == 0, 1)
        return self._classify(self._checked({k: tf.where(no_b, single[k], pair[k])
                                             for k in pair}))
    else:
      @_signature([tf.TensorSpec([None], tf.string, name="text_a")])
      def raw_text(text_a):
        text_a = input_checks.after_checks(
            {"text_a": text_a}, [input_checks.layout_check("text_a", text_a, ("batch",))])
        return self._classify(self._checked(tokenizer(text_a["text_a"])))
    return raw_text


class MultipleChoiceServing(_ServingBase):
  """Serving signatures for an AlbertMultipleChoice (RACE). The raw-text signature packs
  article, question and options with text/multiple_choice_preprocessor.py's `encode_choices`,
  the rule the notebook model's preprocessor runs too."""

  def __init__(self, model, max_seq_length, max_qa_length, num_choices=4, text_tokenizer=None,
               label_names=("A", "B", "C", "D")):
    super().__init__(model, label_names, num_choices=num_choices)
    self.max_seq_length = max_seq_length
    self.max_qa_length = max_qa_length
    self.num_choices = num_choices
    self.text_tokenizer = text_tokenizer

  def token_ids_fn(self):
    @_signature([_id_spec([None, self.num_choices, None])] * 3)
    def token_ids(input_ids, input_mask, segment_ids):
      return self._classify(self._checked({"input_ids": input_ids, "input_mask": input_mask,
                                           "segment_ids": segment_ids}))
    return token_ids

  def tf_example_fn(self):
    shape = [-1, self.num_choices, self.max_seq_length]

    @_signature([tf.TensorSpec([None], tf.string, name="examples")])
    def tf_example(examples):
      parsed = _parse_examples(examples, self.num_choices * self.max_seq_length,
                               f"{self.num_choices} choices x max_seq_length")
      checked = self._checked({k: tf.reshape(v, shape) for k, v in parsed.items()})
      return self._classify({k: tf.cast(v, tf.int32) for k, v in checked.items()})
    return tf_example

  def raw_text_fn(self):
    tokenizer = self.text_tokenizer
    num_choices = self.num_choices

    @_signature([
        tf.TensorSpec([None], tf.string, name="article"),
        tf.TensorSpec([None], tf.string, name="question"),
        tf.TensorSpec([None, num_choices], tf.string, name="options")])
    def raw_text(article, question, options):
      texts = input_checks.after_checks(
          {"article": article, "question": question, "options": options}, [
              input_checks.layout_check("article", article, ("batch",)),
              input_checks.same_shape_check("question", question, "article", article, rank=1),
              input_checks.layout_check("options", options, ("batch", num_choices)),
              input_checks.batch_check("options", options, "article", article)])
      return self._classify(self._checked(encode_choices(
          tokenizer, texts["article"], texts["question"], texts["options"], self.max_seq_length,
          self.max_qa_length)))
    return raw_text


def _save(module, path, signatures, assets):
  """tf.saved_model.save with the given signatures and asset files copied into assets/."""
  module.assets = [tf.saved_model.Asset(p) for p in assets if p]
  tf.saved_model.save(module, path, signatures=signatures)


def write_serving_savedmodel(module, export_dir, identity, assets=(), measured=None):
  """Writes a new version `<export_dir>/<version>/` (all signatures, and `core_ops/` without
  tensorflow-text) atomically; returns the version directory.

  assets: files copied into the SavedModel's assets/ (SentencePiece model, albert_config.json).
  measured: how the export was made, for its info file (`saved_model_writer.MEASURED_KEYS`).
  """
  def write(tmp_dir):
    token_ids = module.token_ids_fn()
    tf_example = module.tf_example_fn()  # None: the module has no tf.Example signature
    signatures = {"token_ids": token_ids}
    if tf_example is not None:
      signatures["tf_example"] = tf_example
    core_signatures = dict(signatures, serving_default=token_ids)
    if module.text_tokenizer is not None:
      signatures["serving_default"] = module.raw_text_fn()
      if hasattr(module, "words_fn"):  # the token classifier's pre-split words
        signatures["words"] = module.words_fn()
    else:
      signatures["serving_default"] = token_ids
    staging = tmp_dir + "-assets"
    try:
      staged = stage_assets(staging, assets)
      _save(module, tmp_dir, signatures, staged)
      core = _CoreOpsModule(module)
      core_dir = os.path.join(tmp_dir, CORE_OPS_SUBDIR)
      _save(core, core_dir, core_signatures, staged)
      share_variables(tmp_dir, core_dir)
    finally:
      fileio.remove(staging)
  return write_new_version(export_dir, identity, write, measured)


def _checkpoint_keys(saved_model_dir):
  """{key: (shape, dtype)} of a SavedModel's variables, without the object-graph record."""
  # NewCheckpointReader, not tf.train.load_checkpoint: the latter fails on ram:// (fileio).
  reader = tf.compat.v1.train.NewCheckpointReader(
      os.path.join(saved_model_dir, "variables", "variables"))
  dtypes = reader.get_variable_to_dtype_map()
  return {key: (tuple(shape), dtypes[key])
          for key, shape in reader.get_variable_to_shape_map().items()
          if key != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def share_variables(main_dir, core_dir):
  """Makes `core_dir`'s variable files hard links to `main_dir`'s, so a version holds each
  weight once on disk; returns True if it did.

  Both SavedModels save the same variable objects under the same paths (`model_variables/...`);
  the main one only adds the tokenizer's objects. A SavedModel's restore matches the object
  graph by path from the root and ignores what it does not use, so core_ops/ restores from the
  main files as well as from its own. Linked only when every key of core_ops/ is in the main
  checkpoint with the same shape and dtype; otherwise core_ops/ keeps its own copy. So it does
  on an object store, which has no hard links (there a version stores its weights twice).
  """
  if not fileio.is_local(main_dir):
    return False
  core_keys, main_keys = _checkpoint_keys(core_dir), _checkpoint_keys(main_dir)
  if any(main_keys.get(key) != spec for key, spec in core_keys.items()):
    return False
  main_variables = os.path.join(main_dir, "variables")
  core_variables = os.path.join(core_dir, "variables")
  for name in fileio.listdir(core_variables):
    fileio.remove(os.path.join(core_variables, name))
  for name in fileio.listdir(main_variables):
    os.link(os.path.join(main_variables, name), os.path.join(core_variables, name))
  return True


class _CoreOpsModule(tf.Module):
  """The same model and label table, without the tokenizer (so no tensorflow-text ops)."""

  def __init__(self, serving_module):
    super().__init__()
    self.model_variables = serving_module.model_variables


def stage_assets(staging, assets):
  """Writes asset files into `staging` under fixed names; returns their paths.

  assets: (name, source) pairs; source is a file path to copy, or bytes to write (generated
  content such as albert_config.json). None sources are skipped.
  """
  fileio.makedirs(staging)
  staged = []
  for name, source in assets:
    if source is None:
      continue
    target = os.path.join(staging, name)
    if isinstance(source, bytes):
      fileio.write_bytes(target, source)
    else:
      fileio.copy(source, target)
    staged.append(target)
  return staged


def vocabulary_identity(spm_model_file, vocab_file):
  """A WordPiece vocabulary's SHA-1 for an export's identity (spm_model_sha1 is always there)."""
  return {} if spm_model_file or not vocab_file else {"vocab_sha1": file_sha1(vocab_file)}


def model_identity(kind, model, max_seq_length, spm_model_file, **extra):
  """What makes two exports 'the same model' (weights may differ: a newer fine-tuning run)."""
  identity = {"kind": kind, "albert_config": model.config.to_dict(),
              "max_seq_length": max_seq_length, "spm_model_sha1": file_sha1(spm_model_file)}
  identity.update(extra)
  return identity
