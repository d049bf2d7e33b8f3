"""`minfer serve` end to end: the real server on a free loopback port, spoken to over raw HTTP (curl,
http.client, asyncio streams), with the tiny-qwen2 test model (random weights, ChatML template).

Covers /health, /v1/models, /metrics, /generate, /v1/completions and /v1/chat/completions (whole and
streamed), logprobs, stop strings, n and prompt lists, a bad-input table, a bounded load test (512 concurrent
streams must give the tokens each gives alone at temperature 0), disconnect mid-stream freeing KV pages, the
API key, and the SIGTERM drain."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

START_TIMEOUT_S = 120


class Server:
    """A running `minfer serve`; its output is collected by a thread so the pipe never fills."""

    def __init__(self, minfer, model: Optional[Path], *extra: str, env: Optional[Dict[str, str]] = None):
        cmd = [str(minfer.binary), "serve", "--port", "0", "--threads", "2", *extra]
        if model is not None:
            cmd += ["--model", str(model)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
        self.lines: List[str] = []
        self.port: Optional[int] = None
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.lines.append(line)
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.thread = threading.Thread(target=pump, daemon=True)
        self.thread.start()
        if not ready.wait(START_TIMEOUT_S) or self.port is None:
            self.stop()
            pytest.fail("minfer serve did not print 'listening on http://127.0.0.1:PORT'\n" + self.output())

    def output(self) -> str:
        return "".join(self.lines[-200:])

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.thread.join(5)
        return self.proc.returncode

    def request(self, method: str, path: str, body=None, headers: Optional[Dict[str, str]] = None,
                raw: Optional[bytes] = None) -> Tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        return resp.status, payload

    def post(self, path: str, body, **kw) -> dict:
        status, payload = self.request("POST", path, body, **kw)
        assert status == 200, f"POST {path} {body} -> {status} {payload!r}\n{self.output()}"
        return json.loads(payload)

    def metrics(self) -> Dict[str, float]:
        status, payload = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in payload.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


async def stream_sse(port: int, path: str, body: dict, stop_after: Optional[int] = None,
                     on_event=None) -> List[str]:
    """POSTs body and returns the SSE data payloads in order (HTTP/1.1 chunked). stop_after: close the
    connection after that many events (a client going away). on_event: called with each payload as it arrives."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"text/event-stream" in head and b"chunked" in head.lower(), head
    events: List[str] = []
    buf = b""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            break
        buf += await reader.readexactly(size)
        await reader.readexactly(2)
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            assert event.startswith(b"data: "), event
            events.append(event[6:].decode())
            if on_event is not None:
                on_event(events[-1])
            # One HTTP chunk may carry several events: stop at exactly stop_after of them.
            if stop_after is not None and len(events) >= stop_after:
                writer.close()
                return events
    writer.close()
    return events


def sse(port: int, path: str, body: dict, stop_after: Optional[int] = None, on_event=None) -> List[str]:
    return asyncio.run(stream_sse(port, path, body, stop_after, on_event))


def stream_text(events: List[str]) -> Tuple[str, List[dict]]:
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    text = ""
    for c in chunks:
        for ch in c.get("choices", []):
            text += ch.get("text") or ch.get("delta", {}).get("content") or ""
    return text, chunks


@pytest.fixture(scope="module")
def model(tiny_models) -> Path:
    return tiny_models("tiny-qwen2", "f32")


@pytest.fixture(scope="module")
def server(minfer, model):
    s = Server(minfer, model, "--max-model-len", "256", "--kv-cache-memory", "32MiB", "--max-body-bytes", "65536")
    yield s
    assert s.stop() == 0, s.output()


GREEDY = {"temperature": 0, "ignore_eos": True}


