"""The default model: `minfer serve` and `minfer generate` with no --model run SmolLM2-135M-Instruct from the project
venv (the README's first command answers real chat), tried as a user would, with the official openai Python client.

Recorded: asked "What is the capital of France?" with no system message, SmolLM2-135M-Instruct (under its own
template's default system prompt "You are a helpful AI assistant named SmolLM, ...") answers in French with no
mention of Paris, at temperature 0 — and llama.cpp gives the same text on the same file. With a plain system message
it answers "The capital of France is Paris.", so the test asks it that way, and asks for Germany's capital under the
default system prompt.
"""

from __future__ import annotations

import os

import pytest

from serve_process import serve

openai = pytest.importorskip("openai", reason="the openai client is in the project venv (scripts/setup-venv.sh)")


@pytest.fixture(scope="module")
def server(minfer, smollm2_gguf):
    # No --model: the server must find SmolLM2 in the venv by itself (the venv this python runs in).
    env_before = os.environ.get("VIRTUAL_ENV")
    with serve(minfer.binary) as url:
        yield url
    assert os.environ.get("VIRTUAL_ENV") == env_before


def chat(url: str, messages, **kwargs) -> str:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    reply = client.chat.completions.create(model=client.models.list().data[0].id, messages=messages,
                                           temperature=0, max_tokens=32, **kwargs)
    return reply.choices[0].message.content


def test_served_model_is_smollm2(server):
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused")
    assert "SmolLM2" in client.models.list().data[0].id


def test_capital_of_france_names_paris(server):
    answer = chat(server, [{"role": "system", "content": "You are a helpful assistant."},
                           {"role": "user", "content": "What is the capital of France?"}])
    assert "Paris" in answer, answer


def test_capital_of_germany_names_berlin_under_the_default_system_prompt(server):
    answer = chat(server, [{"role": "user", "content": "What is the capital of Germany?"}])
    assert "Berlin" in answer, answer


def test_streaming_chat_gives_the_same_text(server):
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused")
    messages = [{"role": "user", "content": "What is the capital of Germany?"}]
    stream = client.chat.completions.create(model=client.models.list().data[0].id, messages=messages, temperature=0,
                                            max_tokens=32, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == chat(server, messages)


def test_generate_without_model_uses_smollm2(minfer, smollm2_gguf):
    proc = minfer.run("generate", "-p", "<|im_start|>user\nWhat is the capital of Germany?<|im_end|>\n"
                      "<|im_start|>assistant\n", "-n", 16, "--temperature", 0)
    assert "Berlin" in proc.stdout, proc.stdout
    assert "SmolLM2" in proc.stderr
