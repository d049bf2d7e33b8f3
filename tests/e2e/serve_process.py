"""Starts `minfer serve --port 0` for a test and stops it: with serve(binary, *args) as url: ..."""

from __future__ import annotations

import contextlib
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def serve(binary: Path, *args, startup_timeout_s: float = 180) -> Iterator[str]:
    """Yields the server's base URL, read from its 'listening on http://HOST:PORT' line."""
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([str(Path(binary).resolve()), "serve", "--host", "127.0.0.1", "--port", "0", *[str(a) for a in args]],
                            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
    found: list[str] = []
    ready = threading.Event()

    def read_stdout():  # keeps draining stdout after the line so the server never blocks on a full pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.search(r"listening on (http://\S+)", line)
            if m and not found:
                found.append(m.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not ready.wait(0.2) and time.monotonic() < deadline:
            pass
        if not found:
            log.seek(0)
            raise RuntimeError(f"minfer serve did not print 'listening on' (exit code {proc.poll()})\n{log.read()[-4000:]}")
        yield found[0]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
