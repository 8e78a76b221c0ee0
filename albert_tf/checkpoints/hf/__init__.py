"""Hugging Face transformers ALBERT directories (`config.json` + `model.safetensors`), both ways,
one job per module (import the module that does it; this package re-exports nothing).

Reading needs no PyTorch: tensors come from `model.safetensors` through `safetensors.numpy`,
else from `pytorch_model.bin` (a pickle read without running it) or `tf_model.h5` (h5py).
An HF ALBERT directory stores PyTorch tensors: `albert.` (the encoder and, except in
`AlbertForQuestionAnswering`, the pooler) and its model's head:

* AlbertForPreTraining: `predictions.` (MLM) and `sop_classifier.` -> AlbertPretrainer.
* AlbertForSequenceClassification: `classifier` Linear(H, num_labels) on the pooled output ->
  AlbertClassifier (one label and problem_type "regression": a regression classifier).
* AlbertForMultipleChoice: `classifier` Linear(H, 1) on each choice's pooled output ->
  AlbertMultipleChoice.
* AlbertForQuestionAnswering: `qa_outputs` Linear(H, 2) on every token, no pooler ->
  AlbertSquadModel (v1.1).
* AlbertModel: no head -> AlbertEncoder.

  config.py     config.json <-> AlbertConfig; the layouts HF can hold (sharing, groups)
  tensors.py    model.safetensors (and shards) <-> {HF name: array}; reads the others;
                is_hf_directory (an HF directory, by its files)
  torch_bin.py  pytorch_model.bin (zip or legacy pickle) -> arrays, without torch
  tf_h5.py      tf_model.h5 (transformers' Keras weights) -> arrays in PyTorch's names
  heads.py      the architecture of each kind (KIND_ARCHITECTURES), the kind a directory
                holds, a classifier's class names (id2label) and their order
  load.py       load_hf_checkpoint: every shape checked before anything is assigned
  save.py       save_hf_checkpoint

Each tensor's name beside its official TF1 name is in `official_names`. The checkpoint-format
adapter (`formats.HfFormat`) reads and writes through these modules.
"""
