"""`pytorch_model.bin` read as NumPy arrays without PyTorch, and without running the pickle.

`torch.save(state_dict)` pickles a dict of tensors; each tensor is a call
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)` whose
storage is a persistent id `('storage', torch.<Type>Storage, key, location, numel, ...)`. The
storages' bytes lie outside the pickle:

  zip (torch >= 1.6)  <archive>/data.pkl, each storage in the record <archive>/data/<key>,
                      <archive>/byteorder ("little" when absent).
  legacy (torch < 1.6, or `_use_new_zipfile_serialization=False`)  five pickles in a row (magic
                      number, protocol version 1001, sys_info, the state dict, the storage keys),
                      then per key an int64 element count and the storage's bytes.
  tar (torch < 0.4)   refused: no HF ALBERT upload is that old (transformers' ALBERT needs
                      torch >= 1.0).

Safety: the pickle is never given to anything that imports. Every opcode is checked first (no
INST / OBJ / NEWOBJ / extension codes), and `find_class` resolves only the names in
`ALLOWED_GLOBALS`, each to a stand-in of this module that records arguments (never to torch or
to the named object); the stand-ins and the objects they return refuse BUILD (`__setstate__`).
Anything else is refused with one line before any of it is used. Tensors are then cut out of
their storage's bytes with every offset, shape and stride checked against its length.
"""

import io
import os
import pickle
import pickletools
import struct
import tarfile
import zipfile

import ml_dtypes
import numpy as np

from albert_tf.common import fileio
from albert_tf.errors import AlbertError, file_error_reason, file_errors

