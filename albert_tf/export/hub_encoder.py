"""The pretrained encoder as a TF-Hub style SavedModel (the official export_to_tfhub.py, TF2).

Signatures (inputs int32 [batch, seq_len] input_ids, input_mask, segment_ids):
  tokens             -> sequence_output [batch, seq_len, hidden], pooled_output [batch, hidden]
  sop                -> + sop_log_probs [batch, 2]
  mlm (+ mlm_positions int32 [batch, num_positions])
                     -> + mlm_logits [batch, num_positions, vocab]
  tokenization_info  -> vocab_file (the SentencePiece model asset path), do_lower_case
  serving_default    =  tokens
`sop` and `mlm` are written only when the checkpoint held that head (export_encoder's `heads`):
a classifier's checkpoint exports `tokens` and `tokenization_info` alone.
Every signature checks its inputs first (`albert_tf.export.input_checks`): one shape for the
three, ids in the vocabulary, segment ids below type_vocab_size, input_mask 0 or 1, seq_len at
most max_position_embeddings, mlm_positions [batch, num_positions] within [0, seq_len); anything
else is an InvalidArgumentError naming the input.
Assets: the SentencePiece model (30k-clean.model, + 30k-clean.vocab when present next to it)
and albert_config.json. Only core TensorFlow ops: loads without tensorflow-text or albert_tf.

It is also a Reusable SavedModel with TF Hub's "Transformer encoder" API (as
tfhub.dev/tensorflow/albert_en_base/3), for `hub.KerasLayer(export, trainable=True)`:
  obj(dict(input_word_ids, input_mask, input_type_ids), training=False)   int32 [batch, seq_len]
      -> pooled_output [batch, H], sequence_output [batch, seq_len, H],
         encoder_outputs (L * K tensors [batch, seq_len, H]), default (= pooled_output)
  obj.mlm(dict(..., masked_lm_positions int32 [batch, P]), training=False)
      -> the same + mlm_logits [batch, P, vocab]
  obj.variables, obj.trainable_variables (the encoder's, pooler included),
  obj.regularization_losses (empty); obj.mlm has its own (the encoder's + the MLM head's).
Dropout follows `training`; the same input checks run as for the signatures. Outputs float32.
"""

import os

import tensorflow as tf

from albert_tf.common import fileio
from albert_tf.checkpoints import official_names
from albert_tf.export import input_checks
from albert_tf.export import serving
from albert_tf.export.saved_model_writer import write_atomically
from albert_tf.common.export_format import (CONFIG_ASSET_NAME, SPM_ASSET_NAME, VOCAB_ASSET_NAME,
                                            WORDPIECE_VOCAB_ASSET_NAME)

_IDS = tf.TensorSpec([None, None], tf.int32)
# The signatures that need a pretraining head: each is written only when the checkpoint held
# its head (`heads=` of export_encoder), never with a head at its random initial value.
MLM, SOP = "mlm", "sop"
PRETRAINING_SIGNATURES = (MLM, SOP)


_HUB_INPUTS = {"input_word_ids": _IDS, "input_mask": _IDS, "input_type_ids": _IDS}
_HUB_MLM_INPUTS = dict(_HUB_INPUTS, masked_lm_positions=_IDS)
# TF Hub's input names -> ours.
_HUB_NAMES = {"input_word_ids": "input_ids", "input_mask": "input_mask",
              "input_type_ids": "segment_ids", "masked_lm_positions": "masked_lm_positions"}

# AutoTrackable, not tf.Module: the Reusable SavedModel API wants plain `variables` and
# `trainable_variables` attributes, which tf.Module reserves for computed properties.
_Trackable = tf.__internal__.tracking.AutoTrackable


def _hub_outputs(outputs):
  """Our model's outputs -> the TF Hub encoder's output dict (float32)."""
  pooled = tf.cast(outputs["pooled_output"], tf.float32)
  return {"pooled_output": pooled, "default": pooled,
          "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
          "encoder_outputs": [tf.cast(t, tf.float32) for t in outputs["encoder_outputs"]]}


def _checked_inputs(inputs, config):
  """TF Hub named inputs -> our names, gated on the serving input checks."""
  ours = {_HUB_NAMES[k]: v for k, v in inputs.items()}
  checks = input_checks.token_input_checks(
      {k: ours[k] for k in input_checks.TOKEN_INPUTS}, config)
  if "masked_lm_positions" in ours:
    checks += input_checks.position_checks("masked_lm_positions", ours["masked_lm_positions"],
                                           ours["input_ids"])
  return input_checks.after_checks(ours, checks)


