"""Sentence-order (SOP) pair instances and n-gram masked-LM predictions, as in official ALBERT.

Everything works on token ids (not strings) and draws every random number from a `random.Random`
seeded by a key (seed, document, pass, instance: see `document_key`), so the instances of a
document are a pure function of it, the flags and the seed, whichever engine makes them (the
official tool drew the n-gram lengths from NumPy's unseeded global generator).

Differences from the official `create_pretraining_data.py`, all deliberate:
- SOP mode (`random_next_sentence=False`): a chunk holding a single sentence is split at a random
  token into A and B instead of being paired with a random document under label 1 (which is not an
  order signal). Documents with fewer than two sentences are skipped and counted.
- Random replacement (the 10% case) never draws <pad>, <unk>, [CLS], [SEP] or [MASK].
- WordPiece mode: a word starts at every token that does not begin with "##" (the official code
  tested for "▁", which never occurs in WordPiece vocabularies).
"""

import bisect
import collections
import dataclasses
import functools
import hashlib
import itertools
import random
import struct

SPIECE_UNDERLINE = "\u2581"
# Pieces that start a word even without "▁" (the official `_is_start_piece`).
_START_PUNCTUATION = frozenset('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
  """The flags that shape instances (names and defaults of the official tool)."""
  max_seq_length: int = 512
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  ngram: int = 3
  do_whole_word_mask: bool = True
  favor_shorter_ngram: bool = True
  do_permutation: bool = False
  random_next_sentence: bool = False
  dupe_factor: int = 40


@dataclasses.dataclass(frozen=True)
class VocabInfo:
  """What instance creation needs to know about the vocabulary, by id."""
  vocab_size: int
  cls_id: int
  sep_id: int
  mask_id: int
  is_start: tuple  # is_start[id]: 1 if the piece begins a word, else 0
  random_ids: tuple  # ids the 10% random replacement draws from

  @classmethod
  def from_pieces(cls, pieces, cls_id, sep_id, mask_id, special_ids=(), wordpiece=False):
    """Builds the info from the id-ordered list of pieces."""
    if wordpiece:
      is_start = tuple(int(not p.startswith("##")) for p in pieces)
    else:
      is_start = tuple(int(p.startswith(SPIECE_UNDERLINE) or p.startswith("<") or
                           p in _START_PUNCTUATION) for p in pieces)
    excluded = set(special_ids) | {cls_id, sep_id, mask_id}
    random_ids = tuple(i for i in range(len(pieces)) if i not in excluded)
    return cls(len(pieces), cls_id, sep_id, mask_id, is_start, random_ids)


@dataclasses.dataclass
class TrainingInstance:
  """One pretraining example before padding. Lists have the unpadded lengths."""
  input_ids: list  # [CLS] A [SEP] B [SEP], after masking
  segment_ids: list
  token_boundary: list
  masked_lm_positions: list
  masked_lm_ids: list  # the original ids at those positions
  next_sentence_label: int  # SOP: 1 = A and B were swapped; NSP: 1 = B is random


class InstanceStats:
  """Counters for the final report; mergeable across chunks and worker processes."""

  FIELDS = ("instances", "swapped", "tokens", "masked", "mask_token", "random_token", "kept_token",
            "permuted", "documents", "empty_documents", "short_documents", "split_segments",
            "unsplittable_segments", "sentences")

  def __init__(self):
    for f in self.FIELDS:
      setattr(self, f, 0)
    # n drawn from the full p(n) (starts with `ngram` words left), before the budget fallback.
    self.ngram_drawn = collections.Counter()
    self.ngram_masked = collections.Counter()  # n-gram length (in words) actually masked

  def merge(self, other):
    for f in self.FIELDS:
      setattr(self, f, getattr(self, f) + getattr(other, f))
    self.ngram_drawn.update(other.ngram_drawn)
    self.ngram_masked.update(other.ngram_masked)
    return self

  def to_dict(self):
    d = {f: getattr(self, f) for f in self.FIELDS}
    d["ngram_drawn"] = dict(sorted(self.ngram_drawn.items()))
    d["ngram_masked"] = dict(sorted(self.ngram_masked.items()))
    return d


# ----------------------------------------------------------------------------- pairs


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Truncates the longer of A and B (in place) until they fit, from the front or back at random.

  The pretraining rule of the official create_pretraining_data; fine-tuning inputs are cut only
  at the end (`albert_tf.text.packing.truncate_seq_pair`).
  """
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    if rng.random() < 0.5:
      del trunc[0]
    else:
      trunc.pop()


class ListDocuments:
  """The random-document source over an in-memory list of documents (see `fetch_random_b`).

  A source answers len() (number of documents), sentence_count(i) and sentences(i, start) (the
  sentences of document i from `start` on, each a list of ids, lazily). The local pipeline's
  source reads the documents of the whole input from disk (data/pretraining/document_index.py);
  the Beam pipeline joins each request with its document instead.
  """

  def __init__(self, documents):
    self._documents = documents

  def __len__(self):
    return len(self._documents)

  def sentence_count(self, index):
    return len(self._documents[index])

  def sentences(self, index, start):
    return self._documents[index][start:]


# Where the randomness of a pass comes from. Everything is keyed, never drawn from a shared
# stream, so that any engine (one process, forked workers, Apache Beam on many machines) makes
# the same instances from the same document:
#   - document key `<seed>:<document>.<part>:<pass>` (document_key): a random.Random seeded with
#     it draws the target length and, per instance, where A ends and which kind of pair it is;
#   - instance key `<document key>:<j>` (j-th pair of that document in that pass): seeds the
#     truncation and the masking of that instance, and (hashed) the document its random B comes
#     from and B's first sentence. So the B of one instance never shifts the draws of another,
#     and the document a negative needs is known before its text is (a join can fetch it).


def document_key(seed, number, part, dupe):
  """The key of document `number` of the input (its `part`-th piece: a line that is empty after
  preprocessing splits a document) in pass `dupe`."""
  return f"{seed}:{number}.{part}:{dupe}"


def document_parts(numbers):
  """For the input-order numbers of consecutive documents (equal for the pieces of one),
  the part index of each: [7, 7, 8] -> [0, 1, 0]."""
  parts, previous, part = [], None, 0
  for number in numbers:
    part = part + 1 if number == previous else 0
    parts.append(part)
    previous = number
  return parts


def _hash64(key):
  return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")


@dataclasses.dataclass(frozen=True)
class RandomB:
  """The B segment an NSP negative still needs: from document `document` (an input-order
  number), the sentences from a start seeded by `key` until `target_length` tokens."""
  document: int
  target_length: int
  key: str


@dataclasses.dataclass
class PairPlan:
  """One pair before truncation and masking. tokens_b is None while random_b is unresolved."""
  tokens_a: list
  tokens_b: list
  label: int  # SOP: 1 = swapped; NSP: 1 = B is random
  key: str  # the instance key (seeds truncation and masking)
  random_b: RandomB = None


def random_b_start(random_b, sentence_count):
  """The first sentence of B, among the `sentence_count` of its document."""
  return _hash64(random_b.key + ":start") % sentence_count if sentence_count else 0


def take_b(sentences, target_length):
  """B's tokens: whole sentences (iterable of id lists) until at least target_length tokens."""
  tokens = []
  for sentence in sentences:
    tokens.extend(sentence)
    if len(tokens) >= target_length:
      break
  return tokens


def fetch_random_b(random_documents, random_b):
  """B's tokens for a RandomB, from a source with sentence_count(i) and sentences(i, start)
  (ListDocuments, document_index.IndexedDocuments, or the one document a join brought)."""
  count = random_documents.sentence_count(random_b.document)
  if not count:
    return []
  start = random_b_start(random_b, count)
  return take_b(random_documents.sentences(random_b.document, start), random_b.target_length)


def plan_document(document, key, source_number, num_documents, options, stats):
  """The pairs of one document (a list of sentences, each a list of ids), as the official tool.

  Consecutive sentences are gathered into chunks of about `target_seq_length` tokens; each chunk
  is cut at a random sentence boundary into A and B. SOP: with probability 0.5 the pair is
  emitted as B A with label 1. NSP (`options.random_next_sentence`): with probability 0.5 B is
  taken from another document (label 1; `random_b` says which, drawn uniformly among
  `num_documents` by a hash of the instance key, never `source_number` unless 10 draws hit it)
  and the unused sentences are put back.

  key: document_key(...). Returns a list of PairPlan (a pure function of its arguments).
  """
  rng = random.Random(key)
  max_num_tokens = options.max_seq_length - 3
  target_seq_length = max_num_tokens
  if rng.random() < options.short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)
  plans = []
  chunk = []
  chunk_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    chunk.append(segment)
    chunk_length += len(segment)
    if i == len(document) - 1 or chunk_length >= target_seq_length:
      if chunk:
        plan = _plan_pair(chunk, f"{key}:{len(plans)}", source_number, num_documents,
                          target_seq_length, options, rng, stats)
        if plan is not None:
          i -= plan[1]
          plans.append(plan[0])
      chunk = []
      chunk_length = 0
    i += 1
  return plans