def test_health_models_metrics_with_curl(server):
    base = f"http://127.0.0.1:{server.port}"
    out = subprocess.run(["curl", "-sf", f"{base}/health"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and json.loads(out.stdout) == {"status": "ok"}
    out = subprocess.run(["curl", "-sf", f"{base}/v1/models"], capture_output=True, text=True, timeout=30)
    models = json.loads(out.stdout)
    assert models["object"] == "list" and models["data"][0]["id"] == server_name(server)
    assert models["data"][0]["max_model_len"] == 256
    out = subprocess.run(["curl", "-sf", "-X", "POST", f"{base}/generate", "-d",
                          json.dumps({"text": "Once upon a time", "max_new_tokens": 8, **GREEDY})],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert isinstance(json.loads(out.stdout)["output"], str)
    metrics = server.metrics()
    assert "minfer_kv_pages_total" in metrics and metrics["minfer_kv_pages_total"] > 0
    assert metrics['minfer_http_requests_total{route="/generate",status="200"}'] >= 1
    assert metrics["minfer_time_to_first_token_seconds_count"] >= 1
    for name in ("minfer_num_requests_running", "minfer_num_requests_waiting", "minfer_prefix_cache_hit_rate",
                 "minfer_e2e_request_latency_seconds_count", "minfer_time_per_output_token_seconds_count",
                 "minfer_prompt_tokens_total", "minfer_generation_tokens_total", "minfer_kv_pages_used"):
        assert name in metrics, name


def server_name(server) -> str:
    status, payload = server.request("GET", "/v1/models")
    return json.loads(payload)["data"][0]["id"]


def test_generate_matches_completions(server):
    gen = server.post("/generate", {"text": "The cat sat", "max_new_tokens": 12, **GREEDY})
    cmpl = server.post("/v1/completions", {"prompt": "The cat sat", "max_tokens": 12, **GREEDY})
    assert gen["output"] == cmpl["choices"][0]["text"]
    assert cmpl["object"] == "text_completion" and cmpl["choices"][0]["finish_reason"] == "length"
    assert cmpl["usage"]["completion_tokens"] == 12
    assert cmpl["usage"]["total_tokens"] == cmpl["usage"]["prompt_tokens"] + 12


def test_completion_streaming_equals_whole(server):
    body = {"prompt": "A little bird", "max_tokens": 16, **GREEDY}
    whole = server.post("/v1/completions", body)
    events = sse(server.port, "/v1/completions", {**body, "stream": True, "stream_options": {"include_usage": True}})
    text, chunks = stream_text(events)
    assert text == whole["choices"][0]["text"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 16
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert all(c["object"] == "text_completion" for c in chunks)


def test_completion_prompt_forms_and_n(server):
    ids = server.post("/v1/completions", {"prompt": "Hello there", "max_tokens": 1, **GREEDY})
    n_prompt = ids["usage"]["prompt_tokens"]
    out = server.post("/v1/completions", {"prompt": ["Hello there", "Good night"], "n": 2, "max_tokens": 6, **GREEDY})
    assert [c["index"] for c in out["choices"]] == [0, 1, 2, 3]
    texts = [c["text"] for c in out["choices"]]
    assert texts[0] == texts[1] and texts[2] == texts[3]  # greedy: the n samples agree
    assert out["usage"]["completion_tokens"] == 24
    token_ids = list(range(5, 5 + n_prompt))
    one = server.post("/v1/completions", {"prompt": token_ids, "max_tokens": 4, **GREEDY})
    many = server.post("/v1/completions", {"prompt": [token_ids, token_ids[:3]], "max_tokens": 4, **GREEDY})
    assert many["choices"][0]["text"] == one["choices"][0]["text"]
    assert one["usage"]["prompt_tokens"] == n_prompt


def test_chat_whole_and_streamed(server):
    body = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}],
            "max_tokens": 10, **GREEDY}
    whole = server.post("/v1/chat/completions", body)
    assert whole["object"] == "chat.completion"
    message = whole["choices"][0]["message"]
    assert message["role"] == "assistant" and isinstance(message["content"], str)
    events = sse(server.port, "/v1/chat/completions", {**body, "stream": True})
    text, chunks = stream_text(events)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert text == message["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    parts = server.post("/v1/chat/completions", {**body, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi!"}]}]})
    assert parts["choices"][0]["message"]["content"] == message["content"]


def test_logprobs(server):
    out = server.post("/v1/completions", {"prompt": "One two", "max_tokens": 5, "logprobs": 2, **GREEDY})
    lp = out["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 5
    for token, value, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        assert value <= 0 and 1 <= len(top) <= 3
        assert max(top.values()) == pytest.approx(value)  # greedy picks the most likely token
    chat = server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
                                                "logprobs": True, "top_logprobs": 3, **GREEDY})
    content = chat["choices"][0]["logprobs"]["content"]
    assert len(content) == 3
    for entry in content:
        assert len(entry["top_logprobs"]) == 3 and entry["logprob"] == pytest.approx(entry["top_logprobs"][0]["logprob"])
        assert isinstance(entry["bytes"], list)


