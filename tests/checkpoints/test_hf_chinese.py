"""HF Chinese ALBERT directories (AlbertModel + BertTokenizer + vocab.txt), both ways, against
transformers (tests/fixtures/make_hf_zh_reference.py made the fixtures with torch)."""

import json
import os

import numpy as np

import albert_tf
from tests.helpers.paths import REPO

DATA = os.path.join(REPO, "tests", "fixtures", "hf_zh")
TEXTS = ["我们的电影很好，电影也不错。", "中文English混合123文本，price是100元！",
         "他说：“你好”（测试）《书》", "Café PLAYING readings 中国", "zero\u200bwidth 学生"]


def test_hf_made_chinese_directory_loads_with_its_wordpiece_tokenizer():
  directory = os.path.join(DATA, "hf_zh")
  reference = np.load(os.path.join(directory, "reference.npz"))
  pretrained = albert_tf.from_pretrained(directory)
  tok = pretrained.tokenizer
  assert tok.sp_model is None and tok.vocab_file == os.path.join(directory, "vocab.txt")
  ids = reference["input_ids"]
  for text, row, mask in zip(TEXTS, ids, reference["attention_mask"]):
    # Our ids are BertTokenizer's (transformers) on these texts.
    assert [tok.cls_id] + tok.encode(text) + [tok.sep_id] == row[mask > 0].tolist(), text
  assert pretrained.model_type == "encoder"  # AlbertModel: no heads
  outputs = pretrained.model(dict(
      input_ids=ids, input_mask=reference["attention_mask"], segment_ids=np.zeros_like(ids)),
      training=False)
  np.testing.assert_allclose(outputs["sequence_output"], reference["sequence_output"],
                             atol=1e-5)
  np.testing.assert_allclose(outputs["pooled_output"], reference["pooled_output"], atol=1e-5)


def test_our_chinese_conversion_is_read_by_transformers_as_ours():
  with open(os.path.join(DATA, "ours_zh", "reference.json"), encoding="utf-8") as f:
    record = json.load(f)
  assert record["tokenizer_class"].startswith("BertTokenizer")
  assert record["same_ids_as_ours"]
  assert record["loading_info"]["missing_keys"] == []
  assert record["max_abs_difference"] <= 1e-5
