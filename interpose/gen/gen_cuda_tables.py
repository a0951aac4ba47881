#!/usr/bin/env python3
"""Generates the CUDA driver entry-point tables that libgpushare-cuda.so and the fake driver use.

Run by hand when the supported CUDA version changes (never at build time; the build must not
need the CUDA toolkit):

    python3 interpose/gen/gen_cuda_tables.py /usr/local/cuda

Inputs (from the toolkit):
  include/cuda*Typedefs.h  every PFN_<name>_v<version>[_ptsz|_ptds] typedef (core, GL, EGL, VDPAU,
                           profiler): which ABI a (name, cudaVersion, per-thread) request of
                           cuGetProcAddress selects
  include/cuda.h           `#define cuX cuX_vN` lines: which exported symbol is the newest ABI
  lib64/stubs/libcuda.so   the exported symbol names of the driver (read with `nm -D`)

Outputs (committed):
  interpose/generated/cuda_entry_points.inc  GPUSHARE_CUDA_ENTRY(base, version, per_thread, exported)
  interpose/generated/libcuda_exports.inc    GPUSHARE_CUDA_EXPORT(name) for every driver export
                                             (the stub's, then the graphics-interop names the
                                             stub omits, derived from cudaGL.h/cudaEGL.h/...)

Pairing rule (a typedef version -> an exported symbol): for one base name, the default-stream
typedef versions sorted ascending are paired with the exported names {base, base_v2, base_v3...}
sorted by suffix, aligned at the newest end (the newest typedef is the highest exported suffix,
which is also the symbol cuda.h #defines the base name to, where it does). A per-thread typedef PFN_x_vN_ptsz pairs with <exported name of the default
ABI selected at N> + "_ptsz" (or "_ptds"). Pairings that cannot be made are reported on stderr and
left out.
"""
import os
import re
import subprocess
import sys

