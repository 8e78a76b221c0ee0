"""The peers users pick instead of us, built on the same weights: HF transformers (PyTorch) and
ONNX Runtime for serving, HF `AlbertForPreTraining` with a LAMB step for training.

Imported only by bench/peers/run.py, in the bench's own virtualenv (bench/peers/requirements.txt):
torch, transformers, onnx and onnxruntime are never dependencies of albert_tf.
"""

import os

THREADS = 2  # every framework gets the same two intra-op threads


def load_hf_classifier(hf_dir, attention=None, architecture="AlbertForSequenceClassification"):
  """transformers' `architecture` (a class name of transformers, e.g.
  AlbertForTokenClassification) from our converted directory, eval mode (attention:
  transformers' attn_implementation; None = its default, "sdpa")."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(THREADS)
  kwargs = {"attn_implementation": attention} if attention else {}
  model = getattr(transformers, architecture).from_pretrained(hf_dir, **kwargs)
  return model.eval()


def hf_call(model, ids, mask, segments, bf16=False, logits=False):
  """A serving call: numpy int32 [batch, seq] x3 -> probabilities [batch, classes] (logits: the
  logits, any shape, e.g. a token classifier's [batch, seq, classes]).

  bf16: under torch.autocast("cpu", bfloat16), as a torch user serves at bf16 (matmuls in
  bfloat16, softmax/LayerNorm in float32; the weights stay float32)."""
  import torch  # pylint: disable=g-import-not-at-top
  feed = {name: torch.from_numpy(value.astype("int64")) for name, value in
          (("input_ids", ids), ("attention_mask", mask), ("token_type_ids", segments))}

  def call():
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
      out = model(**feed).logits.float()
      return (out if logits else torch.softmax(out, -1)).numpy()
  return call


def export_onnx(model, path, seq_length):
  """The HF classifier as ONNX (TorchScript exporter, dynamic batch and sequence axes)."""
  import torch  # pylint: disable=g-import-not-at-top
  ids = torch.ones([1, seq_length], dtype=torch.int64)
  axes = {0: "batch", 1: "sequence"}
  torch.onnx.export(model, (ids, ids, torch.zeros_like(ids)), path,
                    input_names=["input_ids", "attention_mask", "token_type_ids"],
                    output_names=["logits"], opset_version=17, dynamo=False,
                    dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                  "token_type_ids": axes, "logits": {0: "batch"}})
  return path


def onnx_variants(onnx_path, hidden_size, num_heads):
  """{name: model file}: the exported graph, onnxruntime.transformers' fused graph (attention,
  LayerNorm, GELU fusions) and its int8 dynamic quantization. A variant that fails to build is
  left out and its error returned in `failures`."""
  variants, failures = {"ORT fp32": onnx_path}, {}  # (failures also get the fusion counts)
  fused = onnx_path.replace(".onnx", "_fused.onnx")
  try:
    from onnxruntime.transformers import optimizer  # pylint: disable=g-import-not-at-top
    optimized = optimizer.optimize_model(onnx_path, model_type="bert", num_heads=num_heads,
                                         hidden_size=hidden_size)
    optimized.save_model_to_file(fused)
    variants["ORT fp32 fused"] = fused
    failures["fusions"] = optimized.get_fused_operator_statistics()
  except Exception as e:  # pylint: disable=broad-except
    failures["ORT fp32 fused"] = f"{type(e).__name__}: {e}"
  # int8 weights of the fused graph (its contrib ops need a default type for shape inference),
  # else of the plain graph.
  import onnx  # pylint: disable=g-import-not-at-top
  from onnxruntime.quantization import QuantType, quantize_dynamic  # pylint: disable=g-import-not-at-top
  sources = (("ORT int8 fused", variants.get("ORT fp32 fused")), ("ORT int8", onnx_path))
  for name, source in sources:
    if source is None:
      continue
    int8 = source.replace(".onnx", "_int8.onnx")
    try:
      quantize_dynamic(source, int8, weight_type=QuantType.QInt8,
                       extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
      variants[name] = int8
    except Exception as e:  # pylint: disable=broad-except
      failures[name] = f"{type(e).__name__}: {e}"
  return variants, failures


def ort_call(model_file, ids, mask, segments, logits=False):
  """An ONNX Runtime session (all graph optimizations, THREADS intra-op threads) -> call() ->
  probabilities over the last axis (logits: the graph's logits)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import onnxruntime as ort  # pylint: disable=g-import-not-at-top
  options = ort.SessionOptions()
  options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
  options.intra_op_num_threads = THREADS
  options.inter_op_num_threads = 1
  session = ort.InferenceSession(model_file, options, providers=["CPUExecutionProvider"])
  feed = {"input_ids": ids.astype(np.int64), "attention_mask": mask.astype(np.int64),
          "token_type_ids": segments.astype(np.int64)}

  def call():
    out = session.run(["logits"], feed)[0]
    if logits:
      return out
    e = np.exp(out - out.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
  return call


# ------------------------------------------------------------------------------- training
def lamb_step(parameters, state, lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
              step=1):
  """One LAMB update (You et al. 2019), as ALBERT's: Adam moments without bias correction, decoupled
  weight decay except for LayerNorm and biases, update scaled by the trust ratio ||w||/||u||.
  torch has no LAMB; this is the paper's update in a few tensor ops per parameter."""
  import torch  # pylint: disable=g-import-not-at-top
  del step
  with torch.no_grad():
    for name, p in parameters:
      if p.grad is None:
        continue
      m, v = state.setdefault(name, (torch.zeros_like(p), torch.zeros_like(p)))
      m.mul_(betas[0]).add_(p.grad, alpha=1 - betas[0])
      v.mul_(betas[1]).addcmul_(p.grad, p.grad, value=1 - betas[1])
      update = m / (v.sqrt() + eps)
      if not ("LayerNorm" in name or "bias" in name):
        update.add_(p, alpha=weight_decay)
      w_norm, u_norm = p.norm(), update.norm()
      ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
      p.add_(update, alpha=-lr * float(ratio))


def hf_pretraining_step(config_dict, features, labels, bf16=False):
  """HF AlbertForPreTraining's train step on one batch: encoder, the MLM head on the gathered
  masked positions only (as ours and the model garden's), SOP head, cross-entropies, backward,
  global-norm clip 1.0, LAMB. bf16: forward under torch.autocast("cpu", bfloat16) (torch's
  mixed precision: float32 weights and optimizer, bfloat16 matmuls). Returns step() -> loss."""
  import torch  # pylint: disable=g-import-not-at-top
  from transformers import AlbertConfig, AlbertForPreTraining  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(THREADS)
  torch.manual_seed(0)
  config = AlbertConfig(**{k: v for k, v in config_dict.items() if k != "num_hidden_groups"},
                        num_hidden_groups=config_dict.get("num_hidden_groups", 1))
  model = AlbertForPreTraining(config).train()
  t = {k: torch.from_numpy(v.astype("int64")) for k, v in {**features, **labels}.items()
       if v.dtype.kind == "i"}
  weights = torch.from_numpy(labels["masked_lm_weights"])
  parameters = list(model.named_parameters())
  state = {}
  hidden = config.hidden_size

  def step():
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
      out = model.albert(input_ids=t["input_ids"], attention_mask=t["input_mask"],
                         token_type_ids=t["segment_ids"])
      positions = t["masked_lm_positions"].unsqueeze(-1).expand(-1, -1, hidden)
      gathered = torch.gather(out.last_hidden_state, 1, positions)
      mlm_logits = model.predictions(gathered).float()
      sop_logits = model.sop_classifier(out.pooler_output).float()
    ce = torch.nn.functional.cross_entropy(mlm_logits.flatten(0, 1),
                                           t["masked_lm_ids"].flatten(), reduction="none")
    mlm = (ce * weights.flatten()).sum() / (weights.sum() + 1e-5)
    sop = torch.nn.functional.cross_entropy(sop_logits, t["next_sentence_labels"])
    loss = mlm + sop
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    lamb_step(parameters, state)
    return float(loss)
  return step


def versions():
  import onnxruntime  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  return {"torch": torch.__version__, "transformers": transformers.__version__,
          "onnxruntime": onnxruntime.__version__, "torch_threads": torch.get_num_threads(),
          "cpu_count": os.cpu_count()}
