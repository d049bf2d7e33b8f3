"""Starts `minfer serve --port 0` for a test and stops it: with serve(binary, *args) as url: ...; started(cmd) for a
command that wraps the server (mpirun, ip netns exec)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def started(cmd, *, env=None, startup_timeout_s: float = 180,
            new_session: bool = False) -> Iterator[tuple[subprocess.Popen, str]]:
    """Starts a server command (minfer serve, or one that wraps it: mpirun, ip netns exec) and yields the process and
    the URL of its 'listening on' line. On exit: SIGTERM (to its whole session with new_session, which also reaches
    the ranks mpirun started), SIGKILL after 60 s."""
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                            text=True, env=env, start_new_session=new_session)
    found: list[str] = []
    ready = threading.Event()

    def read_stdout():  # keeps draining stdout after the line so the server never blocks on a full pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.search(r"listening on (https?://\S+)", line)
            if m and not found:
                found.append(m.group(1))
                ready.set()
        ready.set()

    def signal_all(sig: int) -> None:
        if new_session:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not ready.wait(0.2) and time.monotonic() < deadline:
            pass
        if not found:
            log.seek(0)
            raise RuntimeError(f"{cmd[0]} did not print 'listening on' (exit code {proc.poll()})\n{log.read()[-4000:]}")
        yield proc, found[0]
    finally:
        if proc.poll() is None:
            signal_all(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                signal_all(signal.SIGKILL)
                proc.wait()
        log.close()


@contextlib.contextmanager
def serve(binary: Path, *args, startup_timeout_s: float = 180) -> Iterator[str]:
    """Yields the server's base URL, read from its 'listening on http://HOST:PORT' line."""
    cmd = [Path(binary).resolve(), "serve", "--host", "127.0.0.1", "--port", "0", *args]
    with started(cmd, startup_timeout_s=startup_timeout_s) as (_, url):
        yield url


def post_json(url: str, path: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    """POSTs body as JSON to url + path: the status and the JSON reply (an error's body too)."""
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
