"""The default torch target version, and the helpers that read versions.

The target version is the oldest torch the built binaries load into. Its
default is set here, once; a root module may raise it with
`torch.configure(target_version = ...)`. The configured value lives in the
generated @stableops_torch//:config.bzl (TORCH_TARGET_VERSION), and
everything derives from it: the C++ macro TORCH_TARGET_VERSION
(0xMMmm000000000000, major and minor in the top bytes) on every stable-ABI
compile, the wheel's Requires-Dist, the target-version guard test, the ABI
audit's shim reference and the torch runtimes tests run under.
"""

# The oldest torch the shipped binaries must load into (MAJOR.MINOR), unless
# the root module configures another.
DEFAULT_TORCH_TARGET_VERSION = "2.11"

# The oldest torch whose headers can build stableops at all.
MIN_TORCH_VERSION = "2.11"

_HEX = "0123456789ABCDEF"

def parse_version(version):
    """'2.13.0+cu130' -> [2, 13, 0]: the leading numeric components.

    Args:
      version: a version string (torch's, or MAJOR.MINOR).

    Returns:
      The list of its leading numeric components.
    """
    out = []
    for part in version.split("+")[0].split("."):
        digits = ""
        for c in part.elems():
            if not c.isdigit():
                break
            digits += c
        if not digits:
            break
        out.append(int(digits))
    return out

def _byte_hex(n):
    return _HEX[n // 16] + _HEX[n % 16]

def target_version_hex(version):
    """'2.11' -> '0x020B000000000000ULL', failing on anything below the minimum.

    Args:
      version: the target version, MAJOR.MINOR.

    Returns:
      The value of the TORCH_TARGET_VERSION macro.
    """
    parts = parse_version(version)
    if len(parts) < 2 or parts[0] > 255 or parts[1] > 255 or parts < parse_version(MIN_TORCH_VERSION):
        fail(("stableops: expected a torch target version MAJOR.MINOR >= {}, found '{}'; fix " +
              "torch.configure(target_version = ...) in the root MODULE.bazel (or the versions " +
              "given to stable_target_version_test)").format(MIN_TORCH_VERSION, version))
    return "0x" + _byte_hex(parts[0]) + _byte_hex(parts[1]) + "000000000000ULL"
