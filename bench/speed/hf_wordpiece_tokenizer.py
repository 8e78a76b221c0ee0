"""HF `BertTokenizerFast` side of bench/speed/wordpiece_tokenization.py, run by the separate venv
that has transformers (never installed into the project's env), so it imports neither TensorFlow
nor albert_tf nor `bench`.

  /work/hfref/bin/python bench/speed/hf_wordpiece_tokenizer.py REQUEST.json RESULT.json

REQUEST: {"vocab_file", "vocab_size", "do_lower_case", "texts": {kind: [str]}, "batches": {kind: {batch:
[[index, ...] per round]}}, "warmup"}. RESULT: {"ids": {kind: [[int] per text]} (no special
tokens), "times_ms": {kind: {batch: [ms per round]}}, "versions", "class", "backend"}.
"""

import json
import sys
import time


def main(request_path, result_path):
  import tokenizers  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  with open(request_path, encoding="utf-8") as f:
    request = json.load(f)
  # The official BasicTokenizer's rules: clean text, CJK characters split, accents stripped
  # when (and only when) lower-casing. transformers 5 takes the vocabulary as `vocab` (its
  # BertTokenizerFast is BertTokenizer on the Rust backend) and silently ignores `vocab_file`,
  # leaving a vocabulary of the special tokens alone; transformers 4 takes `vocab_file`.
  vocab_arg = "vocab" if int(transformers.__version__.split(".")[0]) >= 5 else "vocab_file"
  tokenizer = transformers.BertTokenizerFast(**{vocab_arg: request["vocab_file"]},
                                             do_lower_case=request["do_lower_case"],
                                             tokenize_chinese_chars=True)
  if len(tokenizer.get_vocab()) != request["vocab_size"]:
    raise SystemExit(f"error: BertTokenizerFast read {len(tokenizer.get_vocab())} tokens from "
                     f"{request['vocab_file']}, not {request['vocab_size']}")
  result = {"class": type(tokenizer).__name__, "backend": type(tokenizer).__mro__[1].__name__}
  result.update({"ids": {}, "times_ms": {},
            "versions": {"transformers": transformers.__version__,
                         "tokenizers": tokenizers.__version__}})
  for kind, texts in request["texts"].items():
    result["ids"][kind] = tokenizer(texts, add_special_tokens=False)["input_ids"]
    result["times_ms"][kind] = {}
    for batch, rounds in request["batches"][kind].items():
      for indices in rounds[:request["warmup"]]:
        tokenizer([texts[i] for i in indices], add_special_tokens=False)
      times = []
      for indices in rounds:
        chunk = [texts[i] for i in indices]
        start = time.perf_counter()
        tokenizer(chunk, add_special_tokens=False)
        times.append((time.perf_counter() - start) * 1000)
      result["times_ms"][kind][batch] = times
  with open(result_path, "w", encoding="utf-8") as f:
    json.dump(result, f)


if __name__ == "__main__":
  main(*sys.argv[1:3])
