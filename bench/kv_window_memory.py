#!/usr/bin/env python3
"""KV memory a long conversation holds on a model with sliding-window layers (docs/BENCHMARKS.md, "Sliding windows"):
a PROMPT_TOKENS-token prompt of the KJV text (bench/quant_corpus.sh) and NEW generated tokens through the Python
Engine, stats() read after every token; prints the peak pages held in the full-attention pool and in the window
pool, and the pages released behind the windows.

  bench/kv_window_memory.py [MODEL=the PyPI Gemma 3 270M] [PROMPT_TOKENS=4000] [NEW=96] [paged|contiguous]
(run with the project venv's python from the repository root, after building the release preset)
"""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "build", "release", "python"))
import minfer  # noqa: E402

model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(sys.prefix, "models", "gemma-3-270m-q4_k_m.gguf")
prompt_tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
new = int(sys.argv[3]) if len(sys.argv) > 3 else 96
layout = sys.argv[4] if len(sys.argv) > 4 else "paged"
text_file = "/tmp/kjv_genesis_1_10.txt"
subprocess.run(["bash", os.path.join(here, "quant_corpus.sh"), text_file], check=True, capture_output=True)

engine = minfer.Engine(model, max_seq_len=prompt_tokens + new + 256, kv_cache_memory=512 << 20, page_size=16,
                       kv_layout=layout)
ids = engine.tokenizer.encode(open(text_file).read())[:prompt_tokens]
peak_window = peak_full = 0
for _ in engine.generate_stream(ids, minfer.SamplingParams(max_new_tokens=new, temperature=0, ignore_eos=True)):
    s = engine.stats()
    peak_window = max(peak_window, s["window_pages_used"])
    peak_full = max(peak_full, s["pages_used"])
s = engine.stats()
print(f"{layout}: {len(ids) + new} tokens; pool {s['kv_pool_bytes'] >> 20} MiB ({s['pages_total']} full-attention "
      f"pages, {s['window_pages_total']} window pages); peak held: {peak_full} full-attention pages, {peak_window} "
      f"window pages; {s['window_pages_released']} window pages released")