class _HubCallable(_Trackable):
  """A Reusable SavedModel object: `__call__(inputs, training)`, `variables`,
  `trainable_variables`, `regularization_losses`."""

  def __init__(self, model, config, input_specs, with_mlm):
    super().__init__()
    self.variables = list(model.variables)
    self.trainable_variables = list(model.trainable_variables)
    self.regularization_losses = []
    # The Keras model is reached through a closure, not tracked (see HubEncoderModule).
    self._run = lambda inputs, training: model(inputs, training=training)
    self._config = config
    self._with_mlm = with_mlm

    @tf.function(autograph=False)
    def call(inputs, training=False):
      outputs = self._run(_checked_inputs(inputs, self._config), training)
      result = _hub_outputs(outputs)
      if self._with_mlm:
        result["mlm_logits"] = tf.cast(outputs["mlm_logits"], tf.float32)
      return result

    self.__call__ = call
    for training in (False, True):  # both traces are saved; the caller's `training` picks one
      call.get_concrete_function(input_specs, training=training)


def _run_pretrainer(pretrainer, inputs, head):
  """The pretrainer's encoder and only `head` (MLM, SOP or None), as AlbertPretrainer.call
  computes them: a signature captures no variable of a head it does not serve."""
  outputs = dict(pretrainer.encoder(inputs, training=False))
  if head == MLM:
    outputs["mlm_logits"] = pretrainer.masked_lm_head(
        outputs["sequence_output"], pretrainer.encoder.embeddings.word_embeddings,
        positions=inputs["masked_lm_positions"])
  elif head == SOP:
    outputs["sop_logits"] = pretrainer.sentence_order_head(outputs["pooled_output"])
  return outputs


def stored_variables(pretrainer, heads=PRETRAINING_SIGNATURES):
  """The pretrainer's variables an export stores: the encoder's and those of `heads`' heads."""
  parts = [pretrainer.encoder] + [head for name, head in (
      (MLM, pretrainer.masked_lm_head), (SOP, pretrainer.sentence_order_head)) if name in heads]
  keep = {id(v) for part in parts for v in part.variables}
  return [v for v in pretrainer.variables if id(v) in keep]


class HubEncoderModule(_Trackable):
  """Wraps an AlbertPretrainer; exposes the official TF-Hub module's signatures and TF Hub's
  Reusable SavedModel encoder API (`__call__`, and `mlm` when the MLM head is in `heads`)."""

  def __init__(self, pretrainer, spm_asset, do_lower_case, heads=PRETRAINING_SIGNATURES):
    super().__init__()
    # Weights tracked directly (not the Keras model, whose layer functions would all be traced
    # into the SavedModel); the model is called through a closure. Assigned first, so that the
    # checkpoint keys stay `model_variables/<i>` (what --albert_hub_module_handle reads).
    self.model_variables = stored_variables(pretrainer, heads)
    self._run_model = lambda inputs, head: _run_pretrainer(pretrainer, inputs, head)
    self._config = pretrainer.config
    self.vocab_file = spm_asset
    self.do_lower_case = tf.constant(bool(do_lower_case))
    encoder = _HubCallable(pretrainer.encoder, pretrainer.config, _HUB_INPUTS, with_mlm=False)
    self.variables = encoder.variables
    self.trainable_variables = encoder.trainable_variables
    self.regularization_losses = encoder.regularization_losses
    self.__call__ = encoder.__call__
    # The signatures of the heads held only: a tf.function attribute is saved (and traced)
    # whether or not it is a signature, and would capture the other heads' variables.
    if SOP in heads:
      self.sop = tf.function(self._sop, autograph=False, input_signature=[_IDS, _IDS, _IDS])
    if MLM in heads:
      self.mlm_signature = tf.function(self._mlm_signature, autograph=False,
                                       input_signature=[_IDS, _IDS, _IDS, _IDS])
      self.mlm = _HubCallable(_MlmModel(pretrainer), pretrainer.config, _HUB_MLM_INPUTS,
                              with_mlm=True)

  def _encode(self, input_ids, input_mask, segment_ids, positions=None, head=None):
    inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
    checks = input_checks.token_input_checks(inputs, self._config)
    if positions is not None:
      checks += input_checks.position_checks("mlm_positions", positions, input_ids)
      inputs["masked_lm_positions"] = positions
    outputs = self._run_model(input_checks.after_checks(inputs, checks), head)
    return outputs, {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
                     "pooled_output": tf.cast(outputs["pooled_output"], tf.float32)}

  @tf.function(autograph=False, input_signature=[_IDS, _IDS, _IDS])
  def tokens(self, input_ids, input_mask, segment_ids):
    return self._encode(input_ids, input_mask, segment_ids)[1]

  def _sop(self, input_ids, input_mask, segment_ids):
    outputs, result = self._encode(input_ids, input_mask, segment_ids, head=SOP)
    result["sop_log_probs"] = tf.nn.log_softmax(tf.cast(outputs["sop_logits"], tf.float32))
    return result

  def _mlm_signature(self, input_ids, input_mask, segment_ids, mlm_positions):
    """The official `mlm` signature (the `mlm` attribute is TF Hub's MLM sub-object)."""
    outputs, result = self._encode(input_ids, input_mask, segment_ids, mlm_positions, head=MLM)
    result["mlm_logits"] = tf.cast(outputs["mlm_logits"], tf.float32)
    return result

  @tf.function(autograph=False, input_signature=[])
  def tokenization_info(self):
    return {"vocab_file": self.vocab_file.asset_path
                          if self.vocab_file is not None else tf.constant(""),
            "do_lower_case": self.do_lower_case}


