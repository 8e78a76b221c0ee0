"""How a model class's `from_pretrained(path)` reaches the loader without importing upward.

The loader (albert_tf/pretrained.py) sits above the models: it reads checkpoints of every format,
and the checkpoint code builds models. So the models do not import it; they call `load_model`
here, a leaf module, and the package (albert_tf/__init__.py, which Python runs before any module
under it, the models included) registers the loader with `register`. The same shape as a plugin
registry: the lower layer names the call, the higher layer supplies it.

`hub_tokenization_info` is the same door for the tokenizer's official
`FullTokenizer.from_hub_module` (albert_tf/text), whose module reader lives in
albert_tf/checkpoints/hub_module.py.
"""

from albert_tf.errors import AlbertError

_loader = None
_hub_tokenization = None


def register(loader):
  """Sets the loader: loader(model_class, path, **kwargs) -> a model of model_class."""
  global _loader
  _loader = loader


def load_model(model_class, path, **kwargs):
  """The model of `model_class` stored at `path` (the registered loader's answer)."""
  if _loader is None:  # only if albert_tf/__init__.py did not run (it always does on import)
    raise AlbertError(f"{model_class.__name__}.from_pretrained: no model loader registered")
  return _loader(model_class, path, **kwargs)


def register_hub_tokenization(reader):
  """Sets the reader: reader(module directory) -> (vocabulary file, do_lower_case)."""
  global _hub_tokenization
  _hub_tokenization = reader


def hub_tokenization_info(handle):
  """(vocabulary file, do_lower_case) of a TF-Hub module: its `tokenization_info`."""
  if _hub_tokenization is None:  # only if albert_tf/__init__.py did not run
    raise AlbertError("FullTokenizer.from_hub_module: no TF-Hub module reader registered")
  return _hub_tokenization(handle)
