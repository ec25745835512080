// Shared input validation for the RMSNorm family (see the header for the
// contract). Stable ABI only.
#include "csrc/norm/rms_norm_check.h"

#include <cmath>
#include <cstdint>

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

// One row tensor of an op: its schema name and whether the op writes it.
struct RowArg {
  const char* name;
  const Tensor* tensor;
  bool written;
};

// The stride between consecutive rows when the leading dims of `t` are
// flattened ([d0, ..., dn-2, hidden] -> [rows, hidden]), or hidden when there
// is at most one row. Size-1 dims are free; every other leading dim must
// step over exactly the dims inside it.
int64_t row_stride(const char* op, const RowArg& arg, int64_t hidden) {
  const Tensor& t = *arg.tensor;
  if (t.numel() == 0) {
    return hidden; // no memory is touched
  }
  int64_t stride = -1; // of the innermost leading dim of size > 1
  int64_t expected = 0; // what the next outer dim of size > 1 must have
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) == 1) {
      continue;
    }
    if (stride < 0) {
      stride = t.stride(d);
    } else {
      STD_TORCH_CHECK(
          t.stride(d) == expected,
          op,
          ": ",
          arg.name,
          "'s leading dims cannot be viewed as rows of one stride: shape ",
          shape_str(t),
          ", strides ",
          strides_str(t),
          " (dim ",
          d,
          " has stride ",
          t.stride(d),
          ", expected ",
          expected,
          ")");
    }
    expected = t.stride(d) * t.size(d);
  }
  if (stride < 0) {
    return hidden; // one row
  }
  STD_TORCH_CHECK(
      !arg.written || stride >= hidden,
      op,
      ": ",
      arg.name,
      " is written, so its rows must not overlap: row stride ",
      stride,
      " < hidden_size ",
      hidden,
      " (shape ",
      shape_str(t),
      ", strides ",
      strides_str(t),
      ")");
  return stride;
}

// Validates the two row tensors a and b (schema order), the weight and
// epsilon. Returns the problem with everything but the operand pointers and
// strides, and the row strides of a and b.
RmsNormProblem check_family(
    const char* op,
    const RowArg& a,
    const RowArg& b,
    const Tensor* weight,
    double epsilon,
    DeviceType expected_device_type,
    int64_t (&row_strides)[2]) {
  // 1. Devices (schema order; the first row tensor is the reference).
  check_devices(
      op,
      {{a.name, a.tensor}, {b.name, b.tensor}, {"weight", weight}},
      expected_device_type);

  // 2. Dtypes.
  check_dtype(
      op,
      *a.tensor,
      a.name,
      {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16});
  check_same_dtype(op, *b.tensor, b.name, *a.tensor, a.name);
  if (weight != nullptr) {
    check_same_dtype(op, *weight, "weight", *a.tensor, a.name);
  }

  // 3. Shapes.
  check_min_dim(op, *a.tensor, a.name, 1);
  STD_TORCH_CHECK(
      b.tensor->sizes().equals(a.tensor->sizes()),
      op,
      ": ",
      b.name,
      " shape ",
      shape_str(*b.tensor),
      " does not match ",
      a.name,
      " shape ",
      shape_str(*a.tensor));
  const int64_t hidden = a.tensor->size(a.tensor->dim() - 1);
  if (weight != nullptr) {
    STD_TORCH_CHECK(
        weight->dim() == 1 && weight->size(0) == hidden,
        op,
        ": weight must be 1-D [hidden_size] = [",
        hidden,
        "], got shape ",
        shape_str(*weight));
  }

  // 4. Strides.
  check_last_dim_contiguous(op, *a.tensor, a.name);
  check_last_dim_contiguous(op, *b.tensor, b.name);
  if (weight != nullptr) {
    check_last_dim_contiguous(op, *weight, "weight");
  }
  row_strides[0] = row_stride(op, a, hidden);
  row_strides[1] = row_stride(op, b, hidden);

  // 5. Scalars.
  STD_TORCH_CHECK(
      std::isfinite(epsilon) && epsilon >= 0.0,
      op,
      ": epsilon must be a finite number >= 0, got ",
      epsilon);

  RmsNormProblem p{};
  p.op = op;
  p.weighted = weight != nullptr;
  p.dtype = a.tensor->scalar_type();
  p.device_index = a.tensor->get_device_index();
  p.rows = 1;
  for (int64_t d = 0; d + 1 < a.tensor->dim(); ++d) {
    p.rows *= a.tensor->size(d);
  }
  p.hidden = hidden;
  p.weight = weight != nullptr ? weight->data_ptr() : nullptr;
  p.epsilon = static_cast<float>(epsilon);
  return p;
}

} // namespace

RmsNormProblem check_rms_norm(
    const Tensor& result,
    const Tensor& input,
    const Tensor* weight,
    double epsilon,
    DeviceType expected_device_type) {
  int64_t strides[2];
  RmsNormProblem p = check_family(
      weight != nullptr ? "rms_norm" : "rms_norm_weightless",
      {"result", &result, true},
      {"input", &input, false},
      weight,
      epsilon,
      expected_device_type,
      strides);
  p.out = result.data_ptr();
  p.out_stride = strides[0];
  p.in = input.data_ptr();
  p.in_stride = strides[1];
  return p;
}

RmsNormProblem check_fused_add_rms_norm(
    const Tensor& input,
    const Tensor& residual,
    const Tensor* weight,
    double epsilon,
    DeviceType expected_device_type) {
  int64_t strides[2];
  RmsNormProblem p = check_family(
      weight != nullptr ? "fused_add_rms_norm"
                        : "fused_add_rms_norm_weightless",
      {"input", &input, true},
      {"residual", &residual, true},
      weight,
      epsilon,
      expected_device_type,
      strides);
  p.out = input.data_ptr();
  p.out_stride = strides[0];
  p.fused = true;
  p.in = p.out;
  p.in_stride = strides[0];
  p.residual = residual.data_ptr();
  p.res_stride = strides[1];
  return p;
}

} // namespace stableops
