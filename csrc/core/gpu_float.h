// The GpuFloat of a tensor's dtype for a GPU entry point, raising for any
// other dtype: the one place the "no kernel for this dtype" error is written.
// Host code of .cu sources only (gpu_compat.h's GpuFloat needs the GPU
// runtime headers).
#pragma once

#include <optional>

#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/check.h"
#include "csrc/gpu_compat.h"

namespace stableops {

// Every op's shared check accepts only these dtypes before a GPU kernel runs,
// so this raising means a check and its kernel disagree; the message still
// names the op and the dtype.
inline GpuFloat gpu_float_of(const char* op, torch::headeronly::ScalarType dtype) {
  const std::optional<GpuFloat> t = to_gpu_float(dtype);
  using torch::headeronly::ScalarType;
  STD_TORCH_CHECK(t.has_value(), op, ": no GPU kernel for dtype ", scalar_type_name(dtype),
                  "; expected ",
                  dtype_list_str({ScalarType::Float, ScalarType::Half, ScalarType::BFloat16}));
  return *t;
}

}  // namespace stableops
