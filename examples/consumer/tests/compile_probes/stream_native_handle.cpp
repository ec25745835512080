// Uses torch::stable::accelerator::Stream::nativeHandle(), which torch's
// stable headers declare only for TORCH_FEATURE_VERSION >= 2.13. Compiled by
// //tests:target_version_guard at the module's target (must fail) and at 2.13 (must
// compile): if the target version drifted upward, the first compile would
// succeed and the test would fail.
#include <torch/csrc/stable/accelerator.h>

void* example_probe_native_handle(const torch::stable::accelerator::Stream& stream) {
  return stream.nativeHandle();
}
