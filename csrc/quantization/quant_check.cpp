// Shared input validation of the quantization ops (see quant_check.h for the
// contract). Stable ABI only; reads shapes, strides and dtypes, never data.
#include "csrc/quantization/quant_check.h"

#include <cstdint>
#include <sstream>
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

bool present(const std::optional<Tensor>& t) {
  return t.has_value() && t->defined();
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::ostringstream oss;
  oss << '[';
  for (size_t i = 0; i < v.size(); ++i) {
    oss << (i ? ", " : "") << v[i];
  }
  oss << ']';
  return oss.str();
}

// The stride between consecutive rows of `t` viewed as [T, H] (the leading
// dims flattened), or a RuntimeError when no single stride describes them.
// Size-1 dims never matter; with no leading dim of size > 1 the value is H.
int64_t row_stride(const char* op, const Tensor& t, const char* name) {
  const int64_t n = t.dim();
  int64_t stride = -1;
  int64_t expect = 0;
  for (int64_t d = n - 2; d >= 0; --d) {
    const int64_t size = t.size(d);
    if (size == 1) {
      continue;
    }
    if (stride < 0) {
      stride = t.stride(d);
    } else {
      STD_TORCH_CHECK(
          t.stride(d) == expect,
          op,
          ": ",
          name,
          " leading dims of shape ",
          shape_str(t),
          " and strides ",
          strides_str(t),
          " cannot be viewed as rows with one stride (dim ",
          d,
          " has stride ",
          t.stride(d),
          ", expected ",
          expect,
          ")");
    }
    expect = t.stride(d) * size;
  }
  return stride < 0 ? t.size(n - 1) : stride;
}

// Checks input and result (dtypes excluded) and returns their row view.
QuantRows check_rows(const char* op, const Tensor& result, const Tensor& input) {
  check_dtype(
      op, input, "input",
      {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16});
  check_min_dim(op, input, "input", 2);
  STD_TORCH_CHECK(
      result.sizes().equals(input.sizes()),
      op,
      ": result shape ",
      shape_str(result),
      " does not match input shape ",
      shape_str(input));
  QuantRows rows;
  rows.hidden = input.size(input.dim() - 1);
  rows.num_rows = 1;
  for (int64_t d = 0; d + 1 < input.dim(); ++d) {
    rows.num_rows *= input.size(d);
  }
  if (input.numel() == 0) {
    // No memory is read or written: strides are irrelevant.
    rows.in_row_stride = rows.hidden;
    rows.out_row_stride = rows.hidden;
    return rows;
  }
  check_last_dim_contiguous(op, input, "input");
  check_last_dim_contiguous(op, result, "result");
  rows.in_row_stride = row_stride(op, input, "input");
  rows.out_row_stride = row_stride(op, result, "result");
  STD_TORCH_CHECK(
      rows.num_rows == 1 || rows.out_row_stride >= rows.hidden,
      op,
      ": result rows overlap: row stride ",
      rows.out_row_stride,
      " is less than hidden size ",
      rows.hidden,
      " (result strides ",
      strides_str(result),
      ")");
  return rows;
}

fp8::Format check_fp8_result(const char* op, const Tensor& result) {
  check_dtype(
      op, result, "result",
      {ScalarType::Float8_e4m3fn, ScalarType::Float8_e4m3fnuz});
  fp8::Format format = fp8::Format::kE4M3FN;
  fp8::format_of(result.scalar_type(), &format);
  return format;
}

void check_one_element(const char* op, const Tensor& t, const char* name) {
  STD_TORCH_CHECK(
      t.numel() == 1,
      op,
      ": ",
      name,
      " must have one element, got shape ",
      shape_str(t));
}

// A per-row tensor (scale or azp): 2-D [T, 1], rows not aliased. Returns the
// row stride.
int64_t check_per_row(
    const char* op,
    const Tensor& t,
    const char* name,
    int64_t num_rows) {
  STD_TORCH_CHECK(
      t.dim() == 2 && t.size(0) == num_rows && t.size(1) == 1,
      op,
      ": ",
      name,
      " must have shape [num_tokens, 1] = [",
      num_rows,
      ", 1], got ",
      shape_str(t));
  STD_TORCH_CHECK(
      num_rows <= 1 || t.stride(0) != 0,
      op,
      ": ",
      name,
      " rows overlap (row stride 0, strides ",
      strides_str(t),
      ")");
  return t.stride(0);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// What every quantization op checks first, in this order: devices (schema
// order: result, input, scale, then the optional `extra`, scale_ub or azp),
// the result's dtype (FP8, whose format goes to *format, or int8), scale
// float32, the extra's dtype, then input and the row views.
QuantRows check_common(
    const char* op,
    const Tensor& result,
    const Tensor& input,
    const Tensor& scale,
    const char* extra_name,
    const std::optional<Tensor>& extra,
    ScalarType extra_dtype,
    fp8::Format* format,
    DeviceType expected_device_type) {
  const bool has_extra = present(extra);
  check_devices(
      op,
      {{"result", &result},
       {"input", &input},
       {"scale", &scale},
       {extra_name, has_extra ? &*extra : nullptr}},
      expected_device_type);
  if (format != nullptr) {
    *format = check_fp8_result(op, result);
  } else {
    check_dtype(op, result, "result", {ScalarType::Char});
  }
  check_dtype(op, scale, "scale", {ScalarType::Float});
  if (has_extra) {
    check_dtype(op, *extra, extra_name, {extra_dtype});
  }
  return check_rows(op, result, input);
}

}  // namespace

