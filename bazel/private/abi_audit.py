"""ABI audit of a stable-ABI PyTorch extension shared object.

Checks, using binutils' readelf (``-W --dyn-syms``, ``-d``, ``-V``):

* NEEDED: only libtorch_cpu.so plus system libraries (libc, libm, libstdc++,
  libgcc_s, ld-linux, libdl, libpthread, librt), plus any extra patterns given
  (e.g. GPU builds may allow libtorch_cuda.so / libcudart), plus the HIP
  runtime (libamdhip64.so.N and its hip_x.y symbol versions) with
  ``allow_hip_runtime`` (ROCm builds).
* Undefined dynamic symbols: unversioned ones only from the stable C shim
  (``aoti_torch_*``, ``torch_*``) or a small allow-list of toolchain symbols
  (``__gmon_start__``, ``_ITM_*``, ...); versioned ones only with system
  version tags (GLIBC_*, GLIBCXX_*, CXXABI_*, GCC_*). Anything else (c10::,
  at::, torch:: C++ symbols, ...) means the library is not stable-ABI only.
* Symbol-version floors: highest GLIBC_x <= --max_glibc (default 2.17) and
  highest GLIBCXX_x <= --max_glibcxx (default 3.4.24, manylinux_2_28's GCC 8),
  so the library loads on old distributions.
* Shim versions (with --target_torch and --shim_symbols): every undefined
  shim symbol must be exported by torch's libtorch_cpu.so at the target
  version, and every shim name the library looks up at run time (a
  ``aoti_torch_*`` string in .rodata, such as the current-stream getter that
  gpu_compat.h finds with dlsym) by its libtorch_cuda.so. The reference is the
  known torch build whose MAJOR.MINOR equals the target, else the newest one
  below it. A failure names the symbol and the first known torch version
  exporting it.
* No TEXTREL.

Reusable as a module (``audit(path, ...) -> AuditReport``) and as a CLI:

    python bazel/private/abi_audit.py --so=python/stableops/_C.abi3.so \
        --target_torch=2.11 --shim_symbols=2.11.0=libtorch_cpu.txt ...

which prints a report and exits non-zero on any violation. Designed so a Bazel
test rule can run it on any .so.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence

DEFAULT_MAX_GLIBC = "2.17"
DEFAULT_MAX_GLIBCXX = "3.4.24"  # manylinux_2_28 (GCC 8 libstdc++)

#: NEEDED entries always allowed (regexes, full match).
SYSTEM_NEEDED = (
    r"libc\.so\.6",
    r"libm\.so\.6",
    r"libstdc\+\+\.so\.6",
    r"libgcc_s\.so\.1",
    r"ld-linux[-\w.]*\.so\.\d+",
    r"libdl\.so\.2",
    r"libpthread\.so\.0",
    r"librt\.so\.1",
)
TORCH_NEEDED = (r"libtorch_cpu\.so",)
#: ROCm builds link the HIP runtime dynamically (allow_hip_runtime=True /
#: --allow_hip_runtime): its NEEDED entry and its versioned symbols (hip_4.2, ...).
HIP_RUNTIME_NEEDED = (r"libamdhip64\.so\.\d+",)
HIP_RUNTIME_VERSION_TAG = re.compile(r"hip_\d+(?:\.\d+)*$")

#: Unversioned undefined symbols allowed (stable C shim of libtorch).
SHIM_PREFIXES = ("aoti_torch_", "torch_")
#: Unversioned undefined symbols the toolchain may leave behind.
TOOLCHAIN_UNVERSIONED = frozenset(
    {
        "__gmon_start__",
        "_ITM_deregisterTMCloneTable",
        "_ITM_registerTMCloneTable",
        "_Jv_RegisterClasses",
        "__cxa_finalize",
        # weak reference emitted by libstdc++'s gthr-posix.h (glibc < 2.34)
        "__pthread_key_create",
    }
)
#: Version tags of system libraries.
SYSTEM_VERSION_TAG = re.compile(r"(GLIBC|GLIBCXX|CXXABI|GCC)_(\d+(?:\.\d+)*)$")
#: Mangled C++ namespaces that must never be referenced (non-stable ABI).
FORBIDDEN_MANGLED = ("_ZN3c10", "_ZN2at", "_ZNK3c10", "_ZNK2at", "_ZN5torch", "_ZNK5torch")


@dataclasses.dataclass(frozen=True)
class Symbol:
    name: str
    version: str | None  # e.g. "GLIBC_2.14"; None when unversioned
    bind: str  # GLOBAL / WEAK / LOCAL
    type: str  # FUNC / OBJECT / NOTYPE / ...
    ndx: str  # "UND" for undefined

    @property
    def undefined(self) -> bool:
        return self.ndx == "UND"


@dataclasses.dataclass
class AuditReport:
    path: str
    needed: list[str]
    undefined: list[Symbol]
    version_needs: dict[str, list[str]]  # file -> version names
    max_versions: dict[str, str]  # "GLIBC" -> "2.14", ...
    runpath: list[str]
    textrel: bool
    errors: list[str]
    runtime_lookups: list[str] = dataclasses.field(default_factory=list)
    shim_reference: str | None = None  # "torch 2.11.0 (target 2.11)"

    @property
    def ok(self) -> bool:
        return not self.errors

    def format(self) -> str:
        lines = [f"ABI audit of {self.path}"]
        lines.append("  NEEDED: " + ", ".join(self.needed))
        if self.runpath:
            lines.append("  RUNPATH/RPATH: " + ":".join(self.runpath))
        for tag in ("GLIBC", "GLIBCXX", "CXXABI", "GCC"):
            lines.append(f"  highest {tag}: {self.max_versions.get(tag, '-')}")
        shim = sorted(s.name for s in self.undefined if s.version is None and s.name.startswith(SHIM_PREFIXES))
        lines.append(f"  undefined stable-shim symbols: {len(shim)}")
        if self.runtime_lookups:
            lines.append("  shim names looked up at run time: " + ", ".join(self.runtime_lookups))
        if self.shim_reference:
            lines.append(f"  shim symbols checked against {self.shim_reference}")
        lines.append(f"  undefined symbols total: {len(self.undefined)}")
        if self.errors:
            lines.append(f"  FAILED ({len(self.errors)} problem(s)):")
            lines.extend(f"    - {e}" for e in self.errors)
        else:
            lines.append("  OK")
        return "\n".join(lines)


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def run_readelf(args: Sequence[str], path: str, readelf: str = "readelf") -> str:
    exe = shutil.which(readelf) or readelf
    proc = subprocess.run(
        [exe, *args, path], check=True, capture_output=True, text=True, errors="replace"
    )
    return proc.stdout


_SYM_LINE = re.compile(
    r"^\s*\d+:\s+[0-9a-fA-F]+\s+\S+\s+(?P<type>\S+)\s+(?P<bind>\S+)\s+\S+\s+(?P<ndx>\S+)(?:\s+(?P<name>.*))?$"
)


def parse_dyn_syms(text: str) -> list[Symbol]:
    """Parses ``readelf -W --dyn-syms`` output."""
    syms = []
    for line in text.splitlines():
        m = _SYM_LINE.match(line)
        if not m:
            continue
        raw = (m.group("name") or "").strip()
        raw = re.sub(r"\s+\(\d+\)$", "", raw)  # trailing " (3)" version index
        if not raw:
            continue
        name, version = raw, None
        if "@" in raw:
            name, _, version = raw.partition("@")
            version = version.lstrip("@") or None
        syms.append(Symbol(name, version, m.group("bind"), m.group("type"), m.group("ndx")))
    return syms


def parse_dynamic(text: str) -> tuple[list[str], list[str], bool]:
    """Parses ``readelf -d``: (NEEDED list, RUNPATH/RPATH entries, TEXTREL)."""
    needed: list[str] = []
    runpath: list[str] = []
    textrel = False
    for line in text.splitlines():
        if "(NEEDED)" in line:
            m = re.search(r"\[(.*)\]", line)
            if m:
                needed.append(m.group(1))
        elif "(RUNPATH)" in line or "(RPATH)" in line:
            m = re.search(r"\[(.*)\]", line)
            if m:
                runpath.extend(p for p in m.group(1).split(":") if p)
        elif "(TEXTREL)" in line or ("(FLAGS)" in line and "TEXTREL" in line):
            textrel = True
    return needed, runpath, textrel


def parse_version_needs(text: str) -> dict[str, list[str]]:
    """Parses the '.gnu.version_r' part of ``readelf -V``: file -> versions."""
    out: dict[str, list[str]] = {}
    current: str | None = None
    in_needs = False
    for line in text.splitlines():
        if "Version needs section" in line:
            in_needs = True
            continue
        if in_needs and line.startswith(("Version symbols section", "Version definition section")):
            in_needs = False
        if not in_needs:
            continue
        m = re.search(r"File:\s+(\S+)", line)
        if m:
            current = m.group(1)
            out.setdefault(current, [])
            continue
        m = re.search(r"Name:\s+(\S+)", line)
        if m and current is not None:
            out[current].append(m.group(1))
    return out


def _max_versions(versions: Iterable[str]) -> dict[str, str]:
    best: dict[str, tuple[int, ...]] = {}
    for v in versions:
        m = SYSTEM_VERSION_TAG.match(v)
        if not m:
            continue
        tag, num = m.group(1), version_tuple(m.group(2))
        if tag not in best or num > best[tag]:
            best[tag] = num
    return {tag: ".".join(map(str, num)) for tag, num in best.items()}


def check(
    path: str,
    dyn_syms_text: str,
    dynamic_text: str,
    versions_text: str,
    *,
    max_glibc: str | None = DEFAULT_MAX_GLIBC,
    max_glibcxx: str | None = DEFAULT_MAX_GLIBCXX,
    extra_needed: Sequence[str] = (),
    extra_unversioned: Sequence[str] = (),
    allow_hip_runtime: bool = False,
) -> AuditReport:
    """Audits already-captured readelf outputs (pure; used by tests)."""
    errors: list[str] = []
    if allow_hip_runtime:
        extra_needed = (*extra_needed, *HIP_RUNTIME_NEEDED)
    needed, runpath, textrel = parse_dynamic(dynamic_text)
    syms = parse_dyn_syms(dyn_syms_text)
    undefined = [s for s in syms if s.undefined]
    version_needs = parse_version_needs(versions_text)

    allowed_needed = [re.compile(p) for p in (*TORCH_NEEDED, *SYSTEM_NEEDED, *extra_needed)]
    for lib in needed:
        if not any(p.fullmatch(lib) for p in allowed_needed):
            errors.append(f"NEEDED library not allowed: {lib}")
    if not any(re.fullmatch(TORCH_NEEDED[0], lib) for lib in needed):
        errors.append("libtorch_cpu.so is not NEEDED (stable shim symbols would be unresolved)")

    allowed_unversioned = set(TOOLCHAIN_UNVERSIONED) | set(extra_unversioned)
    for s in undefined:
        if s.name.startswith(FORBIDDEN_MANGLED):
            errors.append(f"undefined non-stable libtorch C++ symbol: {s.name}")
        elif s.version is None:
            if not (s.name.startswith(SHIM_PREFIXES) or s.name in allowed_unversioned):
                errors.append(f"undefined unversioned symbol not from the stable shim: {s.name}")
        elif not SYSTEM_VERSION_TAG.match(s.version) and not (
            allow_hip_runtime and HIP_RUNTIME_VERSION_TAG.match(s.version)
        ):
            errors.append(f"undefined symbol with non-system version: {s.name}@{s.version}")

    all_versions = [s.version for s in undefined if s.version] + [
        v for vs in version_needs.values() for v in vs
    ]
    max_versions = _max_versions(all_versions)
    for tag, bound in (("GLIBC", max_glibc), ("GLIBCXX", max_glibcxx)):
        have = max_versions.get(tag)
        if bound and have and version_tuple(have) > version_tuple(bound):
            offenders = sorted(
                {
                    f"{s.name}@{s.version}"
                    for s in undefined
                    if s.version
                    and s.version.startswith(tag + "_")
                    and version_tuple(s.version[len(tag) + 1 :]) > version_tuple(bound)
                }
            )
            errors.append(
                f"highest {tag} version {have} exceeds {bound}"
                + (f" (symbols: {', '.join(offenders)})" if offenders else "")
            )
    if textrel:
        errors.append("library has TEXTREL (not position independent)")
    return AuditReport(
        path=path,
        needed=needed,
        undefined=undefined,
        version_needs=version_needs,
        max_versions=max_versions,
        runpath=runpath,
        textrel=textrel,
        errors=errors,
    )


#: torch version -> library ("libtorch_cpu", "libtorch_cuda") -> exported shim symbols.
ShimTables = dict[str, dict[str, frozenset[str]]]

_RODATA_SHIM_NAME = re.compile(r"^\s*\[\s*[0-9a-f]+\]\s+(aoti_torch_[A-Za-z0-9_]+)$")


def parse_rodata_shim_names(text: str) -> list[str]:
    """Shim names among the strings of ``readelf -W -p .rodata`` output."""
    return sorted({m.group(1) for line in text.splitlines() if (m := _RODATA_SHIM_NAME.match(line))})


def load_shim_tables(specs: Sequence[str]) -> ShimTables:
    """Reads ``VERSION=PATH`` specs; PATH is ``.../<library>.txt``, one symbol per line."""
    tables: ShimTables = {}
    for spec in specs:
        version, sep, path = spec.partition("=")
        if not sep or not version or not path:
            raise ValueError(f"expected --shim_symbols=VERSION=PATH, found {spec!r}")
        lib = re.sub(r"\.txt$", "", path.rsplit("/", 1)[-1])
        with open(path, encoding="utf-8") as f:
            names = frozenset(line.strip() for line in f if line.strip())
        tables.setdefault(version, {})[lib] = names
    return tables


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0])[:3])


def shim_reference(target: str, versions: Iterable[str]) -> str | None:
    """The torch build to check against: MAJOR.MINOR == target, else the newest below it."""
    want = _release(target)[:2]
    known = sorted(versions, key=_release)
    exact = [v for v in known if _release(v)[:2] == want]
    if exact:
        return exact[-1]
    below = [v for v in known if _release(v)[:2] < want]
    return below[-1] if below else None


def check_shim_versions(
    linked: Iterable[str],
    looked_up: Iterable[str],
    tables: ShimTables,
    target: str,
) -> tuple[str | None, list[str]]:
    """Returns (reference description, errors) for the shim names a library uses."""
    ref = shim_reference(target, tables)
    if ref is None:
        return None, [
            f"no torch build at or below the target version {target} to check shim symbols against "
            f"(known: {', '.join(sorted(tables, key=_release)) or 'none'})"
        ]
    errors = []
    for lib, names, how in (
        ("libtorch_cpu", linked, "undefined symbol"),
        ("libtorch_cuda", looked_up, "shim name looked up at run time"),
    ):
        names = sorted(set(names))
        if not names:
            continue
        exported = tables[ref].get(lib)
        if exported is None:
            errors.append(f"cannot check the {how}s {', '.join(names)}: no {lib}.so symbol list for torch {ref}")
            continue
        for name in names:
            if name in exported:
                continue
            first = next((v for v in sorted(tables, key=_release) if name in tables[v].get(lib, ())), None)
            errors.append(
                f"{how} {name} is not exported by torch {ref}'s {lib}.so, the reference for target {target}: "
                + (f"it first appears in torch {first}" if first else "no known torch build exports it")
                + "; avoid that API or raise the target (torch.configure(target_version = ...))"
            )
    return f"torch {ref}'s libtorch_cpu.so / libtorch_cuda.so (target {target})", errors


def audit(
    path: str,
    *,
    max_glibc: str | None = DEFAULT_MAX_GLIBC,
    max_glibcxx: str | None = DEFAULT_MAX_GLIBCXX,
    extra_needed: Sequence[str] = (),
    extra_unversioned: Sequence[str] = (),
    allow_hip_runtime: bool = False,
    readelf: str = "readelf",
    target_torch: str | None = None,
    shim_tables: ShimTables | None = None,
) -> AuditReport:
    """Runs readelf on ``path`` and audits it (see :func:`check`); with
    ``target_torch`` and ``shim_tables`` also checks the shim versions."""
    report = check(
        path,
        run_readelf(["-W", "--dyn-syms"], path, readelf),
        run_readelf(["-d"], path, readelf),
        run_readelf(["-V"], path, readelf),
        max_glibc=max_glibc,
        max_glibcxx=max_glibcxx,
        extra_needed=extra_needed,
        extra_unversioned=extra_unversioned,
        allow_hip_runtime=allow_hip_runtime,
    )
    if target_torch is not None and shim_tables is not None:
        linked = [s.name for s in report.undefined if s.version is None and s.name.startswith(SHIM_PREFIXES)]
        dynamic = {s.name for s in report.undefined}
        rodata = run_readelf(["-W", "-p", ".rodata"], path, readelf)
        report.runtime_lookups = [n for n in parse_rodata_shim_names(rodata) if n not in dynamic]
        report.shim_reference, errors = check_shim_versions(linked, report.runtime_lookups, shim_tables, target_torch)
        report.errors.extend(errors)
    return report


def main(argv: Sequence[str]) -> int:
    from absl import app, flags  # noqa: F401  (imported for the CLI only)

    FLAGS = flags.FLAGS
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not FLAGS.so:
        raise app.UsageError("--so is required")
    if bool(FLAGS.target_torch) != bool(FLAGS.shim_symbols):
        raise app.UsageError("--target_torch and --shim_symbols go together")
    report = audit(
        FLAGS.so,
        max_glibc=FLAGS.max_glibc or None,
        max_glibcxx=FLAGS.max_glibcxx or None,
        extra_needed=FLAGS.allow_needed,
        extra_unversioned=FLAGS.allow_unversioned,
        allow_hip_runtime=FLAGS.allow_hip_runtime or FLAGS.backend == "rocm",
        readelf=FLAGS.readelf,
        target_torch=FLAGS.target_torch or None,
        shim_tables=load_shim_tables(FLAGS.shim_symbols) if FLAGS.shim_symbols else None,
    )
    print(report.format())
    return 0 if report.ok else 1


def _define_flags() -> None:
    from absl import flags

    flags.DEFINE_string("so", None, "Shared object to audit.")
    flags.DEFINE_string("max_glibc", DEFAULT_MAX_GLIBC, "Highest GLIBC_ version allowed ('' = no bound).")
    flags.DEFINE_string("max_glibcxx", DEFAULT_MAX_GLIBCXX, "Highest GLIBCXX_ version allowed ('' = no bound).")
    flags.DEFINE_list("allow_needed", [], "Extra NEEDED regexes to allow (e.g. 'libtorch_cuda\\.so').")
    flags.DEFINE_list("allow_unversioned", [], "Extra unversioned undefined symbols to allow.")
    flags.DEFINE_bool(
        "allow_hip_runtime",
        False,
        "ROCm builds: allow NEEDED libamdhip64.so.<major> and its hip_x.y symbol versions.",
    )
    flags.DEFINE_enum(
        "backend", "cpu", ["cpu", "cuda", "rocm"], "The build's GPU backend (rocm implies --allow_hip_runtime)."
    )
    flags.DEFINE_string("target_torch", None, "Torch target version MAJOR.MINOR for the shim-version check.")
    flags.DEFINE_multi_string(
        "shim_symbols",
        [],
        "VERSION=PATH: the shim symbols a torch build's library exports (PATH ends in libtorch_cpu.txt or "
        "libtorch_cuda.txt, one symbol per line); repeat per library and version.",
    )
    flags.DEFINE_string("readelf", "readelf", "readelf executable.")


if __name__ == "__main__":
    from absl import app

    _define_flags()
    app.run(lambda argv: sys.exit(main(argv)))