class _MlmModel:
  """The pretrainer without its sentence-order head: what TF Hub's `mlm` sub-object runs.

  variables: the encoder's and the MLM head's (the decoder is the tied word embeddings).
  """

  def __init__(self, pretrainer):
    self._pretrainer = pretrainer
    head = pretrainer.masked_lm_head
    self.variables = list(pretrainer.encoder.variables) + list(head.variables)
    self.trainable_variables = (list(pretrainer.encoder.trainable_variables)
                                + list(head.trainable_variables))

  def __call__(self, inputs, training):
    p = self._pretrainer
    outputs = dict(p.encoder(inputs, training=training))
    outputs["mlm_logits"] = p.masked_lm_head(outputs["sequence_output"],
                                             p.encoder.embeddings.word_embeddings,
                                             positions=inputs["masked_lm_positions"])
    return outputs


def export_encoder(pretrainer, export_dir, spm_model_file=None, do_lower_case=True,
                   heads=PRETRAINING_SIGNATURES, vocab_file=None):
  """Writes the TF-Hub style encoder SavedModel atomically; returns the export dir.

  pretrainer: an AlbertPretrainer holding the pretrained weights.
  vocab_file: a WordPiece model's vocabulary (no spm_model_file): the asset vocab.txt, which
    tokenization_info's vocab_file names (as TF Hub's BERT encoders do).
  heads: the pretraining heads that hold real weights (PRETRAINING_SIGNATURES): the `mlm`
    signature (and TF Hub's `mlm` object) and the `sop` signature are written only for these;
    the other heads' variables are not stored.
  """
  official = {id(v): n for n, v in official_names.model_variable_map(pretrainer).items()}
  # The SavedModel stores the weights by position (model_variables/<i>); their official names
  # let --albert_hub_module_handle map them back without relying on the variable order.
  identity = serving.model_identity("albert_hub_encoder", pretrainer, None, spm_model_file,
                                    do_lower_case=bool(do_lower_case),
                                    tf1_variable_names=[official.get(id(v), "") for v in
                                                        stored_variables(pretrainer, heads)],
                                    **serving.vocabulary_identity(spm_model_file, vocab_file))
  vocab = (os.path.splitext(spm_model_file)[0] + ".vocab") if spm_model_file else None

  def write(tmp_dir):
    staging = tmp_dir + "-assets"
    try:
      staged = serving.stage_assets(staging, [
          (SPM_ASSET_NAME, spm_model_file),
          (VOCAB_ASSET_NAME, vocab if vocab and fileio.exists(vocab) else None),
          (WORDPIECE_VOCAB_ASSET_NAME, None if spm_model_file else vocab_file),
          (CONFIG_ASSET_NAME, pretrainer.config.to_json_string().encode("utf-8"))])
      assets = [tf.saved_model.Asset(p) for p in staged]
      spm_asset = next((a for a, p in zip(assets, staged) if os.path.basename(p) in (
          SPM_ASSET_NAME, WORDPIECE_VOCAB_ASSET_NAME)), None)
      module = HubEncoderModule(pretrainer, spm_asset, do_lower_case, heads)
      module.assets = assets
      signatures = {"serving_default": module.tokens, "tokens": module.tokens,
                    "tokenization_info": module.tokenization_info}
      if SOP in heads:
        signatures[SOP] = module.sop
      if MLM in heads:
        signatures[MLM] = module.mlm_signature
      tf.saved_model.save(module, tmp_dir, signatures=signatures)
    finally:
      fileio.remove(staging)
  return write_atomically(export_dir, identity, write)
