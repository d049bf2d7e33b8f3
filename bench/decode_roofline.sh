#!/usr/bin/env bash
# Decode at batch 1 against the memory roofline, measured side by side: the machine's read bandwidth
# (bench/micro bandwidth/read) and `minfer generate` decode tokens/s, alternating, best of N rounds each.
#   bench/decode_roofline.sh MODEL_DIR|MODEL.gguf [THREADS=2] [ROUNDS=3] [TOKENS=64]
# For a GGUF file the bytes are its tensors' (gguf-py, from the project venv), the token embedding left out when an
# output.weight is read instead (a lookup reads one row of it per token), and of stacked experts (*_exps) the
# share a token is routed to (expert_used_count / expert_count).
# Prints weight bytes per token, bandwidth, tok/s, the roofline tok/s (bandwidth / bytes) and the fraction.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="$1"; threads="${2:-2}"; rounds="${3:-3}"; tokens="${4:-64}"
build="${MINFER_BUILD:-$here/build/release}"
minfer="$build/tools/minfer"; micro="$build/bench/minfer_micro_bench"

# Bytes a decode step must read: every weight once (the tied embedding counts once, as the lm_head).
bytes=$("${MINFER_VENV:-$here/.venv}/bin/python" - "$model" <<'PY'
import json, os, struct, sys, glob
d = sys.argv[1]; total = 0
if os.path.isfile(d):
    import gguf
    reader = gguf.GGUFReader(d)
    tensors = {t.name: int(t.n_bytes) for t in reader.tensors}
    if "output.weight" in tensors:
        tensors.pop("token_embd.weight", None)
    # Mixture of experts: a token reads the experts it is routed to, expert_used_count of expert_count.
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    field = lambda key: reader.fields.get(f"{arch}.{key}")
    used, count = field("expert_used_count"), field("expert_count")
    share = int(used.parts[-1][0]) / int(count.parts[-1][0]) if used and count else 1.0
    print(int(sum(n * (share if "_exps." in name else 1.0) for name, n in tensors.items())))
    sys.exit(0)
for f in glob.glob(os.path.join(d, "*.safetensors")):
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]; hdr = json.loads(fh.read(n))
    for k, v in hdr.items():
        if k != "__metadata__": total += v["data_offsets"][1] - v["data_offsets"][0]
print(total)
PY
)
best_bw=0; best_tps=0
for r in $(seq "$rounds"); do
  bw=$("$micro" --benchmark_filter="bandwidth/read/$threads/" --benchmark_format=json 2>/dev/null |
       /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["benchmarks"][0]["bytes_per_second"]/1e9)')
  tps=$("$minfer" generate -m "$model" -p "The quick brown fox" -n "$tokens" --temperature 0 --ignore-eos \
        -t "$threads" 2>&1 | sed -n 's/.*generated: [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p')
  echo "round $r: read bandwidth ${bw} GB/s, decode ${tps} tok/s"
  best_bw=$(/usr/bin/python3 -c "print(max($best_bw, $bw))")
  best_tps=$(/usr/bin/python3 -c "print(max($best_tps, $tps))")
done
/usr/bin/python3 - "$bytes" "$best_bw" "$best_tps" "$threads" <<'PY'
import sys
b, bw, tps, t = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
roof = bw * 1e9 / b
print(f"threads {t}: weights {b/1e6:.1f} MB/token, read bandwidth {bw:.1f} GB/s (best), roofline {roof:.1f} tok/s, "
      f"measured {tps:.1f} tok/s (best) = {100*tps/roof:.0f}% of roofline ({tps*b/1e9:.1f} GB/s effective)")
PY
