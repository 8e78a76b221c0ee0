"""Pretraining data: raw text -> SOP + masked-LM TFRecords -> batches for run_pretraining.

  instances       sentence-order pairs and n-gram masking on token ids (TensorFlow-free)
  creation        the streaming, multi-process engine of create_pretraining_data.py
  record_format   the official TFRecord feature names and parsing spec
  dataset         reading the records (official input_fn order) into int32 batches
  online_masking  --masked_lm_budget: new masks drawn at every read
"""
