// Shared input validation for the activation ops (see the header for the
// contract). Stable ABI only.
#include "csrc/activation/activation_check.h"

#include <cstdint>
#include <string>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/check.h"

namespace stableops {

using activation::Info;
using activation::Layout;
using activation::Scalars;
using torch::headeronly::DeviceType;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace {

// "[a, b, ..., last]" for t's shape with the last dim replaced.
std::string shape_with_last(const Tensor& t, int64_t last) {
  std::string s = "[";
  for (int64_t i = 0; i + 1 < t.dim(); ++i) {
    s += std::to_string(t.size(i)) + ", ";
  }
  return s + std::to_string(last) + "]";
}

bool same_shape(const Tensor& a, const Tensor& b, int64_t b_last) {
  if (a.dim() != b.dim()) {
    return false;
  }
  for (int64_t i = 0; i + 1 < a.dim(); ++i) {
    if (a.size(i) != b.size(i)) {
      return false;
    }
  }
  return a.size(a.dim() - 1) == b_last;
}

// The stride between consecutive rows of t when its leading dims (all but the
// last) are viewed as one dim of rows; size-1 dims do not matter. 0 when
// there is at most one row.
int64_t row_stride(const char* op, const Tensor& t, const char* name) {
  int64_t stride = 0;
  int64_t span = 0; // stride * size of the leading dim inside dim i
  bool found = false;
  for (int64_t i = t.dim() - 2; i >= 0; --i) {
    const int64_t n = t.size(i);
    if (n == 1) {
      continue;
    }
    if (!found) {
      stride = t.stride(i);
      found = true;
    } else {
      STD_TORCH_CHECK(
          t.stride(i) == span,
          op,
          ": ",
          name,
          " of shape ",
          shape_str(t),
          " and strides ",
          strides_str(t),
          " cannot be viewed as rows with one stride (dim ",
          i,
          " has stride ",
          t.stride(i),
          ", rows of the dims inside it need ",
          span,
          ")");
    }
    span = t.stride(i) * n;
  }
  return stride;
}

void check_scalars(const Info& info, const Scalars& s) {
  if (info.scalars & activation::kAlpha) {
    STD_TORCH_CHECK(
        s.alpha == s.alpha, info.name, ": alpha must not be NaN, got ", s.alpha);
  }
  if (info.scalars & activation::kLimit) {
    STD_TORCH_CHECK(
        s.limit >= 0.0,
        info.name,
        ": limit must be a number >= 0, got ",
        s.limit);
  }
  if (info.scalars & activation::kThreshold) {
    STD_TORCH_CHECK(
        s.threshold == s.threshold,
        info.name,
        ": threshold must not be NaN, got ",
        s.threshold);
  }
}

} // namespace

ActivationDims check_activation(
    const Info& info,
    const Scalars& scalars,
    const Tensor& out,
    const Tensor& input,
    DeviceType expected_device_type) {
  const char* op = info.name;
  const char* out_name = info.out_name;

  // 1. Devices (schema order: the output is the reference).
  check_devices(
      op, {{out_name, &out}, {"input", &input}}, expected_device_type);

  // 2. Dtypes.
  const auto dtypes = {
      ScalarType::Float, ScalarType::Half, ScalarType::BFloat16};
  check_dtype(op, out, out_name, dtypes);
  check_dtype(op, input, "input", dtypes);
  check_same_dtype(op, input, "input", out, out_name);

  // 3. Shapes.
  check_min_dim(op, input, "input", 1);
  const int64_t in_last = input.size(input.dim() - 1);
  const bool gated = info.layout != Layout::kElementwise;
  if (gated) {
    STD_TORCH_CHECK(
        in_last % 2 == 0,
        op,
        ": input must have an even last dim (2 * d), got ",
        in_last,
        " (shape ",
        shape_str(input),
        ")");
  }
  const int64_t d = gated ? in_last / 2 : in_last;
  STD_TORCH_CHECK(
      same_shape(out, input, d),
      op,
      ": ",
      out_name,
      " must have shape ",
      shape_with_last(input, d),
      gated ? " (input's with the last dim halved)" : " (input's)",
      ", got ",
      shape_str(out));
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < input.dim(); ++i) {
    rows *= input.size(i);
  }

  // 4. Strides (irrelevant when no element is touched).
  if (rows == 0 || d == 0) {
    check_scalars(info, scalars);
    return ActivationDims{rows, d, 0, 0};
  }
  check_last_dim_contiguous(op, out, out_name);
  check_last_dim_contiguous(op, input, "input");
  const int64_t out_stride = row_stride(op, out, out_name);
  const int64_t in_stride = row_stride(op, input, "input");
  STD_TORCH_CHECK(
      rows == 1 || out_stride >= d,
      op,
      ": the rows of ",
      out_name,
      " overlap: row stride ",
      out_stride,
      " is less than the row length ",
      d,
      " (strides ",
      strides_str(out),
      ")");

  // 5. Scalar arguments.
  check_scalars(info, scalars);

  if (info.layout == Layout::kElementwise && rows > 1 && in_stride == d &&
      out_stride == d) {
    return ActivationDims{1, rows * d, rows * d, rows * d};
  }
  return ActivationDims{rows, d, in_stride, out_stride};
}

} // namespace stableops
