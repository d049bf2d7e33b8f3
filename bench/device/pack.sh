#!/bin/bash
# Packs what a device run needs into .cache/device/pack.tar.xz (ignored by git; the device tool carries it):
# the built minfer, micro-benchmark and GEMM test binaries, the shared libraries they load (with this machine's
# glibc and loader, so they run on whatever the other machine has) and the Qwen tokenizer for make-test-model.
# Build first (cmake --build --preset release). Run there with: OUT=$OUT bash bench/device/amx_run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" .cache/device
bins=(build/release/tools/minfer build/release/bench/minfer_micro_bench build/release/tests/kernels_gemm_test
      build/release/tests/kernels_fused_test build/release/tests/kernels_attention_test)
cp "${bins[@]}" "$stage/"
for b in "${bins[@]}"; do ldd "$b" | awk '$3 ~ /^\// {print $3}'; done | sort -u | xargs -I{} cp -L {} "$stage/lib/"
cp -L /lib64/ld-linux-x86-64.so.2 "$stage/lib/"
cp .cache/qwen-tokenizer/tokenizer.json "$stage/"
tar -cf - -C "$stage" . | xz -6 -T2 > .cache/device/pack.tar.xz
ls -la .cache/device/pack.tar.xz
