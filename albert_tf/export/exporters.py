"""Fine-tuned model -> TF Serving SavedModel (see `albert_tf.export.serving` for signatures)."""

from albert_tf.export import precision as precision_lib
from albert_tf.export import serving
from albert_tf.export.token_serving import TokenClassifierServing
from albert_tf.common.export_format import (CONFIG_ASSET_NAME, SPM_ASSET_NAME,
                                            WORDPIECE_VOCAB_ASSET_NAME)
from albert_tf.errors import AlbertError
from albert_tf.text.in_graph_wordpiece import make_in_graph_tokenizer


def _text_tokenizer(spm_model_file, vocab_file, max_seq_length, do_lower_case):
  """The in-graph tokenizer (SentencePiece, else WordPiece), or None without a vocabulary."""
  if not spm_model_file and not vocab_file:
    return None
  return make_in_graph_tokenizer(spm_model_file, vocab_file, max_seq_length=max_seq_length,
                                 do_lower_case=do_lower_case)


def _token_ids_probe(config, shape):
  """module -> one timing request of `shape` through its token_ids function (choose_serving)."""
  features = precision_lib.probe_features(config, shape)

  def probe(module):
    token_ids = module.token_ids_fn()
    return lambda: token_ids(**features)
  return probe


def _assets(model, spm_model_file, vocab_file):
  """The vocabulary travels with the export: the SentencePiece model, else the WordPiece one."""
  vocabulary = ((SPM_ASSET_NAME, spm_model_file) if spm_model_file else
                (WORDPIECE_VOCAB_ASSET_NAME, vocab_file))
  return [vocabulary, (CONFIG_ASSET_NAME, model.config.to_json_string().encode("utf-8"))]


def export_classifier(model, export_dir, label_list, max_seq_length, spm_model_file=None,
                      do_lower_case=True, task_name=None, text_pair=True, precision="fp32",
                      threshold=None, vocab_file=None):
  """Writes an AlbertClassifier as a new TF Serving version `<export_dir>/<version>/`.

  Args:
    model: AlbertClassifier with its fine-tuned weights.
    label_list: label names (empty for regression).
    max_seq_length: sequence length of the raw-text and tf.Example signatures.
    spm_model_file: SentencePiece model for the raw-text signature.
    vocab_file: WordPiece vocabulary (the official Chinese models) for the raw-text signature
      when there is no spm_model_file; with neither, only the token-id and tf.Example signatures
      are written.
    text_pair: raw-text signature takes text_a and text_b (else text_a only).
    precision: compute precision of the export, "fp32", "bf16", or "auto" (the faster of the
      two on this machine, timed at batch 1; the timings go into the export's info as
      `precision_choice`). See export/precision.py.
    threshold: the official --threshold_to_export: returned as `threshold` by every signature.
  Returns:
    the absolute path of the version directory written.
  """
  text_tokenizer = _text_tokenizer(spm_model_file, vocab_file, max_seq_length, do_lower_case)
  module, measured = precision_lib.choose_serving(
      model, precision,
      lambda copy: serving.ClassifierServing(copy, label_list, max_seq_length, text_tokenizer,
                                             text_pair=text_pair, threshold=threshold),
      _token_ids_probe(model.config, [1, max_seq_length]),
      f"token_ids, batch 1 x {max_seq_length} tokens")
  # Early exit changes the outputs (exit_layer) and, with the patience, the answers.
  early_exit = ({"early_exit": model.early_exit, "early_exit_patience": model.patience}
                if getattr(model, "early_exit", None) else {})
  identity = serving.model_identity(
      "albert_classifier", model, max_seq_length, spm_model_file, task=task_name,
      labels=list(label_list), text_pair=bool(text_pair), do_lower_case=bool(do_lower_case),
      precision=precision, **early_exit,
      **serving.vocabulary_identity(spm_model_file, vocab_file))
  return serving.write_serving_savedmodel(module, export_dir, identity,
                                          _assets(model, spm_model_file, vocab_file),
                                          measured)


def export_multiple_choice(model, export_dir, max_seq_length, max_qa_length,
                           spm_model_file=None, do_lower_case=True, precision="fp32",
                           vocab_file=None):
  """Writes an AlbertMultipleChoice (RACE) as a new TF Serving version `<export_dir>/<version>/`.

  Raw-text signature inputs: article [batch], question [batch], options [batch, 4].
  precision, vocab_file: as for `export_classifier`.
  """
  text_tokenizer = _text_tokenizer(spm_model_file, vocab_file, max_seq_length, do_lower_case)
  module, measured = precision_lib.choose_serving(
      model, precision,
      lambda copy: serving.MultipleChoiceServing(copy, max_seq_length, max_qa_length,
                                                 num_choices=model.num_choices,
                                                 text_tokenizer=text_tokenizer),
      _token_ids_probe(model.config, [1, model.num_choices, max_seq_length]),
      f"token_ids, batch 1 x {model.num_choices} choices x {max_seq_length} tokens")
  identity = serving.model_identity(
      "albert_multiple_choice", model, max_seq_length, spm_model_file, task="race",
      num_choices=model.num_choices, max_qa_length=max_qa_length,
      do_lower_case=bool(do_lower_case), precision=precision,
      **serving.vocabulary_identity(spm_model_file, vocab_file))
  return serving.write_serving_savedmodel(module, export_dir, identity,
                                          _assets(model, spm_model_file, vocab_file),
                                          measured)


def export_token_classifier(model, export_dir, label_list, max_seq_length, spm_model_file,
                            do_lower_case=True):
  """Writes an AlbertTokenClassifier (NER) as a new TF Serving version `<export_dir>/<version>/`:
  serving_default on raw text (entities with character offsets), token_ids, and core_ops/ with
  token_ids alone (export/token_serving.py). Returns the version directory.

  Raises:
    AlbertError: no SentencePiece model (the raw-text signature needs one).
  """
  if not spm_model_file:
    raise AlbertError("--export_dir of a token classifier needs --spm_model_file (its "
                      "serving_default tokenizes raw text in the graph)")
  module = TokenClassifierServing(model, label_list, max_seq_length,
                                  _text_tokenizer(spm_model_file, None, max_seq_length,
                                                  do_lower_case))
  identity = serving.model_identity("albert_token_classifier", model, max_seq_length,
                                    spm_model_file, labels=list(label_list),
                                    do_lower_case=bool(do_lower_case))
  return serving.write_serving_savedmodel(module, export_dir, identity,
                                          _assets(model, spm_model_file, None))
