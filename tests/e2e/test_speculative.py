"""Speculative decoding by prompt lookup on the real SmolLM2-135M-Instruct, as users meet it: `minfer serve
--speculative ngram` answers the openai Python client with the same greedy text as a plain server, streamed and not,
alone and with concurrent requests, with prompt lookup and with a draft model, and /metrics shows vLLM's
spec-decode counters; `minfer generate` prints the
acceptance; bad flags are refused. (The Python API's speculative_config: tests/python/test_speculative.py.)"""

from __future__ import annotations

import re
import subprocess
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import MINFER_BIN
from serve_process import serve

openai = pytest.importorskip("openai", reason="the openai client is in the project venv (scripts/setup-venv.sh)")

PASSAGE = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
           "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.")
QUOTE = f"Repeat the following text exactly, word for word:\n\n{PASSAGE}"
PROMPTS = [QUOTE, "Write a haiku about rain.", f"Copy this text, replacing 'God' with 'the Lord':\n\n{PASSAGE}",
           "What is the capital of France?"]


def chat(url: str, prompt: str, stream: bool = False) -> str:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    messages = [{"role": "user", "content": prompt}]
    model = client.models.list().data[0].id
    if not stream:
        r = client.chat.completions.create(model=model, messages=messages, max_tokens=80, temperature=0)
        return r.choices[0].message.content
    parts = client.chat.completions.create(model=model, messages=messages, max_tokens=80, temperature=0, stream=True)
    return "".join(c.choices[0].delta.content or "" for c in parts if c.choices)


def metrics(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as r:
        return r.read().decode()


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert m, f"{name} not in /metrics"
    return float(m.group(1))


@pytest.fixture(scope="module")
def plain_answers(smollm2_gguf: Path) -> list[str]:
    with serve(MINFER_BIN, "--model", smollm2_gguf, "--max-model-len", "1024") as url:
        return [chat(url, p) for p in PROMPTS]


def test_server_answers_the_same_text_and_reports_acceptance(smollm2_gguf: Path, plain_answers: list[str]) -> None:
    with serve(MINFER_BIN, "--model", smollm2_gguf, "--max-model-len", "1024", "--speculative", "ngram",
               "--num-speculative-tokens", "5") as url:
        assert [chat(url, p) for p in PROMPTS] == plain_answers
        assert [chat(url, p, stream=True) for p in PROMPTS] == plain_answers
        with ThreadPoolExecutor(8) as pool:  # concurrent: drafts checked inside batched steps
            assert list(pool.map(lambda i: chat(url, PROMPTS[i % 4]), range(8))) == [plain_answers[i % 4]
                                                                                  for i in range(8)]
        text = metrics(url)
    drafted = metric(text, "minfer:spec_decode_num_draft_tokens_total")
    accepted = metric(text, "minfer:spec_decode_num_accepted_tokens_total")
    assert metric(text, "minfer:spec_decode_num_drafts_total") > 0
    assert 0 < accepted <= drafted
    assert "minfer:spec_decode_num_accepted_tokens_per_pos_total" in text
    rate = metric(text, "minfer_spec_decode_acceptance_rate")
    assert rate == pytest.approx(accepted / drafted, rel=1e-6)
    assert metric(text, "minfer_spec_decode_mean_accepted_length") > 1.0


def test_draft_model_server_answers_the_same_text(smollm2_gguf: Path, plain_answers: list[str]) -> None:
    # The model as its own draft: the check must keep nearly every draft and change nothing.
    with serve(MINFER_BIN, "--model", smollm2_gguf, "--max-model-len", "1024", "--speculative-model", smollm2_gguf,
               "--num-speculative-tokens", "3") as url:
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(lambda p: chat(url, p), PROMPTS)) == plain_answers
        text = metrics(url)
    assert metric(text, "minfer_spec_decode_acceptance_rate") > 0.9


def test_generate_prints_acceptance_and_the_same_ids(smollm2_gguf: Path, tmp_path: Path) -> None:
    ids = {}
    for name, extra in (("plain", []), ("ngram", ["--speculative", "ngram"])):
        out = tmp_path / f"{name}.txt"
        p = subprocess.run([str(MINFER_BIN), "generate", "-m", str(smollm2_gguf), "-p", PASSAGE + " " + PASSAGE[:60],
                            "-n", "48", "--temperature", "0", "--ids-out", str(out), *extra],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        ids[name] = out.read_text().split()
        if extra:
            m = re.search(r"speculative decoding \(ngram\): (\d+) of (\d+) draft tokens accepted", p.stderr)
            assert m and 0 < int(m.group(1)) <= int(m.group(2)), p.stderr
    assert ids["ngram"] == ids["plain"]


def test_bad_speculative_flags_are_refused(smollm2_gguf: Path) -> None:
    for args, phrase in ((["--speculative", "eagle"], "--speculative"),
                         (["--num-speculative-tokens", "0"], "--num-speculative-tokens"),
                         (["--speculative-model", "/nonexistent/draft.gguf"], "/nonexistent/draft.gguf")):
        p = subprocess.run([str(MINFER_BIN), "generate", "-m", str(smollm2_gguf), "-p", "hi", *args],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and phrase in p.stderr, p.stderr
