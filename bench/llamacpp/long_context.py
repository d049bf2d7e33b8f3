#!/usr/bin/env python3
"""llama.cpp's side of bench/long_context_compare.sh, through llama-cpp-python (its library, as llama-bench -d
measures it): one sequence prefills DEPTH prompt tokens (timed: prefill tok/s), then decodes STEPS tokens greedily
at that depth (timed: decode tok/s), with KV cache type KV for K and V (-ctk/-ctv) and flash attention on.
  long_context.py MODEL.gguf THREADS KV DEPTH STEPS
  {"what":"prefill","tokens":N,"seconds":S} {"what":"decode","steps":N,"seconds":S}
"""

import json
import sys
import time

import numpy as np

from context import Context


def main():
    path, threads, kv, depth, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    llm = Context(path, threads, kv, depth + steps + 16)
    rng = np.random.default_rng(7)
    prompt = [int(t) for t in rng.integers(1000, min(llm.vocab, 150000), depth)]
    t0 = time.perf_counter()
    row = llm.decode(prompt, 0)
    print(json.dumps({"what": "prefill", "tokens": depth, "seconds": time.perf_counter() - t0}), flush=True)
    token = int(np.argmax(row))
    t0 = time.perf_counter()
    for s in range(steps):
        token = int(np.argmax(llm.decode([token], depth + s)))
    print(json.dumps({"what": "decode", "steps": steps, "seconds": time.perf_counter() - t0}), flush=True)
    llm.close()


if __name__ == "__main__":
    main()