# torch.<Type>Storage -> the element type of its bytes (little-endian unless said otherwise).
STORAGE_DTYPES = {
    "FloatStorage": np.dtype("float32"), "DoubleStorage": np.dtype("float64"),
    "HalfStorage": np.dtype("float16"), "BFloat16Storage": np.dtype(ml_dtypes.bfloat16),
    "LongStorage": np.dtype("int64"), "IntStorage": np.dtype("int32"),
    "ShortStorage": np.dtype("int16"), "CharStorage": np.dtype("int8"),
    "ByteStorage": np.dtype("uint8"), "BoolStorage": np.dtype("bool"),
}
_REBUILD_TENSOR = ("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = ("torch._utils", "_rebuild_parameter")
_ORDERED_DICT = ("collections", "OrderedDict")
ALLOWED_GLOBALS = frozenset({_REBUILD_TENSOR, _REBUILD_PARAMETER, _ORDERED_DICT} |
                            {("torch", name) for name in STORAGE_DTYPES})

# Opcodes a state dict's pickle (protocol 2, as torch writes it) uses; anything else is refused.
_ALLOWED_OPCODES = frozenset((
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
    "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "DICT",
    "LIST", "APPEND", "APPENDS", "SETITEM", "SETITEMS",
    "PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET", "MEMOIZE",
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
    "NONE", "NEWTRUE", "NEWFALSE",
    "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8",
    "STRING", "BINSTRING", "SHORT_BINSTRING", "BINBYTES", "SHORT_BINBYTES",
    "GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "PERSID", "BINPERSID",
))

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
LEGACY_PROTOCOL = 1001
_MAX_PICKLE_BYTES = 1 << 28  # a state dict's pickle holds names and shapes, never the data


class _Refused(Exception):
  """What the reader refuses; becomes one AlbertError line naming the file."""


class _NoBuild:
  """Objects the unpickler hands out refuse BUILD (a pickle setting their attributes)."""
  __slots__ = ()

  def __setstate__(self, state):
    raise _Refused(f"the pickle sets the state of {type(self).__name__} (BUILD)")


class _StorageType(_NoBuild):
  """torch.<Type>Storage, as a name and a dtype."""
  __slots__ = ("name", "dtype")

  def __init__(self, name):
    self.name, self.dtype = name, STORAGE_DTYPES[name]

  def __call__(self, *args):
    raise _Refused(f"the pickle calls torch.{self.name}")


class _Storage(_NoBuild):
  """A storage's place in the file: key, dtype, element count; its bytes are read on demand."""
  __slots__ = ("key", "dtype", "numel", "data")

  def __init__(self, key, dtype, numel):
    self.key, self.dtype, self.numel, self.data = key, dtype, numel, None


class _Tensor(_NoBuild):
  """A tensor as torch describes it: a strided view of a storage."""
  __slots__ = ("storage", "offset", "shape", "stride")

  def __init__(self, storage, offset, shape, stride):
    self.storage, self.offset, self.shape, self.stride = storage, offset, shape, stride


class _StateDict(dict):
  """collections.OrderedDict as the state dict; BUILD may set only its `_metadata` (module
  versions torch records), which is read and dropped."""

  def __setstate__(self, state):
    if not (isinstance(state, dict) and set(state) <= {"_metadata"}):
      raise _Refused("the pickle sets attributes of a dict other than _metadata (BUILD)")


def _ints(value, what):
  if (not isinstance(value, tuple) or
      not all(type(v) is int and v >= 0 for v in value)):  # pylint: disable=unidiomatic-typecheck
    raise _Refused(f"a tensor's {what} is {value!r}, expected a tuple of integers >= 0")
  return value


def _rebuild_tensor(storage, offset, shape, stride, requires_grad, hooks, *metadata):
  """torch._utils._rebuild_tensor_v2, recorded: a view of `storage` (checked when read)."""
  if not isinstance(storage, _Storage):
    raise _Refused("a tensor is built from something other than a storage")
  if type(offset) is not int or offset < 0:  # pylint: disable=unidiomatic-typecheck
    raise _Refused(f"a tensor's storage offset is {offset!r}")
  shape, stride = _ints(shape, "size"), _ints(stride, "stride")
  if len(shape) != len(stride):
    raise _Refused(f"a tensor's size {shape} and stride {stride} differ in length")
  if not isinstance(requires_grad, bool) or not isinstance(hooks, dict) or hooks or any(
      m not in (None, {}) for m in metadata) or len(metadata) > 1:
    raise _Refused("a tensor comes with backward hooks or metadata")
  if all(shape):  # an empty tensor reads nothing
    if np.prod(shape, dtype=object) > storage.numel:  # overlapping views: never in a state dict
      raise _Refused(f"a tensor of size {list(shape)} has more elements than its storage "
                     f"({storage.numel})")
    last = offset + sum((n - 1) * s for n, s in zip(shape, stride))
    if last >= storage.numel:
      raise _Refused(f"a tensor of size {list(shape)} at offset {offset} reaches element "
                     f"{last} of a storage of {storage.numel}")
  return _Tensor(storage, offset, shape, stride)


def _rebuild_parameter(data, requires_grad, hooks):
  """torch._utils._rebuild_parameter: an nn.Parameter is its tensor."""
  if not isinstance(data, _Tensor) or not isinstance(requires_grad, bool) or hooks:
    raise _Refused("a parameter is built from something other than a tensor")
  return data


class _Global(_NoBuild):
  """A callable the unpickler hands out for an allowed global: calls our stand-in."""
  __slots__ = ("name", "function")

  def __init__(self, name, function):
    self.name, self.function = name, function

  def __call__(self, *args):
    try:
      return self.function(*args)
    except TypeError:
      raise _Refused(f"{self.name} called with {len(args)} arguments") from None


def _ordered_dict(*args):
  if args == ():
    return _StateDict()
  if len(args) == 1 and isinstance(args[0], list) and all(
      isinstance(p, tuple) and len(p) == 2 for p in args[0]):
    return _StateDict(args[0])
  raise _Refused("collections.OrderedDict called with other than a list of pairs")


_STAND_INS = {
    _REBUILD_TENSOR: _Global("torch._utils._rebuild_tensor_v2", _rebuild_tensor),
    _REBUILD_PARAMETER: _Global("torch._utils._rebuild_parameter", _rebuild_parameter),
    _ORDERED_DICT: _Global("collections.OrderedDict", _ordered_dict),
}


class _SafeUnpickler(pickle.Unpickler):
  """Resolves only ALLOWED_GLOBALS (to stand-ins) and storage persistent ids."""

  def __init__(self, file, storages=None, legacy=False):
    super().__init__(file, encoding="utf-8")
    self._storages = storages  # key -> _Storage, filled as ids are met; None: none allowed
    self._legacy = legacy

  def find_class(self, module, name):
    if (module, name) not in ALLOWED_GLOBALS:
      raise _Refused(f"the pickle asks for {module}.{name}, which is not tensor storage")
    if module == "torch":
      return _StorageType(name)
    return _STAND_INS[(module, name)]

  def persistent_load(self, pid):
    if self._storages is None:
      raise _Refused("a persistent id where none belongs")
    size = 6 if self._legacy else 5
    if not (isinstance(pid, tuple) and len(pid) == size and pid[0] == "storage"):
      raise _Refused(f"a persistent id other than a storage: {str(pid)[:60]}")
    storage_type, key, _, numel = pid[1:5]
    if (not isinstance(storage_type, _StorageType) or not isinstance(key, str) or
        type(numel) is not int or numel < 0):  # pylint: disable=unidiomatic-typecheck
      raise _Refused(f"a malformed storage id: {str(pid)[:60]}")
    if self._legacy and pid[5] is not None:
      raise _Refused("a storage view (pre-1.0 format)")
    known = self._storages.get(key)
    if known is None:
      known = self._storages[key] = _Storage(key, storage_type.dtype, numel)
    elif (known.dtype, known.numel) != (storage_type.dtype, numel):
      raise _Refused(f"storage {key} is given two types or sizes")
    return known


def _check_opcodes(stream):
  """Refuses opcodes outside _ALLOWED_OPCODES in the pickle at the stream's position; returns
  the position after its STOP."""
  try:
    end = None
    for opcode, _, position in pickletools.genops(stream):
      if opcode.name not in _ALLOWED_OPCODES:
        raise _Refused(f"the pickle uses opcode {opcode.name} at byte {position}")
      end = position + 1
    if end is None:
      raise ValueError("empty")
    return end
  except _Refused:
    raise
  except Exception as e:  # pylint: disable=broad-except  (pickletools raises several types)
    raise _Refused(f"not a complete pickle ({type(e).__name__}: {str(e)[:80]})") from None


def _unpickle(data, start=0, storages=None, legacy=False):
  """Checks, then unpickles the pickle at byte `start` of `data`; (object, end position)."""
  stream = io.BytesIO(data)  # shares the bytes: no copy
  stream.seek(start)
  end = _check_opcodes(stream)
  stream.seek(start)
  try:
    value = _SafeUnpickler(stream, storages, legacy).load()
  except _Refused:
    raise
  except Exception as e:  # pylint: disable=broad-except  (a malformed pickle raises anything)
    raise _Refused(f"the pickle does not load ({type(e).__name__}: {str(e)[:80]})") from None
  if stream.tell() != end:
    raise _Refused("the pickle does not end where its STOP is")
  return value, end


def _state_dict_of(value):
  """{name: _Tensor} of the unpickled object, which must be a dict of tensors."""
  if not isinstance(value, dict):
    raise _Refused(f"it holds a {type(value).__name__}, expected a state dict")
  for name, tensor in value.items():
    if not isinstance(name, str) or not isinstance(tensor, _Tensor):
      raise _Refused(f"entry {str(name)[:60]} is not a named tensor")
  return dict(value)


def _tensor_array(tensor, byteorder):
  storage = tensor.storage
  data = np.frombuffer(storage.data, dtype=storage.dtype.newbyteorder(byteorder),
                       count=storage.numel)
  if not all(tensor.shape):
    return np.zeros(tensor.shape, storage.dtype)
  view = np.lib.stride_tricks.as_strided(
      data[tensor.offset:], shape=tensor.shape,
      strides=tuple(s * data.itemsize for s in tensor.stride), writeable=False)
  return np.array(view, dtype=storage.dtype)  # a native-order copy, independent of the file


def _read_zip(path, shapes_only):
  try:
    with fileio.open_file(path, "rb") as raw, zipfile.ZipFile(raw) as archive:
      pickles = [n for n in archive.namelist()
                 if n.endswith("/data.pkl") and n.count("/") == 1]
      if len(pickles) != 1:
        raise _Refused(f"the zip holds {len(pickles)} <archive>/data.pkl records, expected 1")
      prefix = pickles[0][:-len("data.pkl")]
      info = archive.getinfo(pickles[0])
      if info.file_size > _MAX_PICKLE_BYTES:
        raise _Refused(f"data.pkl is {info.file_size} bytes")
      storages = {}
      value, _ = _unpickle(archive.read(pickles[0]), storages=storages)
      tensors = _state_dict_of(value)
      byteorder = "little"
      if prefix + "byteorder" in archive.namelist():
        byteorder = archive.read(prefix + "byteorder").decode("ascii", "replace").strip()
        if byteorder not in ("little", "big"):
          raise _Refused(f"byteorder record says {byteorder[:20]!r}")
      if shapes_only:
        return {name: t.shape for name, t in tensors.items()}
      for storage in storages.values():
        record = f"{prefix}data/{storage.key}"
        try:
          size = archive.getinfo(record).file_size
        except KeyError:
          raise _Refused(f"storage record {record} is missing") from None
        if size != storage.numel * storage.dtype.itemsize:  # checked before reading
          raise _Refused(f"storage record {record} holds {size} bytes, expected "
                         f"{storage.numel} x {storage.dtype.itemsize}")
        storage.data = archive.read(record)
  except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile) as e:
    raise _Refused(f"a broken zip ({str(e)[:80] or type(e).__name__}): truncated?") from None
  return {name: _tensor_array(t, byteorder) for name, t in tensors.items()}


