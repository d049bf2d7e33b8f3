#!/usr/bin/env bash
# Two `minfer` binaries (e.g. the previous build and this one) alternated round by round on one model: decode
# tok/s at 1 and 32 concurrent sequences and prefill tok/s (`minfer bench offline --sections decode,prefill`), with
# the median of each round's B/A ratio. The VM is shared and its speed drifts: only ratios taken side by side mean
# anything.
#   [DECODE_STEPS=32] bench/ab_binaries.sh OLD_MINFER NEW_MINFER MODEL [ROUNDS] [PREFILL_TOKENS]
set -euo pipefail
old="$1"; new="$2"; model="$3"; rounds="${4:-3}"; prefill="${5:-512}"
results=$(mktemp)
for r in $(seq "$rounds"); do
  for which in A B; do
    bin=$([ "$which" = A ] && echo "$old" || echo "$new")
    out=$("$bin" bench offline -m "$model" --sections decode,prefill --concurrency 1,32 --decode-steps "${DECODE_STEPS:-32}" \
          --prefill-tokens "$prefill" -t 2 2>/dev/null)
    d1=$(echo "$out" | sed -n 's/^| 1 | \([0-9.]*\) |.*/\1/p')
    d32=$(echo "$out" | sed -n 's/^| 32 | \([0-9.]*\) |.*/\1/p')
    pf=$(echo "$out" | sed -n 's/.*best of 3: \([0-9.]*\) prompt tok\/s.*/\1/p')
    echo "$r $which $d1 $d32 $pf" >> "$results"
  done
done
/usr/bin/python3 - "$results" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, w, *v in rows: by.setdefault(r, {})[w] = [float(x) for x in v]
for i, name in enumerate(["decode tok/s, 1 sequence", "decode tok/s, 32 sequences", "prefill tok/s"]):
    a = [by[r]["A"][i] for r in sorted(by)]; b = [by[r]["B"][i] for r in sorted(by)]
    ratios = [y / x for x, y in zip(a, b)]
    print(f"{name:28s} A {' '.join(f'{x:7.1f}' for x in a)}  B {' '.join(f'{x:7.1f}' for x in b)}"
          f"  median B/A {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
PY
rm -f "$results"