def _plan_pair(chunk, key, source_number, num_documents, target_seq_length, options, rng, stats):
  """(PairPlan, number of sentences to put back) or None."""
  if len(chunk) == 1 and not options.random_next_sentence:
    # SOP needs two consecutive pieces of text: cut the single sentence at a random token.
    tokens = chunk[0]
    if len(tokens) < 2:
      stats.unsplittable_segments += 1
      return None
    stats.split_segments += 1
    cut = rng.randint(1, len(tokens) - 1)
    tokens_a, tokens_b = list(tokens[:cut]), list(tokens[cut:])
    if rng.random() < 0.5:
      return PairPlan(tokens_b, tokens_a, 1, key), 0
    return PairPlan(tokens_a, tokens_b, 0, key), 0

  a_end = 1
  if len(chunk) >= 2:
    a_end = rng.randint(1, len(chunk) - 1)
  tokens_a = [t for segment in chunk[:a_end] for t in segment]
  if len(chunk) == 1 or (options.random_next_sentence and rng.random() < 0.5):
    # NSP negative: B from a random other document; the unused sentences are put back.
    number = source_number
    for attempt in range(10):
      number = _hash64(f"{key}:b{attempt}") % num_documents
      if number != source_number:
        break
    random_b = RandomB(number, target_seq_length - len(tokens_a), key)
    return PairPlan(tokens_a, None, 1, key, random_b), len(chunk) - a_end
  tokens_b = [t for segment in chunk[a_end:] for t in segment]
  if not options.random_next_sentence and rng.random() < 0.5:
    return PairPlan(tokens_b, tokens_a, 1, key), 0  # SOP: swapped
  return PairPlan(tokens_a, tokens_b, 0, key), 0


