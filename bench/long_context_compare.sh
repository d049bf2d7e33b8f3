#!/usr/bin/env bash
# Long contexts, minfer against llama.cpp on the same GGUF file with the same KV cache type, alternated round by round
# (the machine is shared): one sequence prefills DEPTH tokens (random ids within the vocabulary), then decodes 32
# tokens at that depth, as `llama-bench -d DEPTH -ctk T -ctv T` measures. llama.cpp through llama-cpp-python
# (bench/llamacpp/long_context.py, flash attention on); minfer through `minfer generate` (its prompt and generated
# timings). KV types are llama.cpp's names (f16, q8_0, q4_0, bf16, f32), the same --kv-cache-dtype for minfer.
#   bench/long_context_compare.sh MODEL.gguf [DEPTHS=8192,32768] [KV_TYPES=f16,q8_0] [ROUNDS=2] [THREADS=2]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="$1"; depths="${2:-8192,32768}"; kvs="${3:-f16,q8_0}"; rounds="${4:-2}"; threads="${5:-2}"
minfer="${MINFER_BUILD:-$here/build/release}/tools/minfer"
python="${MINFER_VENV:-$here/.venv}/bin/python"
steps=32
results="$(mktemp)"
for round in $(seq "$rounds"); do
  for depth in ${depths//,/ }; do
    ids=$("$python" - "$model" "$depth" <<'PY'
import gguf, sys
import numpy as np
vocab = len(gguf.GGUFReader(sys.argv[1]).fields["tokenizer.ggml.tokens"].data)
print(" ".join(str(int(t)) for t in np.random.default_rng(7).integers(1000, min(vocab, 150000), int(sys.argv[2]))))
PY
)
    for kv in ${kvs//,/ }; do
      "$python" "$here/bench/llamacpp/long_context.py" "$model" "$threads" "$kv" "$depth" "$steps" 2>/dev/null |
        sed "s/^{/{\"engine\":\"llama.cpp\",\"round\":$round,\"depth\":$depth,\"kv\":\"$kv\",/" >> "$results"
      line=$("$minfer" generate -m "$model" --prompt-ids "$ids" -n $((steps + 1)) --temperature 0 --ignore-eos \
             -t "$threads" --kv-cache-dtype "$kv" --max-model-len $((depth + steps + 16)) 2>&1 >/dev/null |
             grep 'generated:')
      /usr/bin/python3 - "$round" "$depth" "$kv" "$line" >> "$results" <<'PY'
import json, re, sys
r, d, kv, line = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
m = re.search(r"prompt: (\d+) tokens in ([0-9.]+) s.*generated: (\d+) tokens in ([0-9.]+) s", line)
base = {"engine": "minfer", "round": r, "depth": d, "kv": kv}
print(json.dumps({**base, "what": "prefill", "tokens": int(m.group(1)), "seconds": float(m.group(2))}))
print(json.dumps({**base, "what": "decode", "steps": int(m.group(3)) - 1, "seconds": float(m.group(4))}))
PY
      echo "round $round depth $depth $kv done" >&2
    done
  done
done
/usr/bin/python3 - "$results" "$model" "$threads" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rate = lambda r: (r["tokens"] if r["what"] == "prefill" else r["steps"]) / r["seconds"]
print(f"{sys.argv[2]}, {sys.argv[3]} threads, rounds alternated\n")
print("| depth | KV | measurement | llama.cpp per round (tok/s) | minfer per round (tok/s) | minfer / llama.cpp |")
print("|---|---|---|---|---|---|")
for d in sorted({r["depth"] for r in rows}):
    for kv in dict.fromkeys(r["kv"] for r in rows):
        for what in ("prefill", "decode"):
            pick = lambda e: [rate(r) for r in rows if (r["engine"], r["depth"], r["kv"], r["what"]) == (e, d, kv, what)]
            l, m = pick("llama.cpp"), pick("minfer")
            f = lambda v: " / ".join(f"{x:.1f}" for x in v)
            print(f"| {d} | {kv} | {what} | {f(l)} | {f(m)} | {' / '.join(f'{b / a:.2f}x' for a, b in zip(l, m))} |")
PY
rm -f "$results"
