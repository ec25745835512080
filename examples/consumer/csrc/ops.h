// The example's one op, declared once for every backend.
#pragma once

#include <torch/csrc/stable/tensor.h>

namespace stableops_example {

// scale_(Tensor! x, float alpha) -> (): x *= alpha, float32, contiguous.
void scale_cpu(torch::stable::Tensor& x, double alpha);
void scale_gpu(torch::stable::Tensor& x, double alpha);

// Shared validation: float32, contiguous, the expected device type.
void check_scale_input(const torch::stable::Tensor& x,
                       torch::headeronly::DeviceType expected);

}  // namespace stableops_example
