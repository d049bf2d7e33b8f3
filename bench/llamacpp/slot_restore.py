#!/usr/bin/env python3
"""llama.cpp's side of bench/kv_tiers_ttft.py: its slot save/restore (llama-server's /slots?action=save|restore, which
calls llama_state_seq_save_file / llama_state_seq_load_file), through llama-cpp-python on the same GGUF file. One
sequence prefills the prompt (cold: time to the last position's logits), its KV is saved to a file, the context is
cleared, and the file is restored, then the last prompt token is evaluated again for its logits, as llama-server does
after a restore (time to first token from the file). KV type KV for K and V, flash attention on.
  slot_restore.py MODEL.gguf THREADS KV IDS_FILE DIR
  {"what":"cold"|"save"|"restore","seconds":S,"bytes":B}
"""

import json
import os
import sys
import time

import llama_cpp
import numpy as np

GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "bf16": 30}


def main():
    path, threads, kv, ids_file, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    prompt = [int(t) for t in open(ids_file).read().split()]
    llama_cpp.llama_backend_init()
    quiet = llama_cpp.llama_log_callback(lambda *a: None)
    llama_cpp.llama_log_set(quiet, None)
    model = llama_cpp.llama_model_load_from_file(path.encode(), llama_cpp.llama_model_default_params())
    vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    p = llama_cpp.llama_context_default_params()
    p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = len(prompt) + 64, 512, 512, 1
    p.n_threads = p.n_threads_batch = threads
    p.type_k = p.type_v = GGML_TYPES[kv]
    p.flash_attn_type = 1
    ctx = llama_cpp.llama_init_from_model(model, p)
    batch = llama_cpp.llama_batch_init(512, 0, 1)

    def decode(tokens, pos0):
        for start in range(0, len(tokens), 512):
            chunk = tokens[start:start + 512]
            batch.n_tokens = len(chunk)
            for i, t in enumerate(chunk):
                batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.seq_id[i][0], batch.logits[i] = (
                    t, pos0 + start + i, 1, 0, start + i == len(tokens) - 1)
            assert llama_cpp.llama_decode(ctx, batch) == 0, "llama_decode failed"
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, batch.n_tokens - 1), shape=(vocab,))

    t0 = time.perf_counter()
    first = int(np.argmax(decode(prompt, 0)))
    print(json.dumps({"what": "cold", "seconds": time.perf_counter() - t0, "first": first}), flush=True)
    file = os.path.join(out_dir, "slot0.bin")
    tokens = (llama_cpp.llama_token * len(prompt))(*prompt)
    t0 = time.perf_counter()
    wrote = llama_cpp.llama_state_seq_save_file(ctx, file.encode(), 0, tokens, len(prompt))
    print(json.dumps({"what": "save", "seconds": time.perf_counter() - t0, "bytes": wrote}), flush=True)
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    out = (llama_cpp.llama_token * len(prompt))()
    count = llama_cpp.c_size_t(0)
    t0 = time.perf_counter()
    read = llama_cpp.llama_state_seq_load_file(ctx, file.encode(), 0, out, len(prompt), llama_cpp.ctypes.byref(count))
    assert read > 0 and count.value == len(prompt), "restore failed"
    # As llama-server: the restored cache holds every prompt token; the last one is evaluated again for its logits.
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, len(prompt) - 1, -1)
    again = int(np.argmax(decode(prompt[-1:], len(prompt) - 1)))
    print(json.dumps({"what": "restore", "seconds": time.perf_counter() - t0, "bytes": read, "first": again}),
          flush=True)
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)


if __name__ == "__main__":
    main()
