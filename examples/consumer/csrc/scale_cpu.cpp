#include <cstdint>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>

#include "ops.h"

namespace stableops_example {

void check_scale_input(const torch::stable::Tensor& x,
                       torch::headeronly::DeviceType expected) {
  STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float,
                  "scale_: x must be float32, got dtype code ",
                  static_cast<int>(x.scalar_type()));
  STD_TORCH_CHECK(x.is_contiguous(), "scale_: x must be contiguous");
  STD_TORCH_CHECK(x.device().type() == expected,
                  "scale_: x is on the wrong device type (code ",
                  static_cast<int>(x.device().type()), ")");
}

void scale_cpu(torch::stable::Tensor& x, double alpha) {
  check_scale_input(x, torch::headeronly::DeviceType::CPU);
  float* data = static_cast<float*>(x.data_ptr());
  const float a = static_cast<float>(alpha);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) data[i] *= a;
}

}  // namespace stableops_example
