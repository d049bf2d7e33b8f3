#!/usr/bin/env bash
# The public-domain evaluation text of docs/BENCHMARKS.md (Quantization): the King James Bible's book of Genesis,
# chapters 1-10, from Debian's bible-kjv-text package (read with its `bible` program), verse labels stripped.
#   bench/quant_corpus.sh [OUT=/tmp/kjv_genesis_1_10.txt]
set -euo pipefail
out="${1:-/tmp/kjv_genesis_1_10.txt}"
command -v bible >/dev/null || { echo "install the Debian packages bible-kjv and bible-kjv-text" >&2; exit 1; }
bible -f "Gen1:1-10:32" | sed -E 's/^[A-Za-z0-9]+[0-9]+:[0-9]+ //' | tr -s ' \n' > "$out"
wc -w "$out"