def plan_pass(documents, keys, source_numbers, num_documents, options, stats):
  """The PairPlans of one pass over `documents` (each a list of sentences of ids), in order.

  keys: document_key of each; source_numbers: the input-order number of each (NSP negatives
  never pair a document with itself); num_documents: how many documents NSP negatives draw
  from. Documents with fewer than two sentences are skipped and counted in
  `stats.short_documents` (in NSP mode they are still used as random-B sources).
  """
  plans = []
  for document, key, number in zip(documents, keys, source_numbers):
    if len(document) < 2:
      stats.short_documents += 1
      continue
    plans.extend(plan_document(document, key, number, num_documents, options, stats))
  return plans


def finish_pair(plan, options, vocab, stats):
  """The TrainingInstance of a PairPlan whose tokens_b is known (truncated to fit, masked), or
  None when truncation leaves A or B empty."""
  rng = random.Random(plan.key)
  tokens_a, tokens_b = list(plan.tokens_a), list(plan.tokens_b)
  truncate_seq_pair(tokens_a, tokens_b, options.max_seq_length - 3, rng)
  if not (tokens_a and tokens_b):
    return None
  return _make_instance(tokens_a, tokens_b, plan.label, options, vocab, rng, stats)


def finish_pass(plans, options, vocab, shuffle_key, stats):
  """The instances of a pass's resolved plans, shuffled by random.Random(shuffle_key)."""
  instances = [inst for inst in (finish_pair(p, options, vocab, stats) for p in plans)
               if inst is not None]
  random.Random(shuffle_key).shuffle(instances)
  return instances


