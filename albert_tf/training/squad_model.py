"""QuestionAnswerer: SQuAD v1.1 / v2.0 from a notebook, run_squad.py's features, recipe,
post-processing and files.

  model = albert_tf.QuestionAnswerer.from_pretrained("albert_base", version_2_with_negative=True)
  model.compile()                         # run_squad.py's recipe: AdamW 5e-5, its span loss
  model.fit((questions, contexts), answers, epochs=2, batch_size=32)
  #   answers: (answer_text, answer_start) per question, as SQuAD JSON; None: no answer (v2.0)
  model.predict_answers(questions, contexts)     # [{"text": ..., "probability": ...}, ...]
  model.evaluate_answers(questions, contexts, answers)   # the official exact_match / F1
  model.save_for_serving("export/")       # the SavedModel run_squad.py --export_dir writes
  model.save_checkpoint("out/model.ckpt-best")   # official TF1 layout; from_pretrained reads it

Why fit() takes the features path (the script's windows, made in Python, not strings in the
graph): one question on a long context is several windows of `[CLS] question [SEP] passage
window [SEP]`, each a row of the model's with its own start/end positions (or [CLS] when the
window misses the answer), and the answers come back from those windows through n-best
post-processing on the piece-to-character maps; both are data/squad.py's and
data/squad_postprocess.py's code, which run_squad.py uses, called here. So questions, contexts
and answers become the script's features first (data/squad.py's convert_examples_to_features)
and Keras trains on those arrays; predict_answers runs the model on the windows and the script's
post-processing on its outputs (n_best_size, max_answer_length, v2.0's null score threshold).

The loss is the task's (tasks/squad.py: start/end cross-entropy, v2.0 plus half the
answerability loss), averaged over the global batch; there is no Keras metric (the script
reports the official SQuAD metric only: evaluate_answers).
"""

import os

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf import pretrained as pretrained_lib
from albert_tf.common import kinds
from albert_tf.config import AlbertConfig
from albert_tf.data import squad, squad_postprocess
from albert_tf.errors import AlbertError
from albert_tf.export.squad_serving import export_squad_model
from albert_tf.models.squad import AlbertSquadModel
from albert_tf.tasks.squad import squad_per_example_losses
from albert_tf.text.preprocessor import AlbertPreprocessor
from albert_tf.text.tokenization import make_tokenizer
from albert_tf.training.raw_text_model import AlbertTextError
from albert_tf.training.raw_text_model import as_text_column
from albert_tf.training.windowed_model import WindowedModel