StaticFp8Plan check_static_scaled_fp8_quant(
    const Tensor& result,
    const Tensor& input,
    const Tensor& scale,
    const std::optional<std::vector<int64_t>>& group_shape,
    DeviceType expected_device_type) {
  constexpr const char* kOp = "static_scaled_fp8_quant";
  StaticFp8Plan plan;
  plan.rows = check_common(
      kOp, result, input, scale, "", std::nullopt, ScalarType::Float,
      &plan.format, expected_device_type);
  const int64_t T = plan.rows.num_rows;
  const int64_t H = plan.rows.hidden;
  const int64_t full_m = T > 0 ? T : 1;
  const int64_t full_n = H > 0 ? H : 1;

  if (group_shape.has_value()) {
    const std::vector<int64_t>& g = *group_shape;
    STD_TORCH_CHECK(
        g.size() == 2,
        kOp,
        ": group_shape must have 2 entries [group_m, group_n], got ",
        ints_str(g));
    STD_TORCH_CHECK(
        (g[0] >= 1 || g[0] == -1) && (g[1] >= 1 || g[1] == -1),
        kOp,
        ": group_shape entries must be positive (or -1 for the whole dim), got ",
        ints_str(g));
    plan.group_m = g[0] == -1 ? full_m : g[0];
    plan.group_n = g[1] == -1 ? full_n : g[1];
    const int64_t want_m = ceil_div(T, plan.group_m);
    const int64_t want_n = ceil_div(H, plan.group_n);
    if (scale.numel() == 1 && want_m == 1 && want_n == 1) {
      // One group covers the input: per-tensor.
      plan.group_m = full_m;
      plan.group_n = full_n;
      return plan;
    }
    STD_TORCH_CHECK(
        scale.dim() == 2 && scale.size(0) == want_m && scale.size(1) == want_n,
        kOp,
        ": scale shape ",
        shape_str(scale),
        " does not match group_shape ",
        ints_str(g),
        " on input rows x hidden [",
        T,
        ", ",
        H,
        "]: expected [",
        want_m,
        ", ",
        want_n,
        "]");
    plan.scale_stride_m = scale.stride(0);
    plan.scale_stride_n = scale.stride(1);
    return plan;
  }

  if (scale.numel() == 1) {  // per-tensor
    plan.group_m = full_m;
    plan.group_n = full_n;
  } else if (scale.dim() == 2 && scale.size(0) == T && scale.size(1) == 1) {
    plan.group_m = 1;  // per-token
    plan.group_n = full_n;
    plan.scale_stride_m = scale.stride(0);
  } else if (scale.dim() == 2 && scale.size(0) == 1 && scale.size(1) == H) {
    plan.group_m = full_m;  // per-channel
    plan.group_n = 1;
    plan.scale_stride_n = scale.stride(1);
  } else {
    STD_TORCH_CHECK(
        false,
        kOp,
        ": scale shape ",
        shape_str(scale),
        " is neither one element (per-tensor), [num_tokens, 1] = [",
        T,
        ", 1] (per-token) nor [1, hidden] = [1, ",
        H,
        "] (per-channel); pass group_shape for block scales");
  }
  return plan;
}

DynamicFp8Plan check_dynamic_scaled_fp8_quant(
    const Tensor& result,
    const Tensor& input,
    const Tensor& scale,
    DeviceType expected_device_type) {
  constexpr const char* kOp = "dynamic_scaled_fp8_quant";
  DynamicFp8Plan plan;
  plan.rows = check_common(
      kOp, result, input, scale, "", std::nullopt, ScalarType::Float,
      &plan.format, expected_device_type);
  check_one_element(kOp, scale, "scale");
  return plan;
}

PerTokenFp8Plan check_dynamic_per_token_scaled_fp8_quant(
    const Tensor& result,
    const Tensor& input,
    const Tensor& scale,
    const std::optional<Tensor>& scale_ub,
    DeviceType expected_device_type) {
  constexpr const char* kOp = "dynamic_per_token_scaled_fp8_quant";
  PerTokenFp8Plan plan;
  plan.rows = check_common(
      kOp, result, input, scale, "scale_ub", scale_ub, ScalarType::Float,
      &plan.format, expected_device_type);
  plan.scale_stride = check_per_row(kOp, scale, "scale", plan.rows.num_rows);
  plan.has_scale_ub = present(scale_ub);
  if (plan.has_scale_ub) {
    check_one_element(kOp, *scale_ub, "scale_ub");
  }
  return plan;
}

StaticInt8Plan check_static_scaled_int8_quant(
    const Tensor& result,
    const Tensor& input,
    const Tensor& scale,
    const std::optional<Tensor>& azp,
    DeviceType expected_device_type) {
  constexpr const char* kOp = "static_scaled_int8_quant";
  StaticInt8Plan plan;
  plan.rows = check_common(
      kOp, result, input, scale, "azp", azp, ScalarType::Int, nullptr,
      expected_device_type);
  check_one_element(kOp, scale, "scale");
  plan.has_azp = present(azp);
  if (plan.has_azp) {
    check_one_element(kOp, *azp, "azp");
  }
  return plan;
}

DynamicInt8Plan check_dynamic_scaled_int8_quant(
    const Tensor& result,
    const Tensor& input,
    const Tensor& scale,
    const std::optional<Tensor>& azp,
    DeviceType expected_device_type) {
  constexpr const char* kOp = "dynamic_scaled_int8_quant";
  DynamicInt8Plan plan;
  plan.rows = check_common(
      kOp, result, input, scale, "azp", azp, ScalarType::Int, nullptr,
      expected_device_type);
  plan.scale_stride = check_per_row(kOp, scale, "scale", plan.rows.num_rows);
  plan.has_azp = present(azp);
  if (plan.has_azp) {
    plan.azp_stride = check_per_row(kOp, *azp, "azp", plan.rows.num_rows);
  }
  return plan;
}

}  // namespace stableops