TYPEDEF = re.compile(r"typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*PFN_(\w+?)_v(\d+)(_ptsz|_ptds)?\s*\)")
DEFINE = re.compile(r"^#define\s+(cu\w+)\s+(?:__CUDA_API_PT(?:SZ|DS)\()?(cu\w+?)\)?\s*$")
SUFFIX = re.compile(r"^(\w+?)(?:_v(\d+))?$")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda"
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = os.path.join(os.path.dirname(here), "generated")
    typedef_files = ["cudaTypedefs.h", "cudaGLTypedefs.h", "cudaEGLTypedefs.h",
                     "cudaVDPAUTypedefs.h", "cudaProfilerTypedefs.h"]
    typedefs = "".join(open(os.path.join(root, "include", f)).read() for f in typedef_files
                       if os.path.exists(os.path.join(root, "include", f)))
    cuda_h = open(os.path.join(root, "include", "cuda.h")).read()
    stub = os.path.join(root, "lib64", "stubs", "libcuda.so")
    nm = subprocess.run(["nm", "-D", "--defined-only", stub], check=True, capture_output=True, text=True)
    exports = sorted({line.split()[-1] for line in nm.stdout.splitlines() if line.strip()})
    export_set = set(exports)
    version_m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", cuda_h)
    cuda_version = version_m.group(1) if version_m else "?"

    headers = cuda_h
    for extra in ("cudaGL.h", "cudaEGL.h", "cudaVDPAU.h", "cudaProfiler.h"):
        path = os.path.join(root, "include", extra)
        if os.path.exists(path):
            headers += open(path).read()
    current = {}
    for line in headers.splitlines():
        m = DEFINE.match(line.strip())
        if m and m.group(1) != m.group(2):
            current[m.group(1)] = m.group(2)

    default_versions = {}
    per_thread = {}
    for m in TYPEDEF.finditer(typedefs):
        base, ver, pt = m.group(1), int(m.group(2)), m.group(3)
        if pt:
            per_thread.setdefault(base, set()).add((ver, pt))
        else:
            default_versions.setdefault(base, set()).add(ver)

    def suffix_of(name, base):
        if name == base:
            return 1
        m = re.fullmatch(re.escape(base) + r"_v(\d+)", name)
        return int(m.group(1)) if m else None

    entries = []
    problems = []
    synthetic = set()
    for base in sorted(default_versions):
        versions = sorted(default_versions[base])
        names = [e for e in exports if suffix_of(e, base) is not None]
        names.sort(key=lambda e: suffix_of(e, base))
        if not names:
            # The stub omits the graphics-interop entry points (GL, EGL, VDPAU) that the real
            # driver exports: name them by the header's #define (base, base_v2, ...).
            defined = current.get(base, base)
            top = suffix_of(defined, base) or 1
            names = [base] + [f"{base}_v{k}" for k in range(2, top + 1)]
            synthetic.update(names)
        defined = current.get(base)
        if defined in export_set and suffix_of(defined, base) is not None \
                and suffix_of(defined, base) < suffix_of(names[-1], base):
            problems.append(f"{base}: cuda.h maps it to {defined} but {names[-1]} is exported too; "
                            f"pairing with the highest suffix")
        pairs = {}
        if len(names) < len(versions):
            problems.append(f"{base}: {len(versions)} typedef versions {versions} but exports {names}; "
                            f"the oldest versions are left out")
        for ver, name in zip(reversed(versions), reversed(names)):
            pairs[ver] = name
        for ver in sorted(pairs):
            entries.append((base, ver, 0, pairs[ver]))
        for ver, pt in sorted(per_thread.get(base, ())):
            chosen = [v for v in pairs if v <= ver]
            if not chosen:
                problems.append(f"{base}: per-thread v{ver}{pt} has no default ABI at or below it")
                continue
            name = pairs[max(chosen)] + pt
            if pairs[max(chosen)] in synthetic:
                synthetic.add(name)
            elif name not in export_set:
                problems.append(f"{base}: per-thread v{ver}{pt} pairs with {name}, which is not exported")
                continue
            entries.append((base, ver, 1, name))
    for base in sorted(set(per_thread) - set(default_versions)):
        problems.append(f"{base}: per-thread typedefs without a default one")

    header = ("// GENERATED by interpose/gen/gen_cuda_tables.py from the CUDA {v} toolkit's cudaTypedefs.h,\n"
              "// cuda.h and lib64/stubs/libcuda.so. Do not edit; regenerate (see the script's docstring).\n")
    with open(os.path.join(out_dir, "cuda_entry_points.inc"), "w") as f:
        f.write(header.format(v=cuda_version))
        f.write("// GPUSHARE_CUDA_ENTRY(base name, introduced in cudaVersion, per-thread stream variant, exported symbol)\n")
        f.write("// sorted by base name, then version. {} entries.\n".format(len(entries)))
        for base, ver, pt, name in sorted(entries):
            f.write(f"GPUSHARE_CUDA_ENTRY({base}, {ver}, {pt}, {name})\n")
    with open(os.path.join(out_dir, "libcuda_exports.inc"), "w") as f:
        f.write(header.format(v=cuda_version))
        f.write("// GPUSHARE_CUDA_EXPORT(symbol): every dynamic symbol the driver stub exports. {} names.\n".format(len(exports)))
        for name in exports:
            f.write(f"GPUSHARE_CUDA_EXPORT({name})\n")
        used = {e[3] for e in entries}
        extra = sorted(n for n in synthetic if n in used)
        f.write("// Exported by the real driver but not by the stub (graphics interop), named from the\n"
                "// toolkit headers' #defines. {} names.\n".format(len(extra)))
        for name in extra:
            f.write(f"GPUSHARE_CUDA_EXPORT({name})\n")
    for p in problems:
        print("note:", p, file=sys.stderr)
    print(f"{len(entries)} entries, {len(exports)} exports, {len(problems)} notes", file=sys.stderr)


if __name__ == "__main__":
    main()