_MODEL_FEATURES = ("input_ids", "input_mask", "segment_ids", "p_mask")
# The labels' names in the feature TFRecords -> SquadFeature's fields.
_LABELS = {"start_positions": "start_position", "end_positions": "end_position",
           "is_impossible": "is_impossible"}


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class QuestionAnswerer(WindowedModel):
  """(question, context) strings in, answer spans out: run_squad.py's AlbertSquadModel.

  Keras sees the script's windows: inputs dict of int32 input_ids / input_mask / segment_ids /
  p_mask [windows, sequence_length] (v2.0 training also start_positions [windows]); labels
  start_positions, end_positions, is_impossible [windows]; call() returns AlbertSquadModel's
  outputs (v1.1 start_logits / end_logits; v2.0 the beam outputs and cls_logits). fit, evaluate
  and predict take (questions, contexts) with answers, and make the windows first.

  Attributes:
    preprocessor: the AlbertPreprocessor of the model's vocabulary (its SentencePiece model,
      lower-casing and sequence_length; the windows are made by tokenizer and data/squad.py).
    tokenizer: the scripts' FullTokenizer.
    squad_model: the AlbertSquadModel (what run_squad.py trains, exports and saves).
    version_2_with_negative, doc_stride, max_query_length, n_best_size, max_answer_length,
    null_score_diff_threshold: run_squad.py's flags of the same names.
  """

  def __init__(self, config, spm_model_file, sequence_length=384, doc_stride=128,
               max_query_length=64, version_2_with_negative=False, start_n_top=5, end_n_top=5,
               n_best_size=20, max_answer_length=30, null_score_diff_threshold=None,
               do_lower_case=True, dropout_rate=0.1, **kwargs):
    kwargs.setdefault("name", "question_answerer")
    super().__init__(**kwargs)
    config = config if isinstance(config, AlbertConfig) else AlbertConfig.from_dict(config)
    config.check_sequence_length(sequence_length)
    squad.check_window_lengths(sequence_length, max_query_length, doc_stride)
    for name, value in (("n_best_size", n_best_size), ("max_answer_length", max_answer_length),
                        ("start_n_top", start_n_top), ("end_n_top", end_n_top)):
      if value <= 0:
        raise AlbertError(f"{name}={value}: expected > 0")
    self.preprocessor = AlbertPreprocessor(spm_model_file, sequence_length=sequence_length,
                                           do_lower_case=do_lower_case)
    self.tokenizer = make_tokenizer(spm_model_file, do_lower_case=do_lower_case,
                                    albert_config=config)
    self.squad_model = AlbertSquadModel(config, version_2_with_negative=version_2_with_negative,
                                        start_n_top=start_n_top, end_n_top=end_n_top,
                                        dropout_rate=dropout_rate)
    self.doc_stride = int(doc_stride)
    self.max_query_length = int(max_query_length)
    self.n_best_size = int(n_best_size)
    self.max_answer_length = int(max_answer_length)
    self.null_score_diff_threshold = null_score_diff_threshold
    # The task's loss, reported as Keras reports a compiled loss (kept out of Keras' own
    # tracking, which would report it beside a loss given to compile()).
    self.__dict__["_loss_tracker"] = tf_keras.metrics.Mean(name="loss")

  @property
  def task_model(self):
    return self.squad_model

  @property
  def version_2_with_negative(self):
    return self.squad_model.version_2_with_negative

  @property
  def sequence_length(self):
    return self.preprocessor.sequence_length

  # ------------------------------------------------------------------ loading
  @classmethod
  def from_pretrained(cls, path, version_2_with_negative=None, sequence_length=384, seed=None,
                      albert_config_file=None, spm_model_file=None, do_lower_case=None,
                      **kwargs):
    """A QuestionAnswerer on the weights at `path` (anything albert_tf.from_pretrained reads).

    A pretrained encoder gets a new head (v1.1, or v2.0 with version_2_with_negative=True),
    initialised as run_squad.py's (seeded by `seed` when given); a fine-tuned SQuAD model
    (official or ours) keeps its head and version. kwargs: the constructor's (doc_stride,
    max_query_length, n_best_size, max_answer_length, null_score_diff_threshold, start_n_top,
    end_n_top, dropout_rate).
    """
    loaded = pretrained_lib.from_pretrained(path, albert_config_file=albert_config_file,
                                            spm_model_file=spm_model_file,
                                            do_lower_case=do_lower_case)
    cls._check_sentencepiece(loaded, path)
    fine_tuned = loaded.model_type in kinds.SQUAD_KINDS
    if fine_tuned:
      held = loaded.model_type == kinds.SQUAD_V2
      if version_2_with_negative is not None and bool(version_2_with_negative) != held:
        raise AlbertError(f"{path}: its head is SQuAD {'v2.0' if held else 'v1.1'}'s, not "
                          f"version_2_with_negative={version_2_with_negative}")
      version_2_with_negative = held
    if seed is not None:
      tf_keras.utils.set_random_seed(int(seed))  # the head's initial weights, then dropout
    model = cls(loaded.config, loaded.tokenizer.spm_model_file, sequence_length=sequence_length,
                version_2_with_negative=bool(version_2_with_negative),
                do_lower_case=loaded.tokenizer.do_lower_case, **kwargs)
    model._take_weights(loaded, fine_tuned)  # pylint: disable=protected-access
    return model

  # ------------------------------------------------------------------ the forward pass
  def call(self, inputs, training=None):
    return self.squad_model(inputs, training=training)

  # ------------------------------------------------------------------ texts -> the script's windows
  def _questions_contexts(self, x):
    if not (isinstance(x, (tuple, list)) and len(x) == 2 and not isinstance(x[0], str)
            and not isinstance(x[1], str)):
      raise AlbertTextError("expected x=(questions, contexts): two lists of strings")
    questions, contexts = as_text_column(x[0], "questions"), as_text_column(x[1], "contexts")
    if len(questions) != len(contexts):
      raise AlbertError(f"{len(questions)} questions but {len(contexts)} contexts")
    if not len(questions):
      raise AlbertError("questions: none given")
    return ([tf.compat.as_text(q) for q in questions],
            [tf.compat.as_text(c) for c in contexts])

  def _qas(self, index, question, answer):
    """One question as SQuAD JSON's "qas" entry; answer (text, answer_start), a dict with
    "text" and "answer_start", or None (no answer: v2.0)."""
    qa = {"id": str(index), "question": question}
    if answer is None:
      if not self.version_2_with_negative:
        raise AlbertError(f"answers[{index}]: no answer, but a SQuAD v1.1 model trains on "
                          "answerable questions (version_2_with_negative=True for v2.0)")
      return dict(qa, answers=[], is_impossible=True)
    if isinstance(answer, dict):
      answer = (answer.get("text"), answer.get("answer_start"))
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2):
      raise AlbertError(f"answers[{index}]: expected (answer_text, answer_start) or None")
    text, start = answer
    if not isinstance(text, str):
      raise AlbertTextError(f"answers[{index}]: the answer text should be a string, got "
                            f"{type(text).__name__}")
    if isinstance(start, bool) or not isinstance(start, (int, np.integer)):
      raise AlbertError(f"answers[{index}]: answer_start should be a character offset (int), "
                        f"got {type(start).__name__}")
    return dict(qa, answers=[{"text": text, "answer_start": int(start)}], is_impossible=False)

  def _squad_data(self, questions, contexts, answers):
    """SQuAD JSON's "data" list of the questions (with their answers, when given)."""
    if answers is not None and (isinstance(answers, str) or len(answers) != len(questions)):
      raise AlbertError(f"expected one answer per question ({len(questions)}), got "
                        f"{'a string' if isinstance(answers, str) else len(answers)}")
    paragraphs = []
    for i, (question, context) in enumerate(zip(questions, contexts)):
      qa = (self._qas(i, question, answers[i]) if answers is not None
            else {"id": str(i), "question": question})
      paragraphs.append({"context": context, "qas": [qa]})
    return [{"paragraphs": paragraphs}]

  def examples(self, x, answers=None):
    """(questions, contexts) and answers -> the script's SquadExamples (data/squad.py's reader
    on the same JSON). Raises AlbertError naming the first answer whose text is not at its
    answer_start in its context (the script skips those with a warning)."""
    questions, contexts = self._questions_contexts(x)
    data = self._squad_data(questions, contexts, answers)
    examples, _ = squad.parse_squad_examples(data, answers is not None, source="answers")
    found = {example.qas_id for example in examples}
    for i, (context, answer) in enumerate(zip(contexts, answers or [])):
      if str(i) not in found:
        answer = data[0]["paragraphs"][i]["qas"][0]["answers"][0]
        text, start = answer["text"], answer["answer_start"]
        raise AlbertError(f"answers[{i}]: {text!r} is not at answer_start {start} of "
                          f"contexts[{i}] (which has {context[start:start + len(text)]!r} "
                          "there)")
    return examples

  def features(self, examples, is_training):
    """SquadExamples -> (SquadFeatures, Keras inputs dict, labels dict or None): the script's
    windows (data/squad.py's convert_examples_to_features) as int32 arrays [windows, ...]."""
    features = list(squad.convert_examples_to_features(
        examples, self.tokenizer, self.sequence_length, self.doc_stride, self.max_query_length,
        is_training=is_training, log_every=0))
    inputs = {k: np.array([getattr(f, k) for f in features], np.int32) for k in _MODEL_FEATURES}
    if not is_training:
      return features, inputs, None
    labels = {key: np.array([int(getattr(f, field)) for f in features], np.int32)
              for key, field in _LABELS.items()}
    if self.version_2_with_negative:  # the v2.0 end head is conditioned on the gold start
      inputs["start_positions"] = labels["start_positions"]
    return features, inputs, labels

  def _keras_data(self, x, y):
    """fit/evaluate's (x, y) -> the windows' (inputs, labels) Keras trains on."""
    if isinstance(x, (dict, tf.data.Dataset)):  # already the script's features
      return x, y
    _, inputs, labels = self.features(self.examples(x, y), is_training=True)
    return inputs, labels

  # ------------------------------------------------------------------ the recipe
  def compile(self, optimizer="adamw", num_warmup_steps=None, warmup_proportion=0.1, **kwargs):
    """RawTextModel.compile with run_squad.py's warm-up: `warmup_proportion` (its flag, 0.1) of
    the schedule's steps, int(steps * proportion) as the runner counts them, unless
    num_warmup_steps is given."""
    if not 0 <= warmup_proportion <= 1:
      raise AlbertError(f"warmup_proportion={warmup_proportion}: expected 0..1")
    self.__dict__["_warmup_proportion"] = (warmup_proportion if num_warmup_steps is None
                                           else None)
    super().compile(optimizer, num_warmup_steps=num_warmup_steps or 0, **kwargs)

  def _official_optimizer(self, recipe, num_train_steps):
    proportion = self.__dict__.get("_warmup_proportion")
    if proportion is not None:
      recipe = dict(recipe, num_warmup_steps=int(num_train_steps * proportion))
    return super()._official_optimizer(recipe, num_train_steps)

  # ------------------------------------------------------------------ the task's half
  def _default_loss(self):
    return None  # the task's loss: compute_loss

  def _default_metrics(self):
    return None  # (the SQuAD metric compares answer texts: evaluate_answers)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
    """With compile()'s default loss: run_squad.py's, the task's per-window total averaged
    over the global batch; with a loss given to compile(): Keras' own."""
    if self.loss:
      return super().compute_loss(x, y, y_pred, sample_weight)
    per_window = squad_per_example_losses(y, y_pred, self.version_2_with_negative)["total"]
    self.__dict__["_loss_tracker"].update_state(per_window, sample_weight=sample_weight)
    loss = tf.nn.compute_average_loss(per_window, sample_weight=sample_weight)
    return loss + tf.add_n(self.losses) if self.losses else loss

  def compute_metrics(self, x, y, y_pred, sample_weight):
    """With the task's loss, the labels (start/end positions) name no output of the model, so
    there is no Keras metric to update (the task has none); else Keras' own."""
    if self.loss:
      return super().compute_metrics(x, y, y_pred, sample_weight)
    return self.get_metrics_result()

  @property
  def metrics(self):
    tracked = super().metrics
    if getattr(self, "compiled_loss", None) is not None and not self.loss:
      tracked = [self.__dict__["_loss_tracker"]] + tracked
    return tracked

  def predict(self, x, **kwargs):
    """The model's outputs per window (a dict of arrays [windows, ...]) of x=(questions,
    contexts) or of a dict of the script's features."""
    if not isinstance(x, (dict, tf.data.Dataset)):
      _, x, _ = self.features(self.examples(x), is_training=False)
    return super().predict(x, **kwargs)

  # ------------------------------------------------------------------ answers
  def _nbest(self, questions, contexts, **kwargs):
    """run_squad.py's post-processing of the model's outputs: (examples, predictions, nbest,
    null_odds or None)."""
    examples = self.examples((questions, contexts))
    features, inputs, _ = self.features(examples, is_training=False)
    outputs = super().predict(inputs, **kwargs)
    results = {f.unique_id: {name: value[row] for name, value in outputs.items()}
               for row, f in enumerate(features)}
    if self.version_2_with_negative:
      nbest, null_odds = squad_postprocess.v2_nbest(examples, features, results,
                                                    self.n_best_size, self.max_answer_length)
      # (run_squad.py on a file without answers: the threshold given, else 0.0)
      predictions = squad_postprocess.v2_predictions(nbest, null_odds,
                                                     self.null_score_diff_threshold or 0.0)
      return examples, predictions, nbest, null_odds
    predictions, nbest = squad_postprocess.v1_nbest(examples, features, results,
                                                    self.n_best_size, self.max_answer_length)
    return examples, predictions, nbest, None

  def predict_answers(self, questions, contexts, **kwargs):
    """Each question's answer in its context, as run_squad.py's predictions.json: a list of
    {"text" (v2.0: "" for no answer), "probability" (of the best span among the n-best),
    "nbest" (the n-best list of nbest_predictions.json), v2.0 "null_odds"}."""
    examples, predictions, nbest, null_odds = self._nbest(questions, contexts, **kwargs)
    answers = []
    for example in examples:
      answer = {"text": predictions[example.qas_id],
                "probability": float(nbest[example.qas_id][0]["probability"]),
                "nbest": list(nbest[example.qas_id])}
      if null_odds is not None:
        answer["null_odds"] = float(null_odds[example.qas_id])
      answers.append(answer)
    return answers

  def evaluate_answers(self, questions, contexts, answers, **kwargs):
    """The official SQuAD metric of the predicted answers against `answers` (one each, as
    fit's; v2.0: None for no answer), as run_squad.py --do_predict reports it: exact_match and
    f1 (v2.0: exact, f1, HasAns_*/NoAns_*, the best threshold's)."""
    gold = self._squad_data(*self._questions_contexts((questions, contexts)), answers)
    self.examples((questions, contexts), answers)  # (each answer checked at its answer_start)
    _, predictions, nbest, null_odds = self._nbest(questions, contexts, **kwargs)
    if null_odds is None:
      return squad_postprocess.evaluate_v1(gold, predictions)
    _, metrics = squad_postprocess.tune_and_evaluate_v2(gold, nbest, null_odds,
                                                        self.null_score_diff_threshold)
    return metrics

  # ------------------------------------------------------------------ saving
  def save_for_serving(self, export_dir, precision="fp32"):
    """Writes the SavedModel run_squad.py --export_dir writes (the official serving signature
    on token ids) as `<export_dir>/saved_model/<version>/`. Returns the version directory."""
    return export_squad_model(self.squad_model, os.fspath(export_dir), self.sequence_length,
                              self.preprocessor.spm_model_file, precision=precision)

  def save_checkpoint(self, path):
    """Writes the SQuAD model in the official TF1 layout at the prefix `path`, with
    albert_config.json and 30k-clean.model beside it, so that from_pretrained(path) (and
    QuestionAnswerer.from_pretrained) read it back."""
    return self._save_tf1_checkpoint(path)

  def get_config(self):
    p, m = self.preprocessor, self.squad_model
    return {"config": self.config.to_dict(), "spm_model_file": p.spm_model_file,
            "sequence_length": p.sequence_length, "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
            "version_2_with_negative": self.version_2_with_negative,
            "start_n_top": m.start_n_top, "end_n_top": m.end_n_top,
            "n_best_size": self.n_best_size, "max_answer_length": self.max_answer_length,
            "null_score_diff_threshold": self.null_score_diff_threshold,
            "do_lower_case": p.do_lower_case, "dropout_rate": m.dropout_rate,
            "name": self.name}