def _make_instance(tokens_a, tokens_b, label, options, vocab, rng, stats):
  input_ids = [vocab.cls_id] + tokens_a + [vocab.sep_id] + tokens_b + [vocab.sep_id]
  segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
  special_positions = (0, len(tokens_a) + 1, len(input_ids) - 1)
  output_ids, positions, labels, boundary = create_masked_lm_predictions(
      input_ids, special_positions, options, vocab, rng, stats)
  stats.instances += 1
  stats.swapped += label
  stats.tokens += len(input_ids)
  return TrainingInstance(output_ids, segment_ids, boundary, positions, labels, label)


def create_sop_instances(documents, options, vocab, rng, stats=None, random_documents=None,
                         source_indices=None):
  """All instances of one pass over in-memory `documents` (each a list of sentences of ids),
  shuffled; the keys derive from one draw of `rng`.

  random_documents: where NSP negatives draw B from (see `ListDocuments`; default: `documents`
    themselves); source_indices: the index of each of `documents` in it (so a document never
    pairs with itself).
  """
  stats = stats if stats is not None else InstanceStats()
  if random_documents is None:
    random_documents = ListDocuments(documents)
  if source_indices is None:
    source_indices = range(len(documents))
  seed = rng.getrandbits(64)
  keys = [document_key(seed, k, 0, 0) for k in range(len(documents))]
  plans = plan_pass(documents, keys, source_indices, len(random_documents), options, stats)
  for plan in plans:
    if plan.random_b is not None:
      plan.tokens_b = fetch_random_b(random_documents, plan.random_b)
  return finish_pass(plans, options, vocab, f"{seed}:shuffle", stats)


# ----------------------------------------------------------------------------- masking


def _ngram_cumulative(options):
  """Cumulative p(n) for n = 1..ngram: p(n) ∝ 1/n (favor_shorter_ngram) or reversed."""
  return _cumulative(options.ngram, options.favor_shorter_ngram)


@functools.lru_cache(maxsize=None)
def _cumulative(ngram, favor_shorter_ngram):
  pvals = [1.0 / n for n in range(1, ngram + 1)]
  if not favor_shorter_ngram:
    pvals = pvals[::-1]
  cumulative, total = [], 0.0
  for p in pvals:
    total += p
    cumulative.append(total)
  return cumulative


def _select_ngrams(positions, word_starts, budget, covered, cumulative, max_n, rng, stats):
  """Official n-gram selection: visit words in random order, draw n, shorten n to fit.

  Word w is positions[word_starts[w]:word_starts[w + 1]] (word_starts ends with
  len(positions)). Words are visited in a uniformly random order (a lazy Fisher-Yates shuffle:
  only the visited prefix is drawn). `covered` (bytearray, one byte per word) marks words taken
  by earlier n-grams and is updated. Returns the selected positions, within `budget`.
  """
  num_words = len(word_starts) - 1
  order = list(range(num_words))
  random_ = rng.random
  selected = []
  count = 0
  for k in range(num_words):
    if count >= budget:
      break
    j = k + int(random_() * (num_words - k))
    order[k], order[j] = order[j], order[k]
    s = order[k]
    available = num_words - s
    if available > max_n:
      available = max_n
    n = bisect.bisect_right(cumulative, random_() * cumulative[available - 1],
                            hi=available - 1) + 1
    if stats is not None and available == max_n:  # the untruncated p(n) (not near the end)
      stats.ngram_drawn[n] += 1
    first = word_starts[s]
    while n > 1 and count + word_starts[s + n] - first > budget:
      n -= 1
    index_set = positions[first:word_starts[s + n]]
    if count + len(index_set) > budget:
      continue
    if 1 in covered[s:s + n]:
      continue
    covered[s:s + n] = b"\x01" * n
    selected.extend(index_set)
    count += len(index_set)
    if stats is not None:
      stats.ngram_masked[n] += 1
  return selected


