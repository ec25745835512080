// Shared input validation for stableops::merge_attn_states (see the header for
// the contract). Stable ABI only.
#include "csrc/attention/merge_attn_states_check.h"

#include <cstdint>
#include <string>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/check.h"

namespace stableops {

using torch::headeronly::DeviceType;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace {

constexpr const char* kOp = "merge_attn_states";

// Checks one value tensor (output / prefix_output / suffix_output) against the
// reference dtype/shape taken from `output` and the vector-width rules.
void check_value_tensor(
    const Tensor& t,
    const char* name,
    const Tensor& output,
    int64_t vec_elems,
    int64_t vec_bytes) {
  check_same_dtype(kOp, t, name, output, "output");
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
  check_dtype(kOp, t, name, {ScalarType::Float});
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

  // 1. Devices (schema order; output is the reference), defined tensors.
  const bool has_output_lse = output_lse.has_value() && output_lse->defined();
  check_devices(
      kOp,
      {{"output", &output},
       {"output_lse", has_output_lse ? &*output_lse : nullptr},
       {"prefix_output", &prefix_output},
       {"prefix_lse", &prefix_lse},
       {"suffix_output", &suffix_output},
       {"suffix_lse", &suffix_lse}},
      expected_device_type);

  // 2. Value tensors.
  const ScalarType dtype = output.scalar_type();
  check_dtype(
      kOp, output, "output",
      {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16});
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

  // 3. LSE tensors.
  check_lse_tensor(prefix_lse, "prefix_lse", num_heads, num_tokens);
  check_lse_tensor(suffix_lse, "suffix_lse", num_heads, num_tokens);
  if (has_output_lse) {
    check_lse_tensor(*output_lse, "output_lse", num_heads, num_tokens);
  }

  return MergeAttnStatesDims{num_tokens, num_heads, head_size};
}

} // namespace stableops
