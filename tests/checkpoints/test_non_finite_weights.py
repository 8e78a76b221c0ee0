"""A checkpoint holding NaN/inf weights (a diverged run's) is refused by the one restore that
evaluation, prediction and export use, in one line naming the checkpoint and the weight."""

import numpy as np
import pytest

from albert_tf import models
from albert_tf.checkpoints import formats
from albert_tf.checkpoints.init import restore_model_weights
from albert_tf.common import kinds
from albert_tf.errors import NotFiniteError
from tests.helpers.tiny_config import tiny_albert_config


@pytest.mark.parametrize("fmt", [formats.TF1, formats.TF2])
def test_nan_weights_are_refused_naming_checkpoint_and_weight(tmp_path, fmt):
  model = models.build(kinds.CLASSIFIER, tiny_albert_config(), 2)
  prefix = str(tmp_path / "model.ckpt")
  formats.adapter_class(fmt).save(model, prefix)
  restore_model_weights(models.build(kinds.CLASSIFIER, tiny_albert_config(), 2), prefix)
  weight = model.weights[-1]
  weight.assign(np.full(weight.shape, np.nan, weight.dtype.as_numpy_dtype))
  bad = str(tmp_path / "bad.ckpt")
  formats.adapter_class(fmt).save(model, bad)
  with pytest.raises(NotFiniteError, match=rf"^{bad}: holds non-finite weights \(NaN/inf in "
                     r"\S+\): a diverged run's checkpoint; use an earlier checkpoint"):
    restore_model_weights(models.build(kinds.CLASSIFIER, tiny_albert_config(), 2), bad)