def create_masked_lm_predictions(input_ids, special_positions, options, vocab, rng, stats=None):
  """n-gram masking with 80% [MASK] / 10% random id / 10% unchanged.

  Args:
    input_ids: ids of [CLS] A [SEP] B [SEP] (unpadded).
    special_positions: positions of [CLS]/[SEP], never masked, token_boundary 1.
    options: InstanceOptions (masked_lm_prob, max_predictions_per_seq, ngram, ...).
    vocab: VocabInfo.
    rng: random.Random.
    stats: optional InstanceStats to count decisions.

  Returns:
    (output_ids, masked_lm_positions sorted, masked_lm_ids (original ids), token_boundary).
  """
  token_boundary = list(map(vocab.is_start.__getitem__, input_ids))
  return mask_words(input_ids, token_boundary, special_positions, options, vocab, rng, stats)


def mask_words(input_ids, token_boundary, special_positions, options, vocab, rng, stats=None):
  """`create_masked_lm_predictions` with the word starts given (token_boundary, 1 = a word
  starts here), as online masking reads them from the records (--masked_lm_budget).

  vocab: only mask_id and random_ids are used.
  """
  token_boundary = list(token_boundary)
  # Candidate positions in order (all but [CLS]/[SEP]); with whole-word masking a word runs from
  # a start piece to the next one (a continuation right after [SEP] joins the previous word, as
  # in the official code).
  positions = []
  previous = -1
  for i in sorted(special_positions):
    token_boundary[i] = 1
    positions.extend(range(previous + 1, i))
    previous = i
  positions.extend(range(previous + 1, len(input_ids)))
  if options.do_whole_word_mask:
    word_starts = list(itertools.compress(range(len(positions)),
                                          map(token_boundary.__getitem__, positions)))
    if positions and (not word_starts or word_starts[0] != 0):
      word_starts.insert(0, 0)
  else:
    word_starts = list(range(len(positions)))
  word_starts.append(len(positions))
  output_ids = list(input_ids)
  if options.masked_lm_prob == 0 or not positions:
    return output_ids, [], [], token_boundary

  num_to_predict = min(options.max_predictions_per_seq,
                       max(1, int(round(len(input_ids) * options.masked_lm_prob))))
  cumulative = _ngram_cumulative(options)
  covered = bytearray(len(word_starts) - 1)
  masked = _select_ngrams(positions, word_starts, num_to_predict, covered, cumulative,
                          options.ngram, rng, stats)
  random_ids = vocab.random_ids
  random_ = rng.random
  n_mask = n_keep = n_random = 0
  for index in masked:
    if random_() < 0.8:
      output_ids[index] = vocab.mask_id
      n_mask += 1
    elif random_() < 0.5:
      n_keep += 1
    else:
      output_ids[index] = random_ids[int(random_() * len(random_ids))]
      n_random += 1
  if stats is not None:
    stats.mask_token += n_mask
    stats.kept_token += n_keep
    stats.random_token += n_random

  predictions = [(p, input_ids[p]) for p in masked]
  if options.do_permutation:
    # Official extra: permute the tokens of further n-grams among themselves and predict them.
    budget = min(num_to_predict, options.max_predictions_per_seq - len(masked))
    selected = sorted(_select_ngrams(positions, word_starts, budget, covered, cumulative,
                                     options.ngram, rng, None))
    permuted = list(selected)
    rng.shuffle(permuted)
    for src, tgt in zip(selected, permuted):
      output_ids[src] = input_ids[tgt]
      predictions.append((src, input_ids[src]))
    if stats is not None:
      stats.permuted += len(selected)

  predictions.sort()
  if stats is not None:
    stats.masked += len(masked)
  return (output_ids, [p for p, _ in predictions], [label for _, label in predictions],
          token_boundary)


