// Shared input validation for stableops::merge_attn_states (see the header for
// the contract). Stable ABI only.
#include "csrc/attention/merge_attn_states_check.h"

#include <algorithm>
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

// Checks one value tensor (output / prefix_output / suffix_output): 3-D, the
// shape of `output`, and the vector-width rules: `vec_elems` elements per
// vector, whose bytes depend on the tensor's own element size.
void check_value_tensor(
    const Tensor& t,
    const char* name,
    const Tensor& output,
    int64_t vec_elems) {
  const int64_t vec_bytes = vec_elems * static_cast<int64_t>(t.element_size());
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
    std::optional<int64_t> prefill_tokens_with_context,
    const std::optional<Tensor>& output_scale,
    DeviceType expected_device_type,
    int64_t vec_bytes) {
  STD_TORCH_CHECK(
      vec_bytes > 0,
      "merge_attn_states: internal error: vec_bytes must be positive, got ",
      vec_bytes);

  // 1. Devices (schema order; output is the reference), defined tensors.
  const bool has_output_lse = output_lse.has_value() && output_lse->defined();
  const bool has_scale = output_scale.has_value() && output_scale->defined();
  check_devices(
      kOp,
      {{"output", &output},
       {"output_lse", has_output_lse ? &*output_lse : nullptr},
       {"prefix_output", &prefix_output},
       {"prefix_lse", &prefix_lse},
       {"suffix_output", &suffix_output},
       {"suffix_lse", &suffix_lse},
       {"output_scale", has_scale ? &*output_scale : nullptr}},
      expected_device_type);

  // 2. Dtypes: the inputs share one of float32/float16/bfloat16; the output
  // has it too, or is FP8 exactly when output_scale is given.
  fp8::Format format = fp8::Format::kE4M3FN;
  if (has_scale) {
    STD_TORCH_CHECK(
        fp8::format_of(output.scalar_type(), &format),
        "merge_attn_states: output must have dtype Float8_e4m3fn or "
        "Float8_e4m3fnuz when output_scale is given, got ",
        scalar_type_name(output.scalar_type()));
    check_dtype(
        kOp, prefix_output, "prefix_output",
        {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16});
    check_same_dtype(kOp, suffix_output, "suffix_output", prefix_output, "prefix_output");
    check_dtype(kOp, *output_scale, "output_scale", {ScalarType::Float});
    STD_TORCH_CHECK(
        output_scale->numel() == 1,
        "merge_attn_states: output_scale must have one element, got shape ",
        shape_str(*output_scale));
  } else {
    fp8::Format unused;
    STD_TORCH_CHECK(
        !fp8::format_of(output.scalar_type(), &unused),
        "merge_attn_states: output has dtype ",
        scalar_type_name(output.scalar_type()),
        ", which needs output_scale (an FP8 output holds merged / scale)");
    check_dtype(
        kOp, output, "output",
        {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16});
    check_same_dtype(kOp, prefix_output, "prefix_output", output, "output");
    check_same_dtype(kOp, suffix_output, "suffix_output", output, "output");
  }
  STD_TORCH_CHECK(
      !prefill_tokens_with_context.has_value() || *prefill_tokens_with_context >= 0,
      "merge_attn_states: prefill_tokens_with_context must be >= 0 or None, got ",
      prefill_tokens_with_context.value_or(0));

  // 3. Shapes and vector rules.
  STD_TORCH_CHECK(
      output.dim() == 3,
      "merge_attn_states: output must be 3-D [num_tokens, num_heads, "
      "head_size], got ",
      output.dim(),
      "-D tensor of shape ",
      shape_str(output));
  const ScalarType in_dtype = prefix_output.scalar_type();
  const int64_t in_elem_size = static_cast<int64_t>(prefix_output.element_size());
  const int64_t vec_elems = vec_bytes >= in_elem_size ? vec_bytes / in_elem_size : 1;
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
      scalar_type_name(in_dtype),
      " (",
      vec_bytes,
      "-byte vectors)");
  check_value_tensor(output, "output", output, vec_elems);
  check_value_tensor(prefix_output, "prefix_output", output, vec_elems);
  check_value_tensor(suffix_output, "suffix_output", output, vec_elems);

  // 4. LSE tensors.
  check_lse_tensor(prefix_lse, "prefix_lse", num_heads, num_tokens);
  check_lse_tensor(suffix_lse, "suffix_lse", num_heads, num_tokens);
  if (has_output_lse) {
    check_lse_tensor(*output_lse, "output_lse", num_heads, num_tokens);
  }

  const int64_t merge_tokens = prefill_tokens_with_context.has_value()
      ? std::min(*prefill_tokens_with_context, num_tokens)
      : num_tokens;
  return MergeAttnStatesDims{num_tokens, num_heads, head_size, merge_tokens, has_scale, format};
}

} // namespace stableops
