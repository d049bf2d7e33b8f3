#!/usr/bin/env bash
# Decode tokens/s of several `minfer generate` variants, alternated round by round (the VM is shared and its
# speed drifts: only ratios taken side by side mean anything), with the median of each variant's per-round
# ratio to the first variant.
#   bench/decode_ab.sh MODEL ROUNDS 'VARIANT FLAGS' 'VARIANT FLAGS' ...
# e.g. bench/decode_ab.sh /tmp/q05 6 '--quantization none' '--quantization w8a16' '--quantization w8a8'
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
minfer="${MINFER_BUILD:-$here/build/release}/tools/minfer"
model="$1"; rounds="$2"; shift 2
results=$(mktemp)
for r in $(seq "$rounds"); do
  for i in $(seq 0 $(($# - 1))); do
    args=("$@")
    # shellcheck disable=SC2086
    tps=$("$minfer" generate -m "$model" -p "The quick brown fox" -n 64 --temperature 0 --ignore-eos -t 2 \
          ${args[$i]} 2>&1 | sed -n 's/.*generated: [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p')
    echo "$r $i $tps" >> "$results"
  done
done
/usr/bin/python3 - "$results" "$@" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
names = sys.argv[2:]
by = {}
for r, i, t in rows: by.setdefault(int(r), {})[int(i)] = float(t)
for i, name in enumerate(names):
    tps = [by[r][i] for r in sorted(by)]
    ratios = [by[r][i] / by[r][0] for r in sorted(by)]
    print(f"{name:40s} tok/s {' '.join(f'{t:6.1f}' for t in tps)}   median ratio to first {statistics.median(ratios):.2f}x"
          f" (range {min(ratios):.2f}-{max(ratios):.2f})")
PY
rm -f "$results"
