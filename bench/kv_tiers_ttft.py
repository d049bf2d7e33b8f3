#!/usr/bin/env python3
"""Time to first token for a request whose long prefix is cold, in the pool, in the RAM tier, and in the disk tier
after a server restart (minfer serve --kv-offload-ram / --kv-cache-dir), beside llama.cpp's slot save/restore of the
same prefix (bench/llamacpp/slot_restore.py), same GGUF, same KV type, same token ids (random, within the vocabulary).
Each TTFT is a whole /v1/completions request with max_tokens 1, timed by the client. The pool is sized so that a
second prompt of the same length evicts the first one's pages (into the RAM tier). Files are read from the page cache
in both engines (the machine's disk is not what is measured).
  bench/kv_tiers_ttft.py MODEL.gguf [--tokens 8192] [--kv bf16] [--threads 2] [--rounds 2]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "e2e"))
from serve_process import started  # noqa: E402


def completion(url, ids):
    body = json.dumps({"prompt": ids, "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=3600) as r:
        reply = json.load(r)
    return time.perf_counter() - t0, reply["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)


def minfer_round(args, a, b, kv_dir, pool_mib):
    common = ["serve", "-m", args.model, "--host", "127.0.0.1", "--port", "0", "-t", str(args.threads),
              "--kv-cache-dtype", args.kv, "--max-model-len", str(args.tokens + 64),
              "--kv-cache-memory", f"{pool_mib}MiB"]
    out = {}
    with started([args.minfer, *common]) as (_, url):  # no tiers: the baseline cold prefill
        out["cold, no tiers"] = completion(url, a)
    with started([args.minfer, *common, "--kv-offload-ram", "4GiB", "--kv-cache-dir", kv_dir]) as (_, url):
        out["cold, tiers on (writes through)"] = completion(url, a)
        out["pool hit"] = completion(url, a)
        completion(url, b)  # evicts a's pages into the RAM tier
        out["RAM tier hit"] = completion(url, a)
    with started([args.minfer, *common, "--kv-cache-dir", kv_dir]) as (_, url):  # a restart: only the disk
        out["disk tier hit after restart"] = completion(url, a)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--kv", default="bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--minfer", default=str(HERE.parent / "build" / "release" / "tools" / "minfer"))
    args = ap.parse_args()
    import gguf
    import numpy as np
    vocab = len(gguf.GGUFReader(args.model).fields["tokenizer.ggml.tokens"].data)
    rng = np.random.default_rng(7)
    a = [int(t) for t in rng.integers(1000, min(vocab, 150000), args.tokens)]
    b = [int(t) for t in rng.integers(1000, min(vocab, 150000), args.tokens)]
    rows = []
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            ids_file = os.path.join(tmp, "ids.txt")
            Path(ids_file).write_text(" ".join(map(str, a)))
            peer = subprocess.run([sys.executable, str(HERE / "llamacpp" / "slot_restore.py"), args.model,
                                   str(args.threads), "f16" if args.kv == "bf16" else args.kv, ids_file, tmp],
                                  capture_output=True, text=True, check=True)
            ll = {j["what"]: j for j in map(json.loads, peer.stdout.split("\n")[:-1])}
            # Room for one prompt and half another: the second evicts the first.
            pool_mib = int(1.5 * ll["save"]["bytes"] / 2**20 * (2 if args.kv == "f32" else 1)) + 8
            mine = minfer_round(args, a, b, os.path.join(tmp, "kv"), pool_mib)
        rows.append((ll, mine))
        print(f"round {r + 1}: llama.cpp {json.dumps(ll)}\n         minfer {json.dumps(mine)}", file=sys.stderr)
    cold = [m["cold, no tiers"][0] for _, m in rows]
    print(f"{args.model}, {args.tokens}-token prefix, KV {args.kv} (llama.cpp: "
          f"{'f16' if args.kv == 'bf16' else args.kv}), {args.threads} threads, {args.rounds} rounds\n")
    print("| engine | case | TTFT per round (s) | cached tokens | / minfer cold |")
    print("|---|---|---|---|---|")
    for case in rows[0][1]:
        t = [m[case][0] for _, m in rows]
        print(f"| minfer | {case} | {' / '.join(f'{x:.3f}' for x in t)} | {rows[0][1][case][1]} | "
              f"{' / '.join(f'{x / c:.1%}' for x, c in zip(t, cold))} |")
    for what, name in (("cold", "cold prefill"), ("restore", "slot restore from file + last token")):
        t = [ll[what]["seconds"] for ll, _ in rows]
        print(f"| llama.cpp | {name} | {' / '.join(f'{x:.3f}' for x in t)} | | "
              f"{' / '.join(f'{x / c:.1%}' for x, c in zip(t, cold))} |")


if __name__ == "__main__":
    main()
