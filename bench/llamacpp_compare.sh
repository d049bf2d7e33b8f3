#!/usr/bin/env bash
# minfer against llama.cpp on the very same GGUF file, on this machine, alternating the two round by round (the
# machine is shared: absolute figures drift, ratios within a round hold). llama.cpp is, by default, llama-cpp-python
# from the project venv, built from source with native CPU flags (scripts/setup-venv.sh), driven by
# bench/llamacpp/bench.py; PEER=node takes node-llama-cpp's prebuilt CPU build instead (pinned in
# bench/llamacpp/package.json, bench/llamacpp/bench.mjs). MODEL is a .gguf file (any quantization types), or a Qwen2
# HF directory that bench/hf_to_gguf.py writes as GGUF first (TYPE keep or q8_0).
#   bench/llamacpp_compare.sh MODEL [ROUNDS=3] [THREADS=2] [TYPE=keep|q8_0]
# MINFER_FLAGS adds engine flags to minfer's `bench offline` runs (prefill, 8 and 32 sequences), e.g.
# MINFER_FLAGS="--kv-cache-dtype f32" for an f32 KV cache (minfer's default for GGUF files is bf16, llama.cpp's f16).
# Per round and engine: greedy decode at batch 1 (64 steps after a 4-token prompt; the two engines' greedy ids
# are compared), prefill of a 512-token prompt (best of 3), and aggregate decode tok/s of 8 and 32 sequences
# decoding together (16-token prompts, 16 timed steps).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="$1"; rounds="${2:-3}"; threads="${3:-2}"; outtype="${4:-keep}"
minfer="${MINFER_BUILD:-$here/build/release}/tools/minfer"
python="${MINFER_VENV:-$here/.venv}/bin/python"
peer="${PEER:-python}"
cache="$here/.cache/llamacpp-bench"
mkdir -p "$cache"
if [ "$peer" = node ]; then
  if ! cmp -s "$here/bench/llamacpp/package-lock.json" "$cache/package-lock.json" || [ ! -d "$cache/node_modules" ]; then
    cp "$here/bench/llamacpp/package.json" "$here/bench/llamacpp/package-lock.json" "$cache/"
    (cd "$cache" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  fi
  cp "$here/bench/llamacpp/bench.mjs" "$cache/"
  run_peer() { (cd "$cache" && node bench.mjs "$@" 2>/dev/null); }
else
  run_peer() { "$python" "$here/bench/llamacpp/bench.py" "$@" 2>/dev/null; }
fi
if [ -f "$model" ]; then
  gguf="$model"
else
  gguf="$cache/$(basename "$model")-$outtype.gguf"
  [ -f "$gguf" ] || "$python" "$here/bench/hf_to_gguf.py" "$model" "$gguf" "$outtype"
fi

# The same token ids for both engines (random, seeded, within the vocabulary).
read -r decode_ids prefill_ids < <("$python" - "$gguf" <<'PY'
import gguf, random, sys
vocab = len(gguf.GGUFReader(sys.argv[1]).fields["tokenizer.ggml.tokens"].data)
r = random.Random(7)
ids = lambda n: ",".join(str(r.randrange(1000, min(vocab, 150000))) for _ in range(n))
print(ids(4), ids(512))
PY
)
decode_tokens=65  # 64 timed steps after the first token
results="$cache/results.jsonl"; : > "$results"
for round in $(seq "$rounds"); do
  run_peer "$gguf" "$threads" "$decode_ids" "$decode_tokens" "$prefill_ids" 8,32 16 |
    sed "s/^{ *\"/{\"engine\":\"llama.cpp\",\"round\":$round,\"/" >> "$results"
  gen=$("$minfer" generate -m "$gguf" --prompt-ids "${decode_ids//,/ }" -n "$decode_tokens" --temperature 0 --ignore-eos \
        -t "$threads" --ids-out "$cache/minfer_ids.txt" 2>&1 | grep 'generated:')
  /usr/bin/python3 - "$round" "$gen" "$cache/minfer_ids.txt" >> "$results" <<'PY'
import json, re, sys
m = re.search(r"generated: (\d+) tokens in ([0-9.]+) s", sys.argv[2])
n, s = int(m.group(1)), float(m.group(2))
ids = [int(t) for t in open(sys.argv[3]).read().split()]
# minfer's time covers the n - 1 steps after the first token (and the n samplings): the steps llama.cpp's covers.
print(json.dumps({"engine": "minfer", "round": int(sys.argv[1]), "what": "decode", "tokens": n, "steps": n - 1,
                  "seconds": s, "ids": ids}))
PY
  "$minfer" bench offline -m "$gguf" -t "$threads" --sections decode,prefill --concurrency 8,32 --decode-steps 16 \
    --prefill-tokens 512 ${MINFER_FLAGS:-} --json "$cache/minfer_offline.jsonl" > "$cache/minfer_offline.txt" 2>/dev/null
  /usr/bin/python3 - "$round" "$cache/minfer_offline.txt" "$cache/minfer_offline.jsonl" >> "$results" <<'PY'
import json, re, sys
r = int(sys.argv[1])
tps = float(re.search(r"([0-9.]+) prompt tok/s", open(sys.argv[2]).read()).group(1))
print(json.dumps({"engine": "minfer", "round": r, "what": "prefill", "tokens": 512, "seconds": 512 / tps}))
for line in open(sys.argv[3]):
    d = json.loads(line)
    if "decode_concurrency" in d:
        c = d["decode_concurrency"]
        print(json.dumps({"engine": "minfer", "round": r, "what": "concurrent", "sequences": c, "steps": 16,
                          "seconds": 16 * c / d["tokens_per_s"]}))
PY
  echo "round $round done" >&2
done

/usr/bin/python3 - "$results" "$gguf" "$threads" "$peer" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def rate(r):
    if r["what"] == "decode": return r["steps"] / r["seconds"]
    if r["what"] == "prefill": return r["tokens"] / r["seconds"]
    return r["sequences"] * r["steps"] / r["seconds"]
keys = [("decode", None, "decode, batch 1 (tok/s)"), ("prefill", None, "prefill 512 tokens (tok/s)"),
        ("concurrent", 8, "8 sequences decoding (aggregate tok/s)"),
        ("concurrent", 32, "32 sequences decoding (aggregate tok/s)")]
rounds = sorted({r["round"] for r in rows})
print(f"{sys.argv[2]}, {sys.argv[3]} threads, {len(rounds)} alternated rounds, llama.cpp peer: {sys.argv[4]}\n")
print("| measurement | llama.cpp per round | minfer per round | minfer / llama.cpp per round |")
print("|---|---|---|---|")
for what, seqs, label in keys:
    pick = lambda e, rd: next(rate(r) for r in rows if r["engine"] == e and r["round"] == rd and r["what"] == what
                              and r.get("sequences") == seqs)
    l = [pick("llama.cpp", rd) for rd in rounds]; m = [pick("minfer", rd) for rd in rounds]
    f = lambda v: " / ".join(f"{x:.1f}" for x in v)
    print(f"| {label} | {f(l)} | {f(m)} | {' / '.join(f'{b / a:.2f}x' for a, b in zip(l, m))} |")
for rd in rounds:
    a = next(r["ids"] for r in rows if r["engine"] == "llama.cpp" and r["round"] == rd and r["what"] == "decode")
    b = next(r["ids"] for r in rows if r["engine"] == "minfer" and r["round"] == rd and r["what"] == "decode")
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    print(f"\nround {rd}: greedy ids agree for the first {same} of {min(len(a), len(b))} tokens")
PY
