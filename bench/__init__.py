"""Measurements of albert_tf, never imported by the library or its tests' subjects, in three rooms:

  bench/speed/        speed and memory of our own code paths, each beside its baseline from the
                      same run (results: bench/speed/results/)
  bench/peers/        ours against ONNX Runtime, HF transformers (PyTorch) and the model garden,
                      in its own venv (bench/peers/requirements.txt; results: bench/peers/results/)
  bench/experiments/  accuracy experiments, one folder each with a README (the question, the
                      command, the result file; results: bench/experiments/results/)

bench/common.py holds what speed and peers share. Every bench runs as a module from the
repository's root: `python -m bench.speed.pretrain_step`.
"""
