#!/usr/bin/env python3
"""MindIE's FastAPI example -- a service with POST /generate {"text": ...} -> {"output": ...} and a client that
calls it -- with `minfer serve` as the service instead of a FastAPI app around the model.

    # start `minfer serve` on a free port, send the prompts, stop the server:
    PYTHONPATH=build/release/python python3 examples/fastapi_style_client.py \
        --model ../shared/models/stories260K/stories260K.bin "Once upon a time" "The little dog"
    # or talk to a server that is already running:
    ./build/release/tools/minfer serve --model ../shared/models/stories260K/stories260K.bin --port 8000 &
    python3 examples/fastapi_style_client.py --url http://127.0.0.1:8000 "Once upon a time"

The client needs only the standard library (urllib); the prompts are sent concurrently, one thread each, and
the server batches them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO.parent / "shared" / "models" / "stories260K" / "stories260K.bin"


def generate(url: str, text: str, max_new_tokens: int, temperature: Optional[float], timeout: float) -> dict:
    """POST /generate {"text", "max_new_tokens"} -> {"output", ...}, as MindIE's example client does."""
    body = {"text": text, "max_new_tokens": max_new_tokens}
    if temperature is not None:
        body["temperature"] = temperature
    req = urllib.request.Request(f"{url}/generate", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:  # the server's error body says what was wrong
        raise RuntimeError(f"POST {url}/generate -> HTTP {e.code}: {e.read().decode(errors='replace')}") from None


def find_minfer(given: Optional[str]) -> str:
    for candidate in (given, os.environ.get("MINFER_BIN"), REPO / "build" / "release" / "tools" / "minfer"):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    found = shutil.which("minfer")
    if not found:
        sys.exit("cannot find the minfer binary: build it (cmake --build --preset release) or pass --minfer-bin")
    return found


class MinferServer:
    """`minfer serve` on a free local port, stopped (SIGTERM, then kill) on exit."""

    def __init__(self, binary: str, model: str, extra: List[str], start_timeout: float):
        cmd = [binary, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0", *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.DEVNULL)
        self.log: List[str] = []
        self.url = self._wait_listening(start_timeout)
        # Keep reading so the server never blocks on a full pipe.
        threading.Thread(target=lambda: [self.log.append(line) for line in self.proc.stdout], daemon=True).start()

    def _wait_listening(self, timeout: float) -> str:
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                self.log.append(line)
                m = re.search(r"listening on (http://\S+)", line)
                if m:
                    return m.group(1)
        finally:
            timer.cancel()
        self.proc.wait()
        sys.exit(f"minfer serve exited (code {self.proc.returncode}) before listening:\n{''.join(self.log)}")

    def __enter__(self) -> "MinferServer":
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_client(url: str, prompts: List[str], args) -> int:
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        futures = [pool.submit(generate, url, p, args.max_new_tokens, args.temperature, args.timeout) for p in prompts]
        for prompt, fut in zip(prompts, futures):
            reply = fut.result()
            print(json.dumps({"text": prompt, **reply}, ensure_ascii=False))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prompts", nargs="*", default=["Once upon a time", "The little dog"], help="texts to send")
    ap.add_argument("--url", help="a running server (e.g. http://127.0.0.1:8000); default: start `minfer serve`")
    ap.add_argument("--model", default=str(DEFAULT_MODEL), help="model for the server this script starts")
    ap.add_argument("--minfer-bin", help="the minfer binary (default: $MINFER_BIN, build/release/tools/minfer, PATH)")
    ap.add_argument("--server-arg", action="append", default=[], help="extra `minfer serve` argument (repeatable)")
    ap.add_argument("--max-new-tokens", type=int, default=50)
    ap.add_argument("--temperature", type=float, default=None, help="sampling temperature (server default if unset)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per request and for the server to start")
    args = ap.parse_args(argv)

    if args.url:
        return run_client(args.url.rstrip("/"), args.prompts, args)
    with MinferServer(find_minfer(args.minfer_bin), args.model, args.server_arg, args.timeout) as server:
        return run_client(server.url, args.prompts, args)


if __name__ == "__main__":
    sys.exit(main())
