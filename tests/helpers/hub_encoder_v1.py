"""Test helper: the encoder export as export_savedmodel.py wrote it before the TF Hub Reusable
SavedModel API (a frozen copy of that writer), so tests can check that --albert_hub_module_handle
still reads exports made by earlier versions. Signatures tokens / sop / mlm / tokenization_info
only; the pretrainer's variables at `model_variables/<i>`.
"""

import os
import shutil

import tensorflow as tf

from albert_tf.export import input_checks
from albert_tf.export import serving
from albert_tf.export.saved_model_writer import write_atomically
from albert_tf.common.export_format import CONFIG_ASSET_NAME, SPM_ASSET_NAME, VOCAB_ASSET_NAME

_IDS = tf.TensorSpec([None, None], tf.int32)
class HubEncoderModule(tf.Module):
  """Wraps an AlbertPretrainer; exposes the official TF-Hub module's signatures."""

  def __init__(self, pretrainer, spm_asset, do_lower_case):
    super().__init__()
    # Weights tracked directly (not the Keras model, whose layer functions would all be traced
    # into the SavedModel); the model is called through a closure.
    self.model_variables = list(pretrainer.variables)
    self._run_model = lambda inputs: pretrainer(inputs, training=False)
    self._config = pretrainer.config
    self.vocab_file = spm_asset
    self.do_lower_case = tf.constant(bool(do_lower_case))

  def _encode(self, input_ids, input_mask, segment_ids, positions=None):
    inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
    checks = input_checks.token_input_checks(inputs, self._config)
    if positions is not None:
      checks += input_checks.position_checks("mlm_positions", positions, input_ids)
      inputs["masked_lm_positions"] = positions
    outputs = self._run_model(input_checks.after_checks(inputs, checks))
    return outputs, {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
                     "pooled_output": tf.cast(outputs["pooled_output"], tf.float32)}

  @tf.function(input_signature=[_IDS, _IDS, _IDS])
  def tokens(self, input_ids, input_mask, segment_ids):
    return self._encode(input_ids, input_mask, segment_ids)[1]

  @tf.function(input_signature=[_IDS, _IDS, _IDS])
  def sop(self, input_ids, input_mask, segment_ids):
    outputs, result = self._encode(input_ids, input_mask, segment_ids)
    result["sop_log_probs"] = tf.nn.log_softmax(tf.cast(outputs["sop_logits"], tf.float32))
    return result

  @tf.function(input_signature=[_IDS, _IDS, _IDS, _IDS])
  def mlm(self, input_ids, input_mask, segment_ids, mlm_positions):
    outputs, result = self._encode(input_ids, input_mask, segment_ids, mlm_positions)
    result["mlm_logits"] = tf.cast(outputs["mlm_logits"], tf.float32)
    return result

  @tf.function(input_signature=[])
  def tokenization_info(self):
    return {"vocab_file": self.vocab_file.asset_path
                          if self.vocab_file is not None else tf.constant(""),
            "do_lower_case": self.do_lower_case}


def export_encoder_v1(pretrainer, export_dir, spm_model_file=None, do_lower_case=True):
  """Writes the earlier TF-Hub style encoder SavedModel atomically; returns the export dir.

  pretrainer: an AlbertPretrainer holding the pretrained weights (encoder + MLM + SOP heads).
  """
  from albert_tf.checkpoints import official_names  # pylint: disable=g-import-not-at-top
  official = {id(v): n for n, v in official_names.model_variable_map(pretrainer).items()}
  # The SavedModel stores the weights by position (model_variables/<i>); their official names
  # let --albert_hub_module_handle map them back without relying on the variable order.
  identity = serving.model_identity("albert_hub_encoder", pretrainer, None, spm_model_file,
                                    do_lower_case=bool(do_lower_case),
                                    tf1_variable_names=[official.get(id(v), "")
                                                        for v in pretrainer.variables])
  vocab = (os.path.splitext(spm_model_file)[0] + ".vocab") if spm_model_file else None

  def write(tmp_dir):
    staging = tmp_dir + "-assets"
    try:
      staged = serving.stage_assets(staging, [
          (SPM_ASSET_NAME, spm_model_file),
          (VOCAB_ASSET_NAME, vocab if vocab and os.path.exists(vocab) else None),
          (CONFIG_ASSET_NAME, pretrainer.config.to_json_string().encode("utf-8"))])
      assets = [tf.saved_model.Asset(p) for p in staged]
      spm_asset = next((a for a, p in zip(assets, staged)
                        if os.path.basename(p) == SPM_ASSET_NAME), None)
      module = HubEncoderModule(pretrainer, spm_asset, do_lower_case)
      module.assets = assets
      tf.saved_model.save(module, tmp_dir, signatures={
          "serving_default": module.tokens, "tokens": module.tokens, "sop": module.sop,
          "mlm": module.mlm, "tokenization_info": module.tokenization_info})
    finally:
      shutil.rmtree(staging, ignore_errors=True)
  return write_atomically(export_dir, identity, write)
