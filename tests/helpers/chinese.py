"""Chinese data in the layouts users download (CLUE AFQMC, CMRC 2018, RACE), tiny, over the
fixture WordPiece vocabulary (tests/helpers/text.py make_wordpiece_vocab): for the Chinese
integration test and the docs harness's stand-ins."""

import json
import os

SENTENCES = ["我们的电影很好。", "他说这个电影不好！", "中国的首都是北京。", "你好，我是学生。",
             "今天天气很好。", "这本书的价格是100元。", "我们在学校学习中文。", "他们都很喜欢这个电影。"]
CMRC_CONTEXT = "北京是中国的首都，也是中国的文化中心。上海是中国最大的城市。他们在北京学习中文。"
CMRC_QUESTIONS = [("中国的首都是哪里？", "北京"), ("中国最大的城市是什么？", "上海"),
                  ("他们在北京学习什么？", "中文"), ("北京是什么中心？", "文化中心")]


def write_file(path, text):
  os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return os.fspath(path)


def write_afqmc(data_dir):
  """CLUE AFQMC's files: {"sentence1", "sentence2", "label"} per line; test.json has ids and no
  labels. Returns the test pairs."""
  pair = lambda i: {"sentence1": SENTENCES[i % 8], "sentence2": SENTENCES[(i * 3 + 1) % 8]}
  for split, n in (("train", 8), ("dev", 4)):
    write_file(os.path.join(data_dir, f"{split}.json"), "".join(
        json.dumps(dict(pair(i), label=str(i % 2)), ensure_ascii=False) + "\n"
        for i in range(n)))
  write_file(os.path.join(data_dir, "test.json"), "".join(
      json.dumps(dict(pair(i + 2), id=i), ensure_ascii=False) + "\n" for i in range(4)))
  return [pair(i + 2) for i in range(4)]


def write_cmrc(path):
  """CMRC 2018's format: SQuAD v1.1 JSON over Chinese text without spaces."""
  qas = [{"id": f"q{i}", "question": q,
          "answers": [{"text": a, "answer_start": CMRC_CONTEXT.index(a)}]}
         for i, (q, a) in enumerate(CMRC_QUESTIONS)]
  data = {"version": "v1.1", "data": [{"title": "北京", "paragraphs": [
      {"context": CMRC_CONTEXT, "qas": qas}]}]}
  return write_file(path, json.dumps(data, ensure_ascii=False))


def write_race(data_dir):
  """RACE's layout (<data_dir>/RACE/<split>/<level>/all.txt) with Chinese passages."""
  passage = {"article": "".join(SENTENCES[:4]),
             "questions": ["谁说电影不好？", "中国的首都是_。"],
             "options": [["他", "我们", "学生", "中国"], ["北京", "上海", "学校", "电影"]],
             "answers": ["A", "A"]}
  for split in ("train", "dev", "test"):
    for level in ("middle", "high"):
      write_file(os.path.join(data_dir, "RACE", split, level, "all.txt"), "".join(
          json.dumps(dict(passage, id=f"{split}/{level}/{i}.txt"), ensure_ascii=False) + "\n"
          for i in range(2)))
  return os.fspath(data_dir)


def write_corpus(path):
  """A pretraining corpus: documents of one sentence per line, blank lines between."""
  return write_file(path, "\n\n".join(
      "\n".join(SENTENCES[i:] + SENTENCES[:i]) for i in range(4)) + "\n")


# Chinese NER sentences: (text, [(entity, type)]), every entity a substring of its text.
NER_SENTENCES = [("他们在北京学习中文。", [("北京", "LOC")]),
                 ("中国的首都是北京。", [("中国", "LOC"), ("北京", "LOC")]),
                 ("上海是中国最大的城市。", [("上海", "LOC"), ("中国", "LOC")]),
                 ("我们在学校学习。", [("学校", "ORG")])]


def write_conll_ner(data_dir):
  """Chinese NER in CoNLL columns as the Chinese NER corpora (MSRA, People's Daily) ship it:
  one character per line with its BIO tag, a blank line between sentences; train/dev/test.txt
  (the same sentences). Returns data_dir."""
  sentences = []
  for text, entities in NER_SENTENCES:
    tags = ["O"] * len(text)
    for entity, kind in entities:
      start = text.index(entity)
      tags[start:start + len(entity)] = [f"B-{kind}"] + [f"I-{kind}"] * (len(entity) - 1)
    sentences.append(list(zip(text, tags)))
  body = "\n\n".join("\n".join(f"{c} {t}" for c, t in s) for s in sentences) + "\n"
  for split in ("train", "dev", "test"):
    write_file(os.path.join(data_dir, f"{split}.txt"), body)
  return os.fspath(data_dir)
