// Validation helpers shared by every op of stableops.
//
// Each op has ONE check function (e.g. check_rms_norm in
// csrc/norm/rms_norm_check.h) that its CPU kernel, its GPU kernel and its fake
// all go through, so the accept/reject decision cannot drift between
// backends:
//   * the CPU and GPU kernels call it before touching any data;
//   * the fake (python/stableops/_fake.py) checks that all tensors share one
//     device (check_same_device's rule and message, mirrored there), then
//     runs the op's CPU kernel on meta copies of the arguments, which calls
//     the check and returns (validation_only()).
// Every failure is a STD_TORCH_CHECK (RuntimeError in Python) whose message
// starts with "<op>: " and names the offending argument and value.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include <torch/csrc/stable/device.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

namespace stableops {

// Human-readable names for messages: "Float", "Half", "BFloat16", ...;
// "cpu", "cuda:0", "meta", ...; "[4, 16]".
std::string scalar_type_name(torch::headeronly::ScalarType dtype);
std::string device_type_name(torch::headeronly::DeviceType type);
std::string device_name(const torch::stable::Device& device);
std::string shape_str(const torch::stable::Tensor& t);
std::string strides_str(const torch::stable::Tensor& t);

// "Float (float32), Half (float16) or BFloat16 (bfloat16)".
std::string dtype_list_str(
    std::initializer_list<torch::headeronly::ScalarType> dtypes);

// The device type a CPU kernel validates for: Meta when its tensor is a meta
// tensor (the fake runs the CPU kernel on meta copies to validate only), CPU
// otherwise. GPU kernels validate for CUDA (HIP tensors are CUDA in torch).
inline torch::headeronly::DeviceType cpu_kernel_device(
    const torch::stable::Tensor& t) {
  return t.device().type() == torch::headeronly::DeviceType::Meta
      ? torch::headeronly::DeviceType::Meta
      : torch::headeronly::DeviceType::CPU;
}

// True when a CPU kernel was called by the fake to validate only: its
// check has run; it must return without touching data.
inline bool validation_only(const torch::stable::Tensor& t) {
  return t.device().type() == torch::headeronly::DeviceType::Meta;
}

// A named tensor argument (nullptr: an absent optional).
using NamedTensor = std::pair<const char*, const torch::stable::Tensor*>;

// Every given tensor must be on the device of the first one, and that device
// must be of type `expected` (the kernel's). Arguments are listed in schema
// order; the first is the reference. Message (mirrored by the fake):
//   "<op>: <name> must be on the same device as <first> (<dev>), got <dev>"
//   "<op>: <first> must be a <type> tensor for this kernel, got <dev>"
void check_devices(
    const char* op,
    std::initializer_list<NamedTensor> tensors,
    torch::headeronly::DeviceType expected);

// `t` has one of `allowed` dtypes:
//   "<op>: <name> must have dtype <list>, got <dtype>"
void check_dtype(
    const char* op,
    const torch::stable::Tensor& t,
    const char* name,
    std::initializer_list<torch::headeronly::ScalarType> allowed);

// `t` has the dtype of `ref`:
//   "<op>: <name> must have the same dtype as <ref_name> (<dtype>), got <dtype>"
void check_same_dtype(
    const char* op,
    const torch::stable::Tensor& t,
    const char* name,
    const torch::stable::Tensor& ref,
    const char* ref_name);

// `t` has stride 1 in its last dimension (any size-1 or empty tensor passes):
//   "<op>: <name> must be contiguous in its last dim, got strides [...]"
void check_last_dim_contiguous(
    const char* op,
    const torch::stable::Tensor& t,
    const char* name);

// `t` has at least `min_dim` dimensions:
//   "<op>: <name> must have at least <n> dims, got <k>-D tensor of shape [...]"
void check_min_dim(
    const char* op,
    const torch::stable::Tensor& t,
    const char* name,
    int64_t min_dim);

// `t` is a defined tensor: "<op>: <name> is an undefined tensor".
void check_defined(
    const char* op,
    const torch::stable::Tensor& t,
    const char* name);

} // namespace stableops
