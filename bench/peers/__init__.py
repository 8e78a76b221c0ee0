"""Ours against ONNX Runtime, HF transformers and the model garden (see bench/__init__.py)."""
