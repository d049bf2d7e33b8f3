#!/bin/bash
# A device run (docs/BENCHMARKS.md, "An AMX machine"): what the CPU has, the GEMM kernels' tests on it, peak
# rates and the engine's GEMM at decode / prefill shapes, then whole steps of the Qwen2.5-0.5B shape with AMX
# against minfer capped to AVX-512-BF16 (MINFER_ISA, which caps oneDNN too), two alternated rounds, then the
# 1.5B shape. Needs .cache/device/pack.tar.xz (bench/device/pack.sh). Output: stdout and $OUT/log.txt ($OUT: the
# device tool's folder there; ./device-out elsewhere).
set -u
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
tar -xJf .cache/device/pack.tar.xz -C "$D"
L="$D/lib/ld-linux-x86-64.so.2 --library-path $D/lib"
OUT=${OUT:-device-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
lscpu | grep -E "Model name|^CPU\(s\)|max MHz|L2|L3"
grep -o -w 'amx_tile\|amx_bf16\|avx512_bf16' /proc/cpuinfo | sort | uniq -c
echo "== GEMM tests (AMX where present), then capped"
timeout 150 $L "$D/kernels_gemm_test" 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED " | tail -5
MINFER_ISA=avx512_bf16 timeout 60 $L "$D/kernels_gemm_test" --gtest_filter='*OneDnn*:*Bf16Blocked*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED)|FAILED " | tail -3
M="$L $D/minfer_micro_bench"
echo "== micro: peaks, bandwidth, the engine's bf16 GEMM (AMX where present)"
timeout 120 $M --benchmark_filter='peak|bandwidth|gemm_bf16_blocked/m(1|32|512)/(gate_up|down)/' 2>&1 |
  grep -E "^(peak|band|gemm)" | awk '{print $1, $2, $3, $7, $8}'
echo "== micro: the engine's bf16 GEMM, capped to AVX-512-BF16"
MINFER_ISA=avx512_bf16 timeout 60 $M --benchmark_filter='gemm_bf16_blocked/m(32|512)/(gate_up|down)/' 2>&1 |
  grep -E "^gemm" | awk '{print $1, $2, $3, $7, $8}'
make_model() { timeout 90 $L "$D/minfer" make-test-model --preset "$1" --dtype bf16 --tokenizer "$D/tokenizer.json" --out "$2" > /dev/null 2>&1; }
make_model qwen2.5-0.5b "$D/q05"
for round in 1 2; do
  echo "== 0.5B, AMX, round $round"
  timeout 90 $L "$D/minfer" bench ops -m "$D/q05" --batches 1,16,32 --prefill 512 --repeat 10 -t 2 2>&1 | grep -E "kernels|^\| (prefill|decode)"
  echo "== 0.5B, capped, round $round"
  MINFER_ISA=avx512_bf16 timeout 90 $L "$D/minfer" bench ops -m "$D/q05" --batches 1,16,32 --prefill 512 --repeat 4 -t 2 2>&1 | grep -E "^\| (prefill|decode)"
done
make_model qwen2.5-1.5b "$D/q15"
echo "== 1.5B, AMX"
timeout 100 $L "$D/minfer" bench ops -m "$D/q15" --batches 1,32 --prefill 512 --repeat 6 -t 2 2>&1 | grep -E "kernels|^\| (prefill|decode)"
echo "== done"
