# Shared by scripts/test and scripts/reproduce: package installation
# (idempotent: only what is missing is installed) and the CMake build.

QATTN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

qattn_log() { printf '[qattn] %s\n' "$*" >&2; }

# qattn_need_packages PKG...: install the Debian packages that are missing.
qattn_need_packages() {
    local missing=() p
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        return 0
    fi
    qattn_log "installing Debian packages: ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { qattn_log "need root (or sudo) to install: ${missing[*]}"; return 1; }
        sudo=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Packages to build the C library and program and to run the CPU tests.
# python3-numpy: the Python package (python/qattn) and its CPU test.
QATTN_BUILD_PACKAGES=(gcc make cmake pkg-config libhdf5-dev hdf5-tools libgsl-dev libopenblas-dev python3 python3-numpy)

# Packages to compile the AMD backend of the GPU kernels (compile only: hipcc
# with clang-15 for gfx90a, clang-19 for gfx942).
QATTN_AMD_PACKAGES=(hipcc libamdhip64-dev rocm-device-libs clang-19 lld-19)

# Packages to build and run the fuzz harnesses (fuzz/run): Debian 12's
# clang-19 (also the AMD build's) gets libFuzzer and the sanitizer runtimes
# from libclang-rt-19-dev, llvm-symbolizer-19 from llvm-19.
QATTN_FUZZ_PACKAGES=(clang-19 libclang-rt-19-dev llvm-19)

# Packages to draw the figures and build the paper (filled in with the plots).
QATTN_PAPER_PACKAGES=(gnuplot-nox latexmk texlive-latex-base texlive-latex-recommended)

# qattn_build DIR [cmake options...]: configure and build into DIR.
qattn_build() {
    local dir=$1
    shift
    mkdir -p "$dir"
    cmake -S "$QATTN_ROOT" -B "$dir" -DQATTN_GPU="${QATTN_GPU:-auto}" "$@" >"$dir/configure.log" 2>&1 || {
        cat "$dir/configure.log" >&2
        return 1
    }
    cmake --build "$dir" -j "$(nproc)"
}
