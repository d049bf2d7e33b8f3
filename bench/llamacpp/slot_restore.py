#!/usr/bin/env python3
"""llama.cpp's side of bench/kv_tiers_ttft.py: its slot save/restore (llama-server's /slots?action=save|restore, which
calls llama_state_seq_save_file / llama_state_seq_load_file), through llama-cpp-python on the same GGUF file. One
sequence prefills the prompt (cold: time to the last position's logits), its KV is saved to a file, the context is
cleared, and the file is restored, then the last prompt token is evaluated again for its logits, as llama-server does
after a restore (time to first token from the file). KV type KV for K and V, flash attention on.
  slot_restore.py MODEL.gguf THREADS KV IDS_FILE DIR
  {"what":"cold"|"save"|"restore","seconds":S,"bytes":B}
"""

import ctypes
import json
import os
import sys
import time

import llama_cpp
import numpy as np

from context import Context


def main():
    path, threads, kv, ids_file, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    prompt = [int(t) for t in open(ids_file).read().split()]
    llm = Context(path, threads, kv, len(prompt) + 64)
    ctx = llm.ctx
    t0 = time.perf_counter()
    first = int(np.argmax(llm.decode(prompt, 0)))
    print(json.dumps({"what": "cold", "seconds": time.perf_counter() - t0, "first": first}), flush=True)
    file = os.path.join(out_dir, "slot0.bin")
    tokens = (llama_cpp.llama_token * len(prompt))(*prompt)
    t0 = time.perf_counter()
    wrote = llama_cpp.llama_state_seq_save_file(ctx, file.encode(), 0, tokens, len(prompt))
    print(json.dumps({"what": "save", "seconds": time.perf_counter() - t0, "bytes": wrote}), flush=True)
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    out = (llama_cpp.llama_token * len(prompt))()
    count = ctypes.c_size_t(0)
    t0 = time.perf_counter()
    read = llama_cpp.llama_state_seq_load_file(ctx, file.encode(), 0, out, len(prompt), ctypes.byref(count))
    assert read > 0 and count.value == len(prompt), "restore failed"
    # As llama-server: the restored cache holds every prompt token; the last one is evaluated again for its logits.
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, len(prompt) - 1, -1)
    again = int(np.argmax(llm.decode(prompt[-1:], len(prompt) - 1)))
    print(json.dumps({"what": "restore", "seconds": time.perf_counter() - t0, "bytes": read, "first": again}),
          flush=True)
    llm.close()


if __name__ == "__main__":
    main()
