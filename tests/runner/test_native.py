"""Kernel signature parsing, argument marshalling and format detection (no GPU needed)."""

from __future__ import annotations

import ctypes

import pytest

from htam_graph.runner.formats import detect_format, static_cuda_sources
from htam_graph.runner.native import LaunchError, pack_args, parse_kernels, parse_signature

torch = pytest.importorskip("torch")

SOURCE = r"""
// extern "C" __global__ void commented_out(int x) {}
/* extern "C" __global__ void also_commented(int x) {} */
extern "C" __global__ void __launch_bounds__(256) relu(const float* __restrict__ x, float* __restrict__ y,
                                                       long long n) {}
extern "C" __global__ __launch_bounds__(128, 2) void mixed(
    const float * __restrict__ a, unsigned int m, size_t q, double d, bool flag, float x[], unsigned long long int z,
    int32_t i32, uint32_t u32, ptrdiff_t pd, long l) {}
extern "C" __global__ void no_args(void) {}
extern "C" __global__ void by_value(MyStruct s) {}
__global__ void mangled(float* x) {}
"""


def test_only_extern_c_global_kernels_are_found():
    assert sorted(parse_kernels(SOURCE)) == ["by_value", "mixed", "no_args", "relu"]


def test_parameter_types_map_to_their_sizes():
    sig = parse_signature("mixed", parse_kernels(SOURCE)["mixed"])
    got = [(p.name, p.kind, p.size) for p in sig.params]
    assert got == [
        ("a", "pointer", 8), ("m", "uint", 4), ("q", "uint", 8), ("d", "float", 8), ("flag", "bool", 1),
        ("x", "pointer", 8), ("z", "uint", 8), ("i32", "int", 4), ("u32", "uint", 4), ("pd", "int", 8),
        ("l", "int", 8),
    ]  # fmt: skip
    assert parse_signature("no_args", parse_kernels(SOURCE)["no_args"]).params == ()


def test_unsupported_parameter_types_are_named():
    with pytest.raises(LaunchError, match=r"kernel 'by_value' parameter 0 's' has type 'MyStruct'"):
        parse_signature("by_value", parse_kernels(SOURCE)["by_value"])


def _relu():
    return parse_signature("relu", parse_kernels(SOURCE)["relu"])


def test_arguments_are_packed_as_the_c_types_of_the_signature():
    packed = pack_args(_relu(), (0x1000, 0x2000, 2**40), device_index=None)
    pointers = ctypes.cast(packed.address, ctypes.POINTER(ctypes.c_void_p))
    values = [ctypes.cast(pointers[i], ctypes.POINTER(ctypes.c_uint64)).contents.value for i in range(3)]
    assert values == [0x1000, 0x2000, 2**40]


def test_32_bit_and_float_scalars():
    sig = parse_signature("k", "float a, double b, int c, unsigned d, bool e")
    packed = pack_args(sig, (1.5, 2, -7, 2**32 - 1, True), device_index=None)
    assert [v.value for v in packed.values] == [1.5, 2.0, -7, 2**32 - 1, True]
    assert [type(v) for v in packed.values] == [
        ctypes.c_float,
        ctypes.c_double,
        ctypes.c_int32,
        ctypes.c_uint32,
        ctypes.c_bool,
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((1, 2), r"kernel 'relu' takes 3 arguments \(float\* x, float\* y, long long n\), got 2"),
        ((torch.zeros(2), 2, 3), r"kernel 'relu' parameter 0 'x' \(float\*\) expects a CUDA tensor on cuda:0"),
        ((1, None, 3), r"parameter 1 'y' \(float\*\) expects a CUDA tensor or an int device address, got NoneType"),
        ((1, 2, 1.5), r"parameter 2 'n' \(long long\) expects an integer, got 1.5"),
        ((1, 2, torch.tensor(3)), r"parameter 2 'n' \(long long\) expects a Python number, got Tensor"),
    ],
)
def test_wrong_arguments_name_the_kernel_and_the_parameter(args, message):
    with pytest.raises(LaunchError, match=message):
        pack_args(_relu(), args, device_index=0)


def test_a_value_outside_a_32_bit_parameter_is_refused():
    sig = parse_signature("k", "int n")
    with pytest.raises(LaunchError, match=r"got 4294967296, outside its 32-bit range; declare it long long"):
        pack_args(sig, (2**32,), device_index=None)


NATIVE = 'from htam_graph.runner.native import load_cuda\nCUDA_SRC = r"""extern "C" __global__ void k() {}"""\n'
KERNELBENCH = "from torch.utils.cpp_extension import load_inline\nmod = load_inline(name='x', cpp_sources='')\n"


def test_format_detection():
    assert detect_format(NATIVE) == "native"
    assert detect_format(KERNELBENCH) == "kernelbench"
    assert detect_format("import torch\n") == "native"  # the contract the project asks for


def test_static_cuda_sources_fold_literals_and_names_bound_to_them():
    source = NATIVE + 'CUDA_SRC_2 = "second"\nOTHER = "not cuda"\nCUDA_SRC_3 = f"{OTHER}" + "!"\n'
    source += "CUDA_SRC_4 = load() + OTHER\n"  # built at run time: left to load_cuda
    assert static_cuda_sources(source) == ['extern "C" __global__ void k() {}', "second", "not cuda!"]
    assert static_cuda_sources("def broken(:\n") == []
