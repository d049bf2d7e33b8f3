"""Server hardening with a real server and real sockets: the API key on every route that runs or tokenizes for the
model (several keys, MINFER_API_KEY, /metrics optional, failures counted), the warning for a public bind without a
key, slow-header and slow-body clients cut at their timeouts while a normal client is served, the connection and
queue caps answering 503 with Retry-After, and CORS preflights from an allowed and a refused origin."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
from typing import Dict, Iterator, Optional, Tuple

import pytest

from conftest import MINFER_BIN

BODY = {"text": "hi", "prompt": "hi", "max_tokens": 2, "max_new_tokens": 2, "tokens": [1, 2],
        "messages": [{"role": "user", "content": "hi"}]}
MODEL_ROUTES = [("POST", "/generate"), ("POST", "/v1/completions"), ("POST", "/v1/chat/completions"),
                ("POST", "/tokenize"), ("POST", "/detokenize"), ("GET", "/v1/models")]


class Server:
    def __init__(self, url: str, log):
        self.host, port = url.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)
        self.log = log

    def request(self, method: str, path: str, body: Optional[dict] = None,
                headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], str]:
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        c.request(method, path, json.dumps(body) if body is not None else None, headers or {})
        r = c.getresponse()
        data = r.read().decode()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def metric(self, name: str, key: Optional[str] = None) -> float:
        _, _, text = self.request("GET", "/metrics", headers={"Authorization": f"Bearer {key}"} if key else None)
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        assert m, f"{name} not in /metrics"
        return float(m.group(1))

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()


@contextlib.contextmanager
def server(model, *args: str, env: Optional[Dict[str, str]] = None, host: str = "127.0.0.1",
           max_model_len: int = 4096) -> Iterator[Server]:
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([str(MINFER_BIN), "serve", "--host", host, "--port", "0", "--model", str(model),
                             "--served-model-name", "m", "-t", "1", "--max-model-len", str(max_model_len), *args],
                            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True,
                            env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        proc.kill()
        log.seek(0)
        pytest.fail(f"the server did not start: {line}\n{log.read()[-3000:]}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    url = m.group(1).replace("0.0.0.0", "127.0.0.1")
    try:
        yield Server(url, log)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def model(tiny_models):
    return tiny_models("tiny-qwen3", "f32")


def test_the_key_guards_every_model_route(model):
    with server(model, "--api-key", "key-one", "--api-key", "key-two", env={"MINFER_API_KEY": "env-a,env-b"}) as s:
        for method, path in MODEL_ROUTES:
            body = BODY if method == "POST" else None
            status, _, payload = s.request(method, path, body)
            assert status == 401, (path, payload)
            assert json.loads(payload)["error"]["type"] == "authentication_error"
            assert s.request(method, path, body, {"Authorization": "Bearer wrong"})[0] == 401, path
            assert s.request(method, path, body, {"Authorization": "key-one"})[0] == 401, path  # not a Bearer
            for key in ("key-one", "key-two", "env-a", "env-b"):
                status, _, payload = s.request(method, path, body, {"Authorization": f"Bearer {key}"})
                assert status == 200, (path, key, payload)
        assert s.request("GET", "/health")[0] == 200
        assert s.request("GET", "/metrics")[0] == 200  # open by default
        assert s.metric("minfer_auth_failures_total") == 3 * len(MODEL_ROUTES)


def test_metrics_behind_the_key_and_the_public_bind_warning(model):
    with server(model, "--api-key", "k", "--metrics-require-key") as s:
        assert s.request("GET", "/metrics")[0] == 401
        assert s.metric("minfer_auth_failures_total", key="k") == 1
        assert s.request("GET", "/health")[0] == 200
    with server(model, host="0.0.0.0") as s:
        assert "without an API key: anyone who can reach the port can run the model" in s.stderr()
    with server(model) as s:  # loopback: no warning
        assert "without an API key" not in s.stderr()


def test_slow_clients_are_cut_while_a_normal_one_is_served(model):
    with server(model, "--header-timeout", "2", "--body-timeout", "3", "--timeout-keep-alive", "4") as s:
        slow_header = socket.create_connection((s.host, s.port))
        slow_header.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # and never the end of the header
        slow_body = socket.create_connection((s.host, s.port))
        slow_body.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
        idle = socket.create_connection((s.host, s.port))  # says nothing at all
        t0 = time.monotonic()
        # Meanwhile a normal client is served.
        status, _, payload = s.request("POST", "/v1/completions", {"prompt": "hello", "max_tokens": 4})
        assert status == 200, payload
        closed: Dict[str, float] = {}
        for name, sock in (("header", slow_header), ("body", slow_body), ("idle", idle)):
            sock.settimeout(30)
            assert sock.recv(100) == b"", name  # closed by the server, without a response
            closed[name] = time.monotonic() - t0
        assert 1.5 < closed["header"] < 6, closed
        assert 2.5 < closed["body"] < 7, closed
        assert 3.5 < closed["idle"] < 9, closed


def test_connection_cap_answers_503_with_retry_after(model):
    with server(model, "--max-connections", "2") as s:
        held = []
        for _ in range(2):  # two keep-alive connections, each having finished a request
            c = http.client.HTTPConnection(s.host, s.port, timeout=30)
            c.request("GET", "/health")
            assert c.getresponse().read()
            held.append(c)
        status, headers, payload = s.request("GET", "/health")
        assert status == 503 and headers.get("retry-after") == "1", payload
        assert "--max-connections" in payload
        for c in held:
            c.close()
        deadline = time.monotonic() + 10
        while s.request("GET", "/health")[0] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_queue_cap_answers_503_with_retry_after(model):
    """One request running (max_num_seqs 1) and one queued (--max-queued-requests 1): a third gets 503 at once."""
    with server(model, "--max-num-seqs", "1", "--max-queued-requests", "1", max_model_len=8192) as s:
        running = http.client.HTTPConnection(s.host, s.port, timeout=60)
        running.request("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": 8000, "ignore_eos": True,
                                                               "stream": True}))
        stream = running.getresponse()
        assert stream.status == 200 and stream.readline().startswith(b"data: ")  # it runs
        queued: list = []
        t = threading.Thread(target=lambda: queued.append(s.request("POST", "/v1/completions",
                                                                    {"prompt": "q", "max_tokens": 2})))
        t.start()
        time.sleep(0.3)  # the queued one is in
        status, headers, payload = s.request("POST", "/v1/completions", {"prompt": "y", "max_tokens": 2})
        assert status == 503 and headers.get("retry-after") == "1", payload
        assert "--max-queued-requests" in payload
        stream.read()
        t.join()
        assert queued[0][0] == 200
        assert s.metric("minfer_requests_rejected_total") == 1
        assert s.request("POST", "/v1/completions", {"prompt": "after", "max_tokens": 2})[0] == 200


def test_cors_preflight_and_origin_headers(model):
    with server(model, "--allowed-origins", "http://app.example", "--api-key", "k") as s:
        pre = {"Origin": "http://app.example", "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization, content-type"}
        status, headers, _ = s.request("OPTIONS", "/v1/chat/completions", headers=pre)  # no key on a preflight
        assert status == 204
        assert headers["access-control-allow-origin"] == "http://app.example"
        assert "POST" in headers["access-control-allow-methods"]
        assert headers["access-control-allow-headers"] == "authorization, content-type"
        status, _, payload = s.request("OPTIONS", "/v1/chat/completions",
                                       headers={**pre, "Origin": "http://evil.example"})
        assert status == 403 and "--allowed-origins" in payload
        status, headers, _ = s.request("POST", "/v1/completions", {"prompt": "a", "max_tokens": 2},
                                       {"Origin": "http://app.example", "Authorization": "Bearer k"})
        assert status == 200 and headers["access-control-allow-origin"] == "http://app.example"
        status, headers, _ = s.request("POST", "/v1/completions", {"prompt": "a", "max_tokens": 2},
                                       {"Origin": "http://evil.example", "Authorization": "Bearer k"})
        assert status == 200 and "access-control-allow-origin" not in headers  # the browser keeps it out
    with server(model) as s:  # no --allowed-origins: no CORS at all
        status, _, _ = s.request("OPTIONS", "/v1/completions",
                                 headers={"Origin": "http://app.example", "Access-Control-Request-Method": "POST"})
        assert status == 403


def test_request_timeout_ends_the_request_and_frees_its_pages(model):
    with server(model, "--request-timeout", "30", max_model_len=8192) as s:
        long_body = {"prompt": "x", "max_tokens": 8000, "ignore_eos": True, "timeout": 0.3}
        t0 = time.monotonic()
        status, _, payload = s.request("POST", "/v1/completions", long_body)
        assert status == 408, payload
        assert time.monotonic() - t0 < 5
        error = json.loads(payload)["error"]
        assert error["param"] == "timeout" and "timeout of 0.3 s" in error["message"]
        c = http.client.HTTPConnection(s.host, s.port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps({**long_body, "stream": True}))
        events = c.getresponse().read().decode()
        assert '"timeout of 0.3 s' in events.replace("\\", "") or "timeout of 0.3 s" in events, events[-500:]
        deadline = time.monotonic() + 10
        while s.metric("minfer_kv_pages_used") != 0 or s.metric("minfer_num_requests_running") != 0:
            assert time.monotonic() < deadline, "the timed-out requests still hold pages"
            time.sleep(0.1)
        status, _, payload = s.request("POST", "/v1/completions", {**long_body, "timeout": -1})
        assert status == 400 and "timeout" in payload


def test_https_with_a_self_signed_certificate(model, tmp_path):
    """--ssl-keyfile/--ssl-certfile: curl and the openai client over https (streaming too); plain HTTP to the TLS
    port gets no answer and does not disturb the server."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([str(MINFER_BIN), "serve", "--port", "0", "--model", str(model), "--served-model-name",
                             "m", "-t", "1", "--ssl-keyfile", str(key), "--ssl-certfile", str(cert), "--api-key", "k"],
                            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        m = re.search(r"listening on https://127\.0\.0\.1:(\d+)", proc.stdout.readline())
        assert m, "no https listening line"
        port = int(m.group(1))
        url = f"https://127.0.0.1:{port}"
        out = subprocess.run(["curl", "-s", "--cacert", str(cert), "-H", "Authorization: Bearer k", "-d",
                              json.dumps({"prompt": "hello", "max_tokens": 4}), url + "/v1/completions"],
                             capture_output=True, text=True, timeout=60)
        assert json.loads(out.stdout)["choices"][0]["text"] is not None, out.stdout + out.stderr
        refused = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url + "/health"],
                                 capture_output=True, text=True, timeout=60)  # the certificate is not trusted
        assert refused.returncode != 0
        plain = subprocess.run(["curl", "-s", "-m", "5", f"http://127.0.0.1:{port}/health"], capture_output=True,
                               text=True, timeout=60)
        assert plain.returncode != 0  # plain HTTP to the TLS port: no answer
        import ssl

        import httpx
        import openai
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0,
                               http_client=httpx.Client(verify=ssl.create_default_context(cafile=str(cert))))
        whole = client.completions.create(model="m", prompt="hello", max_tokens=6, temperature=0).choices[0].text
        streamed = "".join(c.choices[0].text for c in client.completions.create(
            model="m", prompt="hello", max_tokens=6, temperature=0, stream=True) if c.choices)
        assert streamed == whole
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0,
                          http_client=httpx.Client(verify=ssl.create_default_context(cafile=str(cert)))).models.list()
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_https_needs_both_files(model, tmp_path):
    proc = subprocess.run([str(MINFER_BIN), "serve", "--port", "0", "--model", str(model), "--ssl-keyfile",
                           str(tmp_path / "k.pem")], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "give both --ssl-keyfile and --ssl-certfile" in proc.stderr
    (tmp_path / "bad.pem").write_text("not a certificate")
    proc = subprocess.run([str(MINFER_BIN), "serve", "--port", "0", "--model", str(model), "--ssl-keyfile",
                           str(tmp_path / "bad.pem"), "--ssl-certfile", str(tmp_path / "bad.pem")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "bad.pem: cannot use it as the TLS certificate chain" in proc.stderr
