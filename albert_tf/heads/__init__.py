"""Task heads on top of the encoder (official checkpoint names: checkpoints/official_names)."""

from albert_tf.heads.classification import ClassificationHead
from albert_tf.heads.masked_lm import MaskedLMHead, gather_positions
from albert_tf.heads.multiple_choice import MultipleChoiceHead
from albert_tf.heads.sentence_order import SentenceOrderHead
from albert_tf.heads.squad import SquadSpanHead, SquadV2Head
from albert_tf.heads.token_classification import TokenClassificationHead
