#!/usr/bin/env python3
"""llama.cpp's side of bench/llamacpp_compare.sh through llama-cpp-python (the project venv's build, compiled from
source with native CPU flags): the same measurements, and the same JSON lines, as bench.mjs.
  bench.py MODEL.gguf THREADS DECODE_PROMPT_IDS DECODE_TOKENS PREFILL_IDS CONCURRENCY DECODE_STEPS
  {"what":"decode","tokens":N,"steps":N-1,"seconds":S,"ids":[...]}   greedy, batch 1 (argmax of the logits)
  {"what":"prefill","tokens":N,"seconds":S}                         best of 3, logits of the last position only
  {"what":"concurrent","sequences":C,"steps":K,"seconds":S}          C sequences decoding together: one
                                                                    llama_decode of C tokens per step
"""

import json
import sys
import time

import llama_cpp
import numpy as np


def ids(s):
    return [int(x) for x in s.split(",")]


def emit(**kw):
    print(json.dumps(kw), flush=True)


class Context:
    """A llama.cpp context over the low-level API: batches of (token, position, sequence, wants logits)."""

    def __init__(self, model, threads, n_ctx, n_seq, n_batch=512):
        p = llama_cpp.llama_context_default_params()
        p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = n_ctx, n_batch, n_batch, n_seq
        p.n_threads = p.n_threads_batch = threads
        self.ctx = llama_cpp.llama_init_from_model(model, p)
        self.vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq)
        self.n_batch = n_batch

    def decode(self, items):
        """items: (token, pos, seq, logits?) in chunks of n_batch; returns the logits rows asked for, in order."""
        rows = []
        for start in range(0, len(items), self.n_batch):
            chunk = items[start:start + self.n_batch]
            b = self.batch
            b.n_tokens = len(chunk)
            for i, (tok, pos, seq, want) in enumerate(chunk):
                b.token[i], b.pos[i], b.n_seq_id[i], b.seq_id[i][0], b.logits[i] = tok, pos, 1, seq, want
            assert llama_cpp.llama_decode(self.ctx, b) == 0, "llama_decode failed"
            for i, (_, _, _, want) in enumerate(chunk):
                if want:
                    rows.append(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, i), shape=(self.vocab,)))
        return rows

    def clear(self):
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)

    def close(self):
        llama_cpp.llama_batch_free(self.batch)
        llama_cpp.llama_free(self.ctx)


def main():
    path, threads, decode_prompt, decode_tokens, prefill_ids, concurrency, steps = sys.argv[1:8]
    threads, decode_tokens, steps = int(threads), int(decode_tokens), int(steps)
    llama_cpp.llama_backend_init()
    quiet = llama_cpp.llama_log_callback(lambda *a: None)  # kept alive: llama.cpp calls it later
    llama_cpp.llama_log_set(quiet, None)
    mp = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(path.encode(), mp)

    ctx = Context(model, threads, 1024, 1)
    prompt = ids(decode_prompt)
    (row,) = ctx.decode([(t, i, 0, i == len(prompt) - 1) for i, t in enumerate(prompt)])
    out = [int(np.argmax(row))]
    t0 = time.perf_counter()
    while len(out) < decode_tokens:
        (row,) = ctx.decode([(out[-1], len(prompt) + len(out) - 1, 0, True)])
        out.append(int(np.argmax(row)))
    emit(what="decode", tokens=len(out), steps=len(out) - 1, seconds=time.perf_counter() - t0, ids=out)

    prompt = ids(prefill_ids)
    best = float("inf")
    for _ in range(3):
        ctx.clear()
        t0 = time.perf_counter()
        ctx.decode([(t, i, 0, i == len(prompt) - 1) for i, t in enumerate(prompt)])
        best = min(best, time.perf_counter() - t0)
    emit(what="prefill", tokens=len(prompt), seconds=best)
    ctx.close()

    for c in (int(x) for x in concurrency.split(",")):
        ctx = Context(model, threads, 64 * c, c)
        prompts = [[1000 + 37 * s + 11 * i for i in range(16)] for s in range(c)]
        rows = ctx.decode([(t, i, s, i == 15) for s, p in enumerate(prompts) for i, t in enumerate(p)])
        last = [int(np.argmax(r)) for r in rows]
        t0 = time.perf_counter()
        for step in range(steps):
            rows = ctx.decode([(last[s], 16 + step, s, True) for s in range(c)])
            last = [int(np.argmax(r)) for r in rows]
        emit(what="concurrent", sequences=c, steps=steps, seconds=time.perf_counter() - t0)
        ctx.close()
    llama_cpp.llama_model_free(model)


if __name__ == "__main__":
    main()
