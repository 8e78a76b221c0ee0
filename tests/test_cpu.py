"""albert_tf/common/cpu.py: when a bfloat16 matmul would crash the process, and when training would
run on stale weights (the rules; the real crash, the stale training and the scripts' one-line
stops are in tests/integration/test_bf16_isa_cap.py and test_frozen_weights.py)."""

import pytest

from albert_tf.common import cpu as cpu_lib

_AVX512 = {"model": "AMD EPYC", "vendor": "AuthenticAMD",
           "flags": ["avx2", "avx512f", "avx512_bf16", "avx512_vnni"]}
_AVX2 = {"model": "Intel Core i7-12700", "vendor": "GenuineIntel",
         "flags": ["avx2", "avx_vnni", "fma"]}
_NE_CONVERT = {"model": "Intel Xeon 6780E", "vendor": "GenuineIntel",
               "flags": ["avx2", "avx_vnni", "avx_ne_convert"]}


@pytest.mark.parametrize("cpu,onednn,environ,crashes", [
    (_AVX512, True, {}, False),                                  # no cap
    (_AVX512, True, {"ONEDNN_MAX_CPU_ISA": "AVX2"}, True),
    (_AVX512, None, {"ONEDNN_MAX_CPU_ISA": "avx2_vnni"}, True),  # case, oneDNN state unknown
    (_AVX512, True, {"DNNL_MAX_CPU_ISA": "SSE41"}, True),        # oneDNN's old name
    (_AVX512, True, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, False),
    (_AVX512, True, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, False),
    (_AVX512, True, {"ONEDNN_MAX_CPU_ISA": "ALL"}, False),
    (_AVX512, False, {"ONEDNN_MAX_CPU_ISA": "AVX2"}, False),     # oneDNN off: Eigen
    (_AVX2, True, {"ONEDNN_MAX_CPU_ISA": "AVX2"}, False),        # TensorFlow uses Eigen here
    (_NE_CONVERT, True, {"ONEDNN_MAX_CPU_ISA": "AVX2"}, True),
    ({"model": "arm", "vendor": "", "flags": None}, True, {"ONEDNN_MAX_CPU_ISA": "AVX2"}, False),
])
def test_bf16_matmul_problem(cpu, onednn, environ, crashes):
  problem = cpu_lib.bf16_matmul_problem(cpu, onednn, environ)
  assert (problem is not None) == crashes
  if crashes:
    name = next(iter(environ))
    assert problem.startswith(f"{name}={environ[name].upper()} leaves oneDNN no bfloat16 matmul")
    assert "\n" not in problem


def test_cpu_info_reads_the_first_processor(tmp_path):
  path = tmp_path / "cpuinfo"
  path.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\n"
                  "flags\t\t: fpu avx2 avx512f\n\nprocessor\t: 1\nmodel name\t: other\n"
                  "flags\t\t: fpu\n")
  assert cpu_lib.cpu_info(str(path)) == {"model": "Xeon", "vendor": "GenuineIntel",
                                         "flags": ["avx2", "avx512f", "fpu"]}
  assert cpu_lib.cpu_info(str(tmp_path / "missing"))["flags"] is None


@pytest.mark.parametrize("onednn,environ,problem", [
    (True, {}, False),
    (True, {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"}, True),
    (None, {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "True"}, True),  # TensorFlow's bool: any case
    (True, {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "0"}, False),
    (True, {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "false"}, False),
    (False, {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"}, False),    # oneDNN off: nothing reads it
])
def test_frozen_weights_problem(onednn, environ, problem):
  found = cpu_lib.frozen_weights_problem(onednn, environ)
  assert (found is not None) == problem
  if problem:
    value = environ["TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"]
    assert found.startswith(f"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS={value} makes TensorFlow's oneDNN")
    assert "\n" not in found
