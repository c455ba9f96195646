#!/bin/sh
# ge's tests on aarch64, emulated on an x86-64 Debian bookworm machine (issue 29: "passes on aarch64").
# Not part of the pytest run: emulation is 10-50x slower (tests/core/kernels alone, over an hour on 2 cores).
#
#   sh tests/platforms/aarch64_emulated.sh [pytest arguments]      (default: tests/core/kernels tests/e2e but Ray)
#   GE_NO_NATIVE=1 sh tests/platforms/aarch64_emulated.sh ...       the numpy plans alone
#
# Needs: root (a private mount namespace: binfmt_misc there runs aarch64 programs, so tests that start
# sys.executable work, and /proc/cpuinfo there is an arm64 one: onnxruntime's cpuinfo crashes on x86's),
# qemu-user (qemu-aarch64), gcc-aarch64-linux-gnu, Debian's arm64 packages and PyPI. It builds, in
# ARM64 (default /tmp/ge-arm64), a sysroot with Debian's arm64 python3.11 (apt with its own state:
# the host's dpkg database is not touched), the aarch64 wheels of the versions in this worktree's .venv,
# and the armv8 native library beside the x86 ones (core/kernels/_native_armv8.*.so, git-ignored).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ARM64=${ARM64:-/tmp/ge-arm64}
PKGS="click numpy onnx msgpack rich ml_dtypes xxhash protobuf pytest onnxruntime pillow typing_extensions setuptools"
mkdir -p "$ARM64/apt/state/lists/partial" "$ARM64/apt/cache/archives/partial" "$ARM64/apt/sources" "$ARM64/debs"
if [ ! -x "$ARM64/sysroot/usr/bin/python3.11" ]; then
    cp /etc/apt/sources.list.d/debian.sources "$ARM64/apt/sources/"
    cat > "$ARM64/apt/apt.conf" <<CONF
APT::Architecture "arm64"; APT::Architectures { "arm64"; };
Dir::State "$ARM64/apt/state"; Dir::State::status "$ARM64/apt/state/status"; Dir::Cache "$ARM64/apt/cache";
Dir::Etc::SourceList "/dev/null"; Dir::Etc::SourceParts "$ARM64/apt/sources";
CONF
    touch "$ARM64/apt/state/status"
    export APT_CONFIG="$ARM64/apt/apt.conf"
    apt-get update -qq
    (cd "$ARM64/debs" && apt-get download -qq $(apt-cache depends --recurse --no-recommends --no-suggests \
        --no-conflicts --no-breaks --no-replaces --no-enhances python3.11 libpython3.11-dev libstdc++6 | grep -v '^ \|<' | sort -u))
    for deb in "$ARM64"/debs/*.deb; do dpkg -x "$deb" "$ARM64/sysroot"; done
    unset APT_CONFIG
fi
if [ ! -d "$ARM64/site/numpy" ]; then  # the aarch64 wheels of the versions the x86 venv has
    pins=$("$ROOT/.venv/bin/pip" list --format=freeze | grep -i -E "^($(echo $PKGS | tr ' ' '|'))==")
    plat="--platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 --only-binary=:all: --python-version 3.11 --implementation cp"
    "$ROOT/.venv/bin/pip" download -q $plat -d "$ARM64/wheels" $pins
    "$ROOT/.venv/bin/pip" install -q $plat --no-deps --target "$ARM64/site" "$ARM64"/wheels/*.whl
    # a 2-core Neoverse N1's /proc/cpuinfo
    for n in 0 1; do printf 'processor\t: %s\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n' $n; done > "$ARM64/cpuinfo"
    mkdir -p "$ARM64/include/aarch64-linux-gnu"  # pyconfig.h as Python.h's wrapper asks for it, alone
    ln -sfn "$ARM64/sysroot/usr/include/aarch64-linux-gnu/python3.11" "$ARM64/include/aarch64-linux-gnu/python3.11"
fi
# ge's editable finder (ge.* -> this worktree: an ARM64 that several worktrees share tests the one it
# runs from), a site dir of its own
rm -rf "$ARM64/ge" && mkdir -p "$ARM64/ge"
cp -r "$ROOT"/.venv/lib/python3.11/site-packages/__editable__*ge* "$ROOT"/.venv/lib/python3.11/site-packages/ge-*.dist-info "$ARM64/ge/"
# the aarch64 packages and ge on the interpreter's own path (a .pth in its dist-packages), not on
# PYTHONPATH: tests start child processes with PYTHONPATH=$(ge shim path), as users run ais_bench
printf '%s\nimport site; site.addsitedir("%s")\n' "$ARM64/site" "$ARM64/ge" \
    > "$ARM64/sysroot/usr/lib/python3/dist-packages/ge-arm64-site.pth"
# python: the emulated arm64 interpreter in the namespace described above, on the CPU that cpuinfo
# describes (qemu's default, "max", has every extension: onnxruntime's int8 products on it, as its
# DynamicQuantizeMatMul, come out far from the float model's and from x86's; on a Neoverse N1 they do not)
python() {
    unshare -m sh -c '
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc &&
    { [ -e /proc/sys/fs/binfmt_misc/ge-aarch64 ] || printf "%s" ":ge-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:$(command -v qemu-aarch64):F" > /proc/sys/fs/binfmt_misc/register; } &&
    mount --bind "$ARM64/cpuinfo" /proc/cpuinfo &&
    exec env QEMU_CPU=neoverse-n1 QEMU_LD_PREFIX="$ARM64/sysroot" "$ARM64/sysroot/usr/bin/python3.11" "$@"' sh "$@"
}
export ARM64
cd "$ROOT"
# the armv8 library: the cross compiler is the arm64 Python's CC (aarch64-linux-gnu-gcc); its headers from the sysroot
CFLAGS="-I$ARM64/sysroot/usr/include/python3.11 -I$ARM64/include" python setup.py -q build_ext --inplace
python -m ge.cli.main --version
[ $# -gt 0 ] || set -- tests/core/kernels tests/e2e --ignore=tests/e2e/test_ray.py  # (no aarch64 Ray here)
python -m pytest -p no:cacheprovider -rfE "$@"
