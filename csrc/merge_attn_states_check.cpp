// Shared input validation for stableops::merge_attn_states (see the header for
// the contract). Stable ABI only.
#include "merge_attn_states_check.h"

#include <cstdint>
#include <sstream>
#include <string>

#include <torch/csrc/stable/device.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

namespace stableops {

using torch::headeronly::DeviceType;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

std::string scalar_type_name(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float:
      return "Float";
    case ScalarType::Half:
      return "Half";
    case ScalarType::BFloat16:
      return "BFloat16";
    case ScalarType::Double:
      return "Double";
    case ScalarType::Byte:
      return "Byte";
    case ScalarType::Char:
      return "Char";
    case ScalarType::Short:
      return "Short";
    case ScalarType::Int:
      return "Int";
    case ScalarType::Long:
      return "Long";
    case ScalarType::Bool:
      return "Bool";
    case ScalarType::ComplexFloat:
      return "ComplexFloat";
    case ScalarType::ComplexDouble:
      return "ComplexDouble";
    case ScalarType::Float8_e4m3fn:
      return "Float8_e4m3fn";
    case ScalarType::Float8_e5m2:
      return "Float8_e5m2";
    default:
      return "ScalarType(" + std::to_string(static_cast<int>(dtype)) + ")";
  }
}

std::string device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
    case DeviceType::HIP:
      return "hip";
    case DeviceType::Meta:
      return "meta";
    case DeviceType::XPU:
      return "xpu";
    case DeviceType::MPS:
      return "mps";
    case DeviceType::PrivateUse1:
      return "privateuseone";
    default:
      return "DeviceType(" + std::to_string(static_cast<int>(type)) + ")";
  }
}

std::string device_name(const torch::stable::Device& device) {
  std::string name = device_type_name(device.type());
  if (device.has_index() && device.type() != DeviceType::CPU) {
    name += ":" + std::to_string(static_cast<int>(device.index()));
  }
  return name;
}

namespace {

std::string shape_str(const Tensor& t) {
  std::ostringstream oss;
  oss << '[';
  const auto sizes = t.sizes();
  for (size_t i = 0; i < sizes.size(); ++i) {
    oss << (i ? ", " : "") << sizes[i];
  }
  oss << ']';
  return oss.str();
}

std::string strides_str(const Tensor& t) {
  std::ostringstream oss;
  oss << '[';
  const auto strides = t.strides();
  for (size_t i = 0; i < strides.size(); ++i) {
    oss << (i ? ", " : "") << strides[i];
  }
  oss << ']';
  return oss.str();
}

bool is_supported_value_dtype(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Half ||
      t == ScalarType::BFloat16;
}

void check_defined(const Tensor& t, const char* name) {
  STD_TORCH_CHECK(
      t.defined(), "merge_attn_states: ", name, " is an undefined tensor");
}

void check_same_device(
    const Tensor& t,
    const char* name,
    const torch::stable::Device& ref) {
  const torch::stable::Device dev = t.device();
  STD_TORCH_CHECK(
      dev == ref,
      "merge_attn_states: ",
      name,
      " must be on the same device as output (",
      device_name(ref),
      "), got ",
      device_name(dev));
}

// Checks one value tensor (output / prefix_output / suffix_output) against the
// reference dtype/shape taken from `output` and the vector-width rules.
void check_value_tensor(
    const Tensor& t,
    const char* name,
    const Tensor& output,
    int64_t vec_elems,
    int64_t vec_bytes) {
  STD_TORCH_CHECK(
      t.scalar_type() == output.scalar_type(),
      "merge_attn_states: ",
      name,
      " must have the same dtype as output (",
      scalar_type_name(output.scalar_type()),
      "), got ",
      scalar_type_name(t.scalar_type()));
  STD_TORCH_CHECK(
      t.dim() == 3,
      "merge_attn_states: ",
      name,
      " must be 3-D [num_tokens, num_heads, head_size], got ",
      t.dim(),
      "-D tensor of shape ",
      shape_str(t));
  STD_TORCH_CHECK(
      t.size(0) == output.size(0) && t.size(1) == output.size(1) &&
          t.size(2) == output.size(2),
      "merge_attn_states: ",
      name,
      " shape ",
      shape_str(t),
      " does not match output shape ",
      shape_str(output));
  if (t.numel() == 0) {
    return; // no memory is touched: strides/alignment are irrelevant
  }
  STD_TORCH_CHECK(
      t.stride(2) == 1,
      "merge_attn_states: ",
      name,
      " must be contiguous in its last (head_size) dim, got strides ",
      strides_str(t));
  STD_TORCH_CHECK(
      t.stride(0) % vec_elems == 0 && t.stride(1) % vec_elems == 0,
      "merge_attn_states: ",
      name,
      " strides ",
      strides_str(t),
      " must be multiples of ",
      vec_elems,
      " elements (",
      vec_bytes,
      "-byte vectors of ",
      scalar_type_name(t.scalar_type()),
      ")");
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  STD_TORCH_CHECK(
      addr % static_cast<std::uintptr_t>(vec_bytes) == 0,
      "merge_attn_states: ",
      name,
      " data pointer must be ",
      vec_bytes,
      "-byte aligned, got address 0x",
      std::hex,
      addr,
      std::dec,
      " (storage_offset ",
      t.storage_offset(),
      ")");
}

void check_lse_tensor(
    const Tensor& t,
    const char* name,
    int64_t num_heads,
    int64_t num_tokens) {
  STD_TORCH_CHECK(
      t.scalar_type() == ScalarType::Float,
      "merge_attn_states: ",
      name,
      " must have dtype Float (float32), got ",
      scalar_type_name(t.scalar_type()));
  STD_TORCH_CHECK(
      t.dim() == 2 && t.size(0) == num_heads && t.size(1) == num_tokens,
      "merge_attn_states: ",
      name,
      " must have shape [num_heads, num_tokens] = [",
      num_heads,
      ", ",
      num_tokens,
      "], got ",
      shape_str(t));
}

} // namespace

