"""llama.cpp's side of `minfer eval-kv`: the same measures for each of its KV cache types (-ctk/-ctv) against its own
f32 KV cache, on the same GGUF file and text, through llama-cpp-python (its library, flash attention on, as
quantized V needs): per-token KL(p_f32 || p_kv) of the next-token distribution, top-1 agreement, and perplexity,
over sliding windows of CONTEXT tokens advancing by STRIDE (the first window scores all its tokens, later ones the
tokens past the previous window), as eval-kv scores them.

    .venv/bin/python bench/kv_accuracy_llamacpp.py MODEL.gguf TEXT [CONTEXT=512 STRIDE=256 MAX_TOKENS=4096]
"""

from __future__ import annotations

import sys

import numpy as np
from llama_cpp import Llama

GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "bf16": 30}


def windows(n: int, context: int, stride: int):
    scored_to, begin = 1, 0
    while scored_to < n:
        end = min(begin + context, n)
        if end > scored_to:
            yield begin, end, max(scored_to, begin + 1)
        scored_to = max(scored_to, end)
        begin += stride


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def window_logits(model: str, kv: str, tokens: list[int], context: int, stride: int) -> list[np.ndarray]:
    llm = Llama(model_path=model, n_ctx=context, n_batch=context, n_ubatch=context, logits_all=True, flash_attn=True,
                type_k=GGML_TYPES[kv], type_v=GGML_TYPES[kv], n_threads=2, verbose=False)
    out = []
    for begin, end, score_from in windows(len(tokens), context, stride):
        llm.reset()
        llm.eval(tokens[begin:end])
        rows = np.array(llm.scores[: end - begin], dtype=np.float32)
        out.append(log_softmax(rows[score_from - 1 - begin: end - 1 - begin]))
    return out


def main() -> None:
    model, text = sys.argv[1], sys.argv[2]
    context, stride, max_tokens = (int(a) for a in (sys.argv[3:] + ["512", "256", "4096"][len(sys.argv) - 3:])[:3])
    tok = Llama(model_path=model, vocab_only=True, verbose=False)
    tokens = tok.tokenize(open(text, "rb").read(), add_bos=True)[:max_tokens]
    targets = np.concatenate([np.array(tokens[s:e]) for _, e, s in windows(len(tokens), context, stride)])
    ref = np.concatenate(window_logits(model, "f32", tokens, context, stride))
    ppl_ref = float(np.exp(-ref[np.arange(len(targets)), targets].mean()))
    print(f"llama.cpp {model}: {len(tokens)} tokens, windows of {context} (stride {stride}); reference: f32 KV")
    print(f"{'kv dtype':<10} {'KL mean':>10} {'KL max':>10} {'top-1':>9} {'ppl f32':>9} {'ppl kv':>9} {'dppl':>8}")
    for kv in ("bf16", "f16", "q8_0", "q4_0"):
        got = np.concatenate(window_logits(model, kv, tokens, context, stride))
        kl = (np.exp(ref) * (ref - got)).sum(axis=-1)
        top1 = float((ref.argmax(-1) == got.argmax(-1)).mean()) * 100
        ppl = float(np.exp(-got[np.arange(len(targets)), targets].mean()))
        print(f"{kv:<10} {kl.mean():>10.2e} {kl.max():>10.2e} {top1:>8.2f}% {ppl_ref:>9.4f} {ppl:>9.4f} "
              f"{100 * (ppl / ppl_ref - 1):>7.3f}%")


if __name__ == "__main__":
    main()
