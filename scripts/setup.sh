#!/usr/bin/env bash
# Set up everything project-api needs on a Debian/Ubuntu machine:
#   1. the C toolchains (host gcc/make, clang + libFuzzer, arm-none-eabi-gcc, qemu-system-arm,
#      riscv64-unknown-elf-gcc with picolibc and qemu-system-riscv32)
#      and ser2net (the labgrid tests' RFC 2217 server),
#   2. a virtual environment in $VENV (default .venv) with project-api installed editable, plus test extras.
# Safe to run again: it installs only what is missing.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

APT_PACKAGES=(gcc make gcc-arm-none-eabi libnewlib-arm-none-eabi picolibc-arm-none-eabi
              qemu-system-arm clang libclang-rt-14-dev ser2net
              gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc)

missing_tools() {
    local out=()
    command -v cc >/dev/null || out+=(gcc)
    command -v make >/dev/null || out+=(make)
    command -v clang >/dev/null || out+=(clang)
    command -v arm-none-eabi-gcc >/dev/null || out+=(gcc-arm-none-eabi)
    command -v qemu-system-arm >/dev/null || out+=(qemu-system-arm)
    command -v riscv64-unknown-elf-gcc >/dev/null || out+=(gcc-riscv64-unknown-elf)
    [ -f /usr/lib/picolibc/riscv64-unknown-elf/picolibc.specs ] || out+=(picolibc-riscv64-unknown-elf)
    command -v qemu-system-riscv32 >/dev/null || out+=(qemu-system-misc)
    # ser2net (the RFC 2217 server of the labgrid tests) lives in /usr/sbin.
    command -v ser2net >/dev/null || [ -x /usr/sbin/ser2net ] || out+=(ser2net)
    # libFuzzer's runtime ships separately from clang on Debian.
    if command -v clang >/dev/null; then
        local fuzzlib
        fuzzlib=$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)
        [ -f "$fuzzlib" ] || out+=(libclang-rt-14-dev)
    fi
    echo "${out[@]:-}"
}

need=$(missing_tools)
if [ -n "$need" ]; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
        echo "setup: installing toolchains with apt-get (${APT_PACKAGES[*]})" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" >/dev/null
    else
        echo "setup: missing toolchains: $need" >&2
        echo "setup: install them with: sudo apt-get install ${APT_PACKAGES[*]}" >&2
        echo "setup: continuing; tests that need them will be skipped with the reason." >&2
    fi
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating virtual environment $VENV" >&2
    "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.project-api-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "setup: installing project-api and its test dependencies into $VENV" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
    "$VENV/bin/python" -m pip install -q -e '.[test]'
    touch "$stamp"
fi
echo "setup: done ($VENV)" >&2