MergeAttnStatesDims check_merge_attn_states_inputs(
    const Tensor& output,
    const std::optional<Tensor>& output_lse,
    const Tensor& prefix_output,
    const Tensor& prefix_lse,
    const Tensor& suffix_output,
    const Tensor& suffix_lse,
    DeviceType expected_device_type,
    int64_t vec_bytes) {
  STD_TORCH_CHECK(
      vec_bytes > 0,
      "merge_attn_states: internal error: vec_bytes must be positive, got ",
      vec_bytes);

  // 1. Everything defined.
  check_defined(output, "output");
  check_defined(prefix_output, "prefix_output");
  check_defined(prefix_lse, "prefix_lse");
  check_defined(suffix_output, "suffix_output");
  check_defined(suffix_lse, "suffix_lse");
  const bool has_output_lse = output_lse.has_value() && output_lse->defined();

  // 2. Devices: output decides, and it must match the kernel's device type.
  const torch::stable::Device device = output.device();
  STD_TORCH_CHECK(
      device.type() == expected_device_type,
      "merge_attn_states: output must be a ",
      device_type_name(expected_device_type),
      " tensor for this kernel, got ",
      device_name(device));
  check_same_device(prefix_output, "prefix_output", device);
  check_same_device(suffix_output, "suffix_output", device);
  check_same_device(prefix_lse, "prefix_lse", device);
  check_same_device(suffix_lse, "suffix_lse", device);
  if (has_output_lse) {
    check_same_device(*output_lse, "output_lse", device);
  }

  // 3. Value tensors.
  const ScalarType dtype = output.scalar_type();
  STD_TORCH_CHECK(
      is_supported_value_dtype(dtype),
      "merge_attn_states: output must have dtype Float (float32), Half "
      "(float16) or BFloat16 (bfloat16), got ",
      scalar_type_name(dtype));
  STD_TORCH_CHECK(
      output.dim() == 3,
      "merge_attn_states: output must be 3-D [num_tokens, num_heads, "
      "head_size], got ",
      output.dim(),
      "-D tensor of shape ",
      shape_str(output));
  const int64_t elem_size = static_cast<int64_t>(output.element_size());
  const int64_t vec_elems = vec_bytes >= elem_size ? vec_bytes / elem_size : 1;
  const int64_t num_tokens = output.size(0);
  const int64_t num_heads = output.size(1);
  const int64_t head_size = output.size(2);
  STD_TORCH_CHECK(
      head_size > 0 && head_size % vec_elems == 0,
      "merge_attn_states: head_size (",
      head_size,
      ") must be a positive multiple of ",
      vec_elems,
      " for ",
      scalar_type_name(dtype),
      " (",
      vec_bytes,
      "-byte vectors)");
  check_value_tensor(output, "output", output, vec_elems, vec_bytes);
  check_value_tensor(
      prefix_output, "prefix_output", output, vec_elems, vec_bytes);
  check_value_tensor(
      suffix_output, "suffix_output", output, vec_elems, vec_bytes);

  // 4. LSE tensors.
  check_lse_tensor(prefix_lse, "prefix_lse", num_heads, num_tokens);
  check_lse_tensor(suffix_lse, "suffix_lse", num_heads, num_tokens);
  if (has_output_lse) {
    check_lse_tensor(*output_lse, "output_lse", num_heads, num_tokens);
  }

  return MergeAttnStatesDims{num_tokens, num_heads, head_size};
}

} // namespace stableops
