#!/usr/bin/env python3
"""Offline batch generation with the minfer Python API: load a model once, generate for many prompts together
(the engine batches them continuously), print the results and the engine's counters.

    PYTHONPATH=build/release/python python3 examples/offline_batch.py \
        --model ../shared/models/stories260K/stories260K.bin --max-new-tokens 64

Prompts come from --prompts-file (one per line) or a built-in list; --output writes one JSON object per
prompt (prompt, text, token_ids, finish_reason).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from minfer import Engine, SamplingParams

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO.parent / "shared" / "models" / "stories260K" / "stories260K.bin"
DEFAULT_PROMPTS = [
    "Once upon a time",
    "The little dog",
    "Lily and Ben went to the park",
    "One day, a big bird",
    "Tom had a red ball",
    "The sun was shining and",
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(DEFAULT_MODEL), help="HF directory, .gguf or llama2.c .bin")
    ap.add_argument("--prompts-file", help="one prompt per line (default: a few built-in prompts)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None, help="kernel threads (default: all cores)")
    ap.add_argument("--kv-cache-memory", default="64MiB", help="KV cache size, e.g. 64MiB")
    ap.add_argument("--output", help="write JSON lines (prompt, text, token_ids, finish_reason) here")
    args = ap.parse_args(argv)

    if args.prompts_file:
        prompts = [line.rstrip("\n") for line in Path(args.prompts_file).read_text().splitlines() if line.strip()]
    else:
        prompts = DEFAULT_PROMPTS
    if not prompts:
        ap.error(f"{args.prompts_file} holds no prompts")

    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                            seed=args.seed)
    with Engine(model_path=args.model, device="cpu", num_threads=args.threads,
                kv_cache_memory=args.kv_cache_memory) as engine:
        start = time.perf_counter()
        results = engine.generate(prompts, params)
        seconds = time.perf_counter() - start
        stats = engine.stats()

    out = open(args.output, "w") if args.output else None
    for r in results:
        print(f"--- {r.prompt!r} ({len(r.token_ids)} tokens, {r.finish_reason})")
        print(r.prompt + r.text)
        if out:
            out.write(json.dumps({"prompt": r.prompt, "text": r.text, "token_ids": r.token_ids,
                                  "finish_reason": r.finish_reason}) + "\n")
    if out:
        out.close()
    generated = sum(len(r.token_ids) for r in results)
    print(f"=== {len(prompts)} prompts, {generated} tokens in {seconds:.2f} s ({generated / max(seconds, 1e-9):.1f} "
          f"tok/s); {stats['num_steps']} engine steps, at most {stats['max_num_running']} requests at once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
