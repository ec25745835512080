// A shared object that calls a stable C shim function first exported by
// torch 2.13 (declared here by hand: the 2.11-target headers hide it). The
// ABI audit must reject it at a 2.11 target; tests/test_abi_audit.py checks
// that it does and that the message names the symbol and torch 2.13.
#include <cstdint>

extern "C" int32_t aoti_torch_dtype_float8_e8m0fnu();

extern "C" int32_t stableops_shim_probe() {
  return aoti_torch_dtype_float8_e8m0fnu();
}
