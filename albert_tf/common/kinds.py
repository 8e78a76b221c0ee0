"""The model kinds: which model a checkpoint holds, named by its task head, defined once.

A leaf module (no TensorFlow, nothing above albert_tf.errors): the converter's --model_type,
from_pretrained's model_type, the checkpoint formats and the model classes all use these names.
Each model class (albert_tf/models/) declares the kinds it builds (`KINDS`) and the kind of an
instance (`kind`); `albert_tf.models.build(kind, config, ...)` builds a fresh one.

A one-row GLUE-style head is a regression classifier (STS-B) or a multiple-choice scorer (RACE):
the official TF1 names cannot tell them apart, so they are two kinds.
"""

from albert_tf.errors import AlbertError

ENCODER = "encoder"  # the encoder alone (`bert/`), no head
PRETRAINER = "pretrainer"  # masked-LM + sentence-order heads
CLASSIFIER = "classifier"  # GLUE-style classification, 2+ classes
REGRESSION = "regression"  # the same head with one output (STS-B)
MULTIPLE_CHOICE = "multiple_choice"  # one-unit scorer over the choices (RACE)
SQUAD_V1 = "squad_v1"  # SQuAD v1.1 span head
SQUAD_V2 = "squad_v2"  # the official ALBERT SQuAD v2.0 head
TOKEN_CLASSIFIER = "token_classifier"  # a label per piece (NER), run_ner.py

KINDS = (ENCODER, PRETRAINER, CLASSIFIER, REGRESSION, MULTIPLE_CHOICE, SQUAD_V1, SQUAD_V2,
         TOKEN_CLASSIFIER)
CLASSIFIER_KINDS = (CLASSIFIER, REGRESSION)
# The kinds whose head has one row per label: a model of them is built with its number of labels.
LABELED_KINDS = CLASSIFIER_KINDS + (TOKEN_CLASSIFIER,)
SQUAD_KINDS = (SQUAD_V1, SQUAD_V2)
# The official TF1 names of a one-row GLUE-style head hold either of these two kinds.
ONE_ROW_KINDS = (REGRESSION, MULTIPLE_CHOICE)

# What each kind is, for messages that name a kind to the user.
DESCRIPTIONS = {
    ENCODER: "the encoder alone, no head",
    PRETRAINER: "masked-LM + sentence-order heads, run_pretraining.py",
    CLASSIFIER: "GLUE-style classifier, run_classifier.py",
    REGRESSION: "one-output regression classifier, run_classifier.py STS-B",
    MULTIPLE_CHOICE: "multiple-choice scorer, run_race.py",
    SQUAD_V1: "SQuAD v1.1 span head, run_squad_v1.py",
    SQUAD_V2: "SQuAD v2.0 head, run_squad_v2.py",
    TOKEN_CLASSIFIER: "token classifier, a label per word (NER), run_ner.py",
}


def kind_of(model):
  """The kind of a built model: its declared `kind`; a model without one (the AlbertEncoder)
  is the encoder."""
  return getattr(model, "kind", ENCODER)


def check_kind(kind, name="--model_type"):
  """Raises AlbertError (naming `name`) unless kind is one of KINDS; returns it."""
  if kind not in KINDS:
    raise AlbertError(f"{name}={kind!r} is invalid: expected one of {', '.join(KINDS)}")
  return kind
