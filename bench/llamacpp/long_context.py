#!/usr/bin/env python3
"""llama.cpp's side of bench/long_context_compare.sh, through llama-cpp-python (its library, as llama-bench -d
measures it): one sequence prefills DEPTH prompt tokens (timed: prefill tok/s), then decodes STEPS tokens greedily
at that depth (timed: decode tok/s), with KV cache type KV for K and V (-ctk/-ctv) and flash attention on (which
quantized V needs, and which llama.cpp's CPU backend uses by default).
  long_context.py MODEL.gguf THREADS KV DEPTH STEPS
  {"what":"prefill","tokens":N,"seconds":S} {"what":"decode","steps":N,"seconds":S}
"""

import json
import sys
import time

import llama_cpp
import numpy as np

GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "bf16": 30}


def main():
    path, threads, kv, depth, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    llama_cpp.llama_backend_init()
    quiet = llama_cpp.llama_log_callback(lambda *a: None)
    llama_cpp.llama_log_set(quiet, None)
    model = llama_cpp.llama_model_load_from_file(path.encode(), llama_cpp.llama_model_default_params())
    vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    p = llama_cpp.llama_context_default_params()
    p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = depth + steps + 16, 512, 512, 1
    p.n_threads = p.n_threads_batch = threads
    p.type_k = p.type_v = GGML_TYPES[kv]
    p.flash_attn_type = 1  # enabled
    ctx = llama_cpp.llama_init_from_model(model, p)
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    rng = np.random.default_rng(7)
    prompt = [int(t) for t in rng.integers(1000, min(vocab, 150000), depth)]

    def decode(tokens, pos0, want_last):
        row = None
        for start in range(0, len(tokens), 512):
            chunk = tokens[start:start + 512]
            batch.n_tokens = len(chunk)
            for i, t in enumerate(chunk):
                last = want_last and start + i == len(tokens) - 1
                batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.seq_id[i][0], batch.logits[i] = (
                    t, pos0 + start + i, 1, 0, last)
            assert llama_cpp.llama_decode(ctx, batch) == 0, "llama_decode failed"
            if want_last and start + len(chunk) == len(tokens):
                row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, len(chunk) - 1), shape=(vocab,))
        return row

    t0 = time.perf_counter()
    row = decode(prompt, 0, True)
    print(json.dumps({"what": "prefill", "tokens": depth, "seconds": time.perf_counter() - t0}), flush=True)
    token = int(np.argmax(row))
    t0 = time.perf_counter()
    for s in range(steps):
        token = int(np.argmax(decode([token], depth + s, True)))
    print(json.dumps({"what": "decode", "steps": steps, "seconds": time.perf_counter() - t0}), flush=True)
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)


if __name__ == "__main__":
    main()