def test_stop_string_and_seed(server):
    base = server.post("/v1/completions", {"prompt": "Once upon", "max_tokens": 24, **GREEDY})["choices"][0]["text"]
    words = [w for w in base.split(" ") if len(w) >= 2 and "\ufffd" not in w]
    if words:
        stop = words[len(words) // 2]
        cut = server.post("/v1/completions", {"prompt": "Once upon", "max_tokens": 24, "stop": [stop, "zzzz"], **GREEDY})
        choice = cut["choices"][0]
        assert choice["finish_reason"] == "stop" and choice["stop_reason"] == stop
        assert choice["text"] == base[:base.index(stop)]
    body = {"prompt": "Once upon", "max_tokens": 12, "temperature": 1.0, "top_p": 0.9, "top_k": 50, "seed": 7,
            "presence_penalty": 0.5, "frequency_penalty": 0.5, "min_p": 0.01}
    assert server.post("/v1/completions", body) ["choices"][0]["text"] == \
        server.post("/v1/completions", body)["choices"][0]["text"]


LONG_PROMPT = "hello world " * 300
BAD_INPUTS = [
    # (path, body or raw bytes, status, param, message fragment)
    ("/v1/completions", b"{not json", 400, None, "not valid JSON"),
    ("/v1/completions", b"[1, 2]", 400, None, "JSON object"),
    ("/v1/completions", b"", 400, None, "empty"),
    ("/v1/completions", b'{"prompt": "\xff\xfe abc"}', 400, None, "UTF-8"),
    ("/v1/completions", {"max_tokens": 4}, 400, "prompt", "'prompt' is required"),
    ("/v1/completions", {"prompt": 12}, 400, "prompt", "'prompt' must be"),
    ("/v1/completions", {"prompt": []}, 400, "prompt", "empty array"),
    ("/v1/completions", {"prompt": "x", "max_tokens": -1}, 400, "max_tokens", "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": "ten"}, 400, "max_tokens", "must be an integer"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 10 ** 9}, 400, "max_tokens", "maximum context length"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 2 ** 70}, 400, "max_tokens", "max_tokens"),
    ("/v1/completions", {"prompt": "x", "temperature": 5}, 400, "temperature", "temperature"),
    ("/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "temperature", "must be a number"),
    ("/v1/completions", {"prompt": "x", "top_p": 0}, 400, "top_p", "top_p"),
    ("/v1/completions", {"prompt": "x", "n": 0}, 400, "n", "'n'"),
    ("/v1/completions", {"prompt": "x", "stop": 5}, 400, "stop", "'stop'"),
    ("/v1/completions", {"prompt": "x", "logprobs": 50}, 400, "logprobs", "logprobs"),
    ("/v1/completions", {"prompt": "x", "stream": "yes"}, 400, "stream", "boolean"),
    ("/v1/completions", {"prompt": [10 ** 6]}, 400, None, "vocabulary"),
    ("/v1/completions", {"prompt": LONG_PROMPT}, 400, "prompt", "maximum context length"),
    ("/v1/completions", {"prompt": "x", "model": "no-such-model"}, 404, "model", "does not exist"),
    ("/v1/chat/completions", {"max_tokens": 3}, 400, "messages", "'messages' is required"),
    ("/v1/chat/completions", {"messages": []}, 400, "messages", "non-empty"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role", "role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 3}]}, 400, "messages[0].content", "content"),
    ("/generate", {"max_new_tokens": 3}, 400, "text", "'text' is required"),
    ("/generate", {"text": "x", "max_new_tokens": 0}, 400, "max_new_tokens", "max_new_tokens"),
    ("/v1/completions", b'{"prompt": "' + b"a" * 70000 + b'"}', 413, None, "larger than the limit"),
    ("/v1/nothing", {}, 404, None, "no route"),
]


@pytest.mark.parametrize("path,body,status,param,fragment", BAD_INPUTS,
                         ids=[f"{i}-{c[2]}-{c[3] or c[4][:20]}" for i, c in enumerate(BAD_INPUTS)])
def test_bad_input(server, path, body, status, param, fragment):
    raw = body if isinstance(body, bytes) else None
    got, payload = server.request("POST", path, None if raw is not None else body, raw=raw)
    assert got == status, payload
    error = json.loads(payload)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert fragment in error["message"], error
    if param is not None:
        assert error["param"] == param, error
    # The server still serves.
    assert server.request("GET", "/health")[0] == 200


def test_wrong_method_and_still_serving(server):
    status, payload = server.request("GET", "/v1/completions")
    assert status == 405 and "expects POST" in json.loads(payload)["error"]["message"]
    assert server.post("/v1/completions", {"prompt": "still here", "max_tokens": 2, **GREEDY})["choices"]


def test_concurrent_streams_match_alone(server):
    prompts = [f"Story number {i}: the" for i in range(8)]
    alone = {p: server.post("/v1/completions", {"prompt": p, "max_tokens": 12, **GREEDY})["choices"][0]["text"]
             for p in prompts}

    async def run_all():
        tasks = [stream_sse(server.port, "/v1/completions",
                            {"prompt": prompts[i % len(prompts)], "max_tokens": 12, "stream": True, **GREEDY})
                 for i in range(512)]
        return await asyncio.gather(*tasks)

    results = asyncio.run(run_all())
    for i, events in enumerate(results):
        text, _ = stream_text(events)
        assert text == alone[prompts[i % len(prompts)]], i
    assert server.request("GET", "/health")[0] == 200


