"""Names of a package that load on first use (PEP 562), so that importing the package stays
free of TensorFlow until one of them is asked for."""

import importlib


def module_getattr(namespace, table):
  """A module `__getattr__` resolving `table` ({name: module path}) into `namespace` (the
  package's globals()) on first access."""

  def __getattr__(name):  # pylint: disable=invalid-name
    if name in table:
      value = getattr(importlib.import_module(table[name]), name)
      namespace[name] = value
      return value
    raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")

  return __getattr__