def _read_legacy(path, shapes_only):
  data = fileio.read_bytes(path)
  position = 0
  header = []
  for _ in range(3):  # magic number, protocol version, sys_info: plain values
    value, position = _unpickle(data, position)
    header.append(value)
  magic, protocol, sys_info = header
  if magic != LEGACY_MAGIC or protocol != LEGACY_PROTOCOL or not isinstance(sys_info, dict):
    raise _Refused("not torch's legacy format (magic number, protocol 1001, sys_info)")
  byteorder = "little" if sys_info.get("little_endian", True) else "big"
  storages = {}
  value, position = _unpickle(data, position, storages, legacy=True)
  tensors = _state_dict_of(value)
  keys, position = _unpickle(data, position)
  if not (isinstance(keys, list) and sorted(keys) == sorted(storages)):
    raise _Refused("the storage key list differs from the storages the tensors use")
  if shapes_only:
    return {name: t.shape for name, t in tensors.items()}
  for key in keys:
    storage = storages[key]
    if position + 8 > len(data):
      raise _Refused(f"storage {key} is cut off: truncated?")
    (numel,) = struct.unpack_from("<q", data, position)
    nbytes = storage.numel * storage.dtype.itemsize
    if numel != storage.numel or position + 8 + nbytes > len(data):
      raise _Refused(f"storage {key} holds {numel} elements of {storage.numel}, or is cut "
                     "off: truncated?")
    storage.data = data[position + 8:position + 8 + nbytes]
    position += 8 + nbytes
  return {name: _tensor_array(t, byteorder) for name, t in tensors.items()}


def read_torch_file(path, shapes_only=False):
  """{name: np.ndarray} of a `torch.save`d state dict (zip or legacy), without torch.

  shapes_only: values are the tensors' shapes (no storage is read).
  Raises:
    AlbertError: one line naming the file, for any other content (a pickle asking for any
      global beyond tensor storage, code, a broken or truncated file); nothing is run.
  """
  path = os.fspath(path)
  try:
    with fileio.open_file(path, "rb") as f:
      start = f.read(4)
    if start.startswith(b"PK"):
      return _read_zip(path, shapes_only)
    if start.startswith(b"\x80"):
      return _read_legacy(path, shapes_only)
    with fileio.open_file(path, "rb") as f:
      is_tar = tarfile.is_tarfile(f)
    if is_tar:
      raise _Refused("a PyTorch < 0.4 tar checkpoint, which is not read (load and re-save it "
                     "with torch)")
    raise _Refused("neither a zip nor a pickle")
  except _Refused as e:
    raise AlbertError(f"{path}: refused as a PyTorch checkpoint: {e} (nothing in it was run)"
                      ) from None
  except file_errors() as e:
    raise AlbertError(f"{path}: cannot read ({file_error_reason(e)})") from None