def wait_for(predicate, timeout_s: float = 30.0) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_disconnect_frees_pages(minfer, model):
    s = Server(minfer, model, "--max-model-len", "4096", "--kv-cache-memory", "32MiB", "--no-enable-prefix-caching")
    try:
        before = s.metrics().get("minfer_requests_disconnected_total", 0)
        events = sse(s.port, "/v1/completions",
                     {"prompt": "Keep going", "max_tokens": 4000, "stream": True, **GREEDY}, stop_after=2)
        assert len(events) == 2
        assert wait_for(lambda: s.metrics()["minfer_requests_disconnected_total"] == before + 1), s.output()
        assert wait_for(lambda: s.metrics()["minfer_kv_pages_used"] == 0 and
                        s.metrics()["minfer_num_requests_running"] == 0), s.metrics()
        assert s.post("/v1/completions", {"prompt": "after", "max_tokens": 2, **GREEDY})["choices"]
    finally:
        assert s.stop() == 0, s.output()


def test_api_key(minfer, model):
    s = Server(minfer, model, "--max-model-len", "256", "--kv-cache-memory", "16MiB", "--api-key", "sekret")
    try:
        assert s.request("GET", "/v1/models")[0] == 401
        status, payload = s.request("GET", "/v1/models", headers={"Authorization": "Bearer wrong"})
        assert status == 401 and json.loads(payload)["error"]["type"] == "authentication_error"
        status, _ = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1})
        assert status == 401
        assert s.request("GET", "/v1/models", headers={"Authorization": "Bearer sekret"})[0] == 200
        assert s.request("GET", "/health")[0] == 200
    finally:
        s.stop()


def test_sigterm_drains_running_requests(minfer, model):
    s = Server(minfer, model, "--max-model-len", "1024", "--kv-cache-memory", "16MiB")
    result: Dict[str, List[str]] = {}
    streaming = threading.Event()

    def client():
        result["events"] = sse(s.port, "/v1/completions",
                               {"prompt": "Drain me", "max_tokens": 1000, "stream": True, **GREEDY},
                               on_event=lambda _: streaming.set())

    t = threading.Thread(target=client)
    t.start()
    # The first streamed chunk proves the request is running; polling /metrics could miss a short request.
    assert streaming.wait(30)
    s.proc.send_signal(signal.SIGTERM)
    t.join(120)
    assert s.proc.wait(60) == 0, s.output()
    text, chunks = stream_text(result["events"])
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()


def test_demo_model_without_model_flag_or_default_model(minfer):
    # MINFER_DEFAULT_MODEL=none: as on a machine without the default model (SmolLM2, tests/e2e/test_default_model.py).
    s = Server(minfer, None, "--max-model-len", "128", "--kv-cache-memory", "8MiB", env={"MINFER_DEFAULT_MODEL": "none"})
    try:
        assert "meaningless" in s.output()
        assert s.post("/generate", {"text": "hi", "max_new_tokens": 3})["output"] is not None
        assert server_name(s) == "minfer-demo"
    finally:
        assert s.stop() == 0


def test_engine_flags_quantization_and_kv_dtype(minfer, model):
    s = Server(minfer, model, "--max-model-len", "128", "--kv-cache-memory", "8MiB", "--quantization", "w8a8",
               "--kv-cache-dtype", "bf16", "--fusion", "none")
    try:
        out = s.post("/v1/completions", {"prompt": "quantized", "max_tokens": 4, "ignore_eos": True, **GREEDY})
        assert out["usage"]["completion_tokens"] == 4
        assert "bf16" in s.output()
    finally:
        assert s.stop() == 0, s.output()


CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def test_chat_template_sources(minfer, stories_dir, tmp_path):
    """A model without a chat template (llama2.c) serves completions and answers chat with a 400 that says so;
    --chat-template FILE gives it one."""
    messages = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, **GREEDY}
    s = Server(minfer, stories_dir / "stories260K.bin", "--max-model-len", "128")
    try:
        status, payload = s.request("POST", "/v1/chat/completions", messages)
        assert status == 400, payload
        err = json.loads(payload)["error"]
        assert err["code"] == "chat_template_unavailable" and "--chat-template" in err["message"], err
        assert s.post("/v1/completions", {"prompt": "Once", "max_tokens": 3, **GREEDY})["choices"][0]["text"]
    finally:
        assert s.stop() == 0, s.output()
    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML)
    s = Server(minfer, stories_dir / "stories260K.bin", "--max-model-len", "128", "--chat-template", template)
    try:
        out = s.post("/v1/chat/completions", messages)
        assert out["object"] == "chat.completion" and out["usage"]["completion_tokens"] == 3, out
    finally:
        assert s.stop() == 0, s.output()
