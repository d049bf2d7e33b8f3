"""POST /v1/embeddings on `minfer serve --task embed` with SmolLM2-135M-Instruct (the PyPI GGUF), against llama.cpp's
own embeddings of the same file (llama-cpp-python, embedding=True, the same pooling, normalised), through the
official openai Python client: string, batch and token-id inputs, base64 encoding, the errors of a wrong
`dimensions`, and of the routes a server of the other task does not serve."""

from __future__ import annotations

import base64
import json
import urllib.request

import numpy as np
import openai
import pytest

from serve_process import serve

TEXTS = ["The capital of France is Paris.", "A quick brown fox jumps over the lazy dog.", "Hello"]


def post(url: str, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_embeddings_match_llama_cpp(minfer, smollm2_gguf, pooling):
    llama_cpp = pytest.importorskip("llama_cpp")
    ptype = llama_cpp.LLAMA_POOLING_TYPE_LAST if pooling == "last" else llama_cpp.LLAMA_POOLING_TYPE_MEAN
    oracle = llama_cpp.Llama(model_path=str(smollm2_gguf), embedding=True, pooling_type=ptype, n_ctx=512,
                             verbose=False)
    with serve(minfer.binary, "--model", smollm2_gguf, "--task", "embed", "--pooling", pooling,
               "--max-model-len", "512", "--served-model-name", "m") as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300)
        out = client.embeddings.create(model="m", input=TEXTS)
        assert [d.index for d in out.data] == [0, 1, 2] and out.usage.prompt_tokens > 3
        for text, d in zip(TEXTS, out.data):
            assert len(d.embedding) == 576 and abs(np.linalg.norm(d.embedding) - 1) < 1e-4
            assert cosine(d.embedding, oracle.embed(text, normalize=True)) > 0.999, text
        # Token ids in, and the client's default base64 encoding, give the same vectors.
        ids = json.loads(urllib.request.urlopen(urllib.request.Request(
            url + "/tokenize", data=json.dumps({"prompt": TEXTS[0]}).encode(), method="POST")).read())["tokens"]
        status, by_ids = post(url, "/v1/embeddings", {"input": [ids], "encoding_format": "base64"})
        assert status == 200, by_ids
        decoded = np.frombuffer(base64.b64decode(by_ids["data"][0]["embedding"]), dtype="<f4")
        assert cosine(decoded, out.data[0].embedding) > 0.99999
        status, body = post(url, "/v1/embeddings", {"input": "x", "dimensions": 8})
        assert status == 400 and body["error"]["param"] == "dimensions", body
        status, body = post(url, "/v1/embeddings", {"input": []})
        assert status == 400 and body["error"]["param"] == "input", body
        status, body = post(url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
        assert status == 400 and body["error"]["code"] == "generation_unavailable", body


def test_a_generating_server_refuses_embeddings(minfer, smollm2_gguf):
    with serve(minfer.binary, "--model", smollm2_gguf, "--max-model-len", "256") as url:
        status, body = post(url, "/v1/embeddings", {"input": "x"})
        assert status == 400 and body["error"]["code"] == "embeddings_unavailable", body