# ----------------------------------------------------------------------------- serialisation


def _varint(value):
  out = bytearray()
  while True:
    bits = value & 0x7F
    value >>= 7
    if value:
      out.append(bits | 0x80)
    else:
      out.append(bits)
      return bytes(out)


class ExampleSerializer:
  """Writes `tf.train.Example` protos of the official pretraining format without TensorFlow.

  The bytes parse to exactly the features `tf.train.Example` would hold (checked in tests);
  building them directly is several times faster and keeps worker processes TF-free.
  Features (see albert_tf/data/pretraining/record_format.py): input_ids, input_mask, segment_ids,
  token_boundary int64 [max_seq_length]; masked_lm_positions, masked_lm_ids int64
  [max_predictions_per_seq]; masked_lm_weights float [max_predictions_per_seq];
  next_sentence_labels int64 [1]. Padding is 0.
  """

  def __init__(self, max_seq_length, max_predictions_per_seq, vocab_size):
    self.max_seq_length = seq = max_seq_length
    self.max_predictions_per_seq = pred = max_predictions_per_seq
    # Varint bytes of every value that can occur: ids, positions, 0/1 and field lengths.
    self._varints = [_varint(v) for v in range(max(vocab_size, 4 * seq + 64, 1 << 14))]
    self._zeros = [b"\x00" * k for k in range(max(seq, pred) + 1)]
    self._ones = [b"\x01" * k for k in range(seq + 1)]
    self._weights = [struct.pack(f"<{pred}f", *([1.0] * k + [0.0] * (pred - k)))
                     for k in range(pred + 1)]
    self._keys = {name: b"\x0a" + _varint(len(name)) + name.encode() + b"\x12"
                  for name in ("input_ids", "input_mask", "segment_ids", "token_boundary",
                               "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                               "next_sentence_labels")}

    # Entries that depend on a count only: input_mask by length, weights by predictions, label.
    self._mask_entries = [self._entry("input_mask", self._ones[n] + self._zeros[seq - n], b"\x1a")
                          for n in range(seq + 1)]
    self._weight_entries = [self._entry("masked_lm_weights", w, b"\x12") for w in self._weights]
    self._label_entries = [self._entry("next_sentence_labels", self._varints[v], b"\x1a")
                           for v in (0, 1)]

  def _entry(self, name, payload, list_tag):
    """Map entry {name: Feature{<list_tag>: {value: packed payload}}}."""
    v = self._varints
    packed = b"\x0a" + v[len(payload)] + payload
    feature = list_tag + v[len(packed)] + packed
    body = self._keys[name] + v[len(feature)] + feature
    return b"\x0a" + v[len(body)] + body

  def _ints(self, values, length):
    return b"".join(map(self._varints.__getitem__, values)) + self._zeros[length - len(values)]

  def serialize(self, instance):
    """Serialized tf.train.Example bytes of one TrainingInstance."""
    seq, pred = self.max_seq_length, self.max_predictions_per_seq
    n = len(instance.input_ids)
    k = len(instance.masked_lm_positions)
    if n > seq:
      raise ValueError(f"instance has {n} tokens > max_seq_length {seq}")
    if k > pred:
      raise ValueError(f"instance has {k} predictions > max_predictions_per_seq {pred}")
    int64 = b"\x1a"  # Feature.int64_list
    features = b"".join((
        self._entry("input_ids", self._ints(instance.input_ids, seq), int64),
        self._mask_entries[n],
        self._entry("segment_ids", self._ints(instance.segment_ids, seq), int64),
        self._entry("token_boundary", self._ints(instance.token_boundary, seq), int64),
        self._entry("masked_lm_positions", self._ints(instance.masked_lm_positions, pred), int64),
        self._entry("masked_lm_ids", self._ints(instance.masked_lm_ids, pred), int64),
        self._weight_entries[k],
        self._label_entries[instance.next_sentence_label],
    ))
    return b"\x0a" + _varint(len(features)) + features  # Example.features
