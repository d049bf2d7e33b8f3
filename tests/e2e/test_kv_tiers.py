"""The KV cache tiers of `minfer serve` end to end, with SmolLM2-135M and real HTTP: the disk tier (--kv-cache-dir)
flushed on SIGTERM and read back after a restart, entries that survive kill -9 and hand-made torn / corrupt / orphan
files (skipped, removed, counted, the output unchanged), another KV type's identity folder kept apart, the RAM tier
(--kv-offload-ram) serving pages evicted from a small pool, and a too-small --kv-cache-dir-size refused."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

from conftest import MINFER_BIN
from serve_process import post_json

PAGE = 16
HEADER_BYTES = 72  # magic, version, token count, payload size, identity, key, two checksums (src/kv/disk_tier.cpp)
BASE_ARGS = ["--served-model-name", "m", "-t", "2", "--page-size", str(PAGE)]


def lines(topic: str, n: int) -> str:
    """A prompt of about 15 tokens a line, every 16-token page of it unlike every other (topic and line number)."""
    return " ".join(f"{topic} line {i}: the quick brown fox jumps over the lazy dog." for i in range(n))


class Server:
    def __init__(self, proc: subprocess.Popen, url: str, log):
        self.proc, self.url, self.log = proc, url, log

    def complete(self, prompt: str) -> dict:
        body = {"model": "m", "prompt": prompt, "max_tokens": 8, "temperature": 0, "return_token_ids": True}
        status, reply = post_json(self.url, "/v1/completions", body)
        assert status == 200, f"{reply}\n{self.stderr()}"
        return reply

    def metric(self, name: str, tier: str) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=60) as r:
            text = r.read().decode()
        m = re.search(rf'^{re.escape(name)}\{{model_name="m",tier="{tier}"\}} (\S+)$', text, re.M)
        assert m, f'{name}{{tier="{tier}"}} not in /metrics'
        return float(m.group(1))

    def stop(self) -> None:
        """SIGTERM: the queued disk writes are flushed, then the server exits with 0."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(60) == 0, self.stderr()

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:]


@contextlib.contextmanager
def server(model: Path, *args, max_model_len: int = 2048, kv_memory: str = "64MiB") -> Iterator[Server]:
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([str(MINFER_BIN), "serve", "--host", "127.0.0.1", "--port", "0", "--model", str(model),
                             *BASE_ARGS, "--max-model-len", str(max_model_len), "--kv-cache-memory", kv_memory,
                             *[str(a) for a in args]],
                            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        proc.kill()
        proc.wait()
        log.seek(0)
        pytest.fail(f"the server did not start: {line}\n{log.read()[-3000:]}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    try:
        yield Server(proc, m.group(1), log)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def identity_folders(cache: Path) -> List[Path]:
    return sorted(p for p in cache.iterdir() if p.is_dir())


def page_files(folder: Path) -> Dict[tuple, Path]:
    """The folder's .kv files by the 16 token ids their header holds."""
    pages: Dict[tuple, Path] = {}
    for f in folder.glob("*.kv"):
        data = f.read_bytes()[HEADER_BYTES:HEADER_BYTES + 4 * PAGE]
        tokens = tuple(int.from_bytes(data[i:i + 4], "little", signed=True) for i in range(0, len(data), 4))
        assert tokens not in pages, f"two pages hold the same tokens: {f.name}, {pages[tokens].name}"
        pages[tokens] = f
    return pages


def page_file(folder: Path, ids: List[int], j: int) -> Optional[Path]:
    return page_files(folder).get(tuple(ids[j * PAGE:(j + 1) * PAGE]))


def cached(reply: dict) -> int:
    return reply["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_restart_serves_prefix_from_disk(smollm2_gguf, tmp_path):
    cache, prompt = tmp_path / "kv", lines("Alpha", 30)
    with server(smollm2_gguf, "--kv-cache-dir", cache) as s:
        first = s.complete(prompt)
        s.stop()  # right after the reply: the pages still queued are written before exit
    n = first["usage"]["prompt_tokens"]
    assert n > 300 and cached(first) == 0
    (folder,) = identity_folders(cache)
    assert re.fullmatch(r"[0-9a-f]{32}", folder.name)
    assert all(re.fullmatch(r"[0-9a-f]{32}\.kv", f.name) for f in folder.iterdir()), list(folder.iterdir())
    ids = first["choices"][0]["prompt_token_ids"]
    assert all(page_file(folder, ids, j) for j in range(n // PAGE)), "a full prompt page is missing on disk"
    with server(smollm2_gguf, "--kv-cache-dir", cache) as s:
        again = s.complete(prompt)
        assert again["choices"][0]["text"] == first["choices"][0]["text"]
        assert cached(again) >= (n // PAGE - 1) * PAGE, again["usage"]
        assert s.metric("minfer:prefix_cache_hits_total", "disk") >= cached(again)
        assert s.metric("minfer:kv_tier_read_bytes_total", "disk") > 0
        assert s.metric("minfer:kv_tier_corrupt_entries_total", "disk") == 0


def test_kill9_during_writes_leaves_no_bad_entry(smollm2_gguf, tmp_path):
    cache = tmp_path / "kv"
    prompts = [lines(topic, 24) for topic in ("Bravo", "Charlie", "Delta")]
    firsts = []
    with server(smollm2_gguf, "--kv-cache-dir", cache) as s:
        for prompt in prompts[:2]:  # their first pages on disk before the next request
            firsts.append(s.complete(prompt))
            ids, deadline = firsts[-1]["choices"][0]["prompt_token_ids"], time.monotonic() + 30
            while not all(page_file(identity_folders(cache)[0], ids, j) for j in range(3)):
                assert time.monotonic() < deadline, "the first pages were not written within 30 s"
                time.sleep(0.05)
        firsts.append(s.complete(prompts[2]))
        s.proc.kill()  # SIGKILL while the last prompt's pages are being written
        s.proc.wait()
    (folder,) = identity_folders(cache)
    # By hand: the third page of the first prompt torn (half its bytes), of the second bit-flipped in its KV.
    torn = page_file(folder, firsts[0]["choices"][0]["prompt_token_ids"], 2)
    flipped = page_file(folder, firsts[1]["choices"][0]["prompt_token_ids"], 2)
    assert torn and flipped, sorted(p.name for p in folder.iterdir())
    whole = torn.stat().st_size
    torn.write_bytes(torn.read_bytes()[:whole // 2])
    data = bytearray(flipped.read_bytes())
    data[-100:] = bytes(b ^ 0xFF for b in data[-100:])
    flipped.write_bytes(bytes(data))
    bad = {torn: torn.read_bytes(), flipped: bytes(data)}
    orphan = folder / f".{'0' * 32}.999999.0.tmp"  # a temporary file of a writer that is gone
    orphan.write_bytes(b"\0" * 1000)

    with server(smollm2_gguf, "--kv-cache-dir", cache) as s:
        assert not list(folder.glob(".*.tmp")), "temporary files of dead writers are removed at start"
        for i, (prompt, first) in enumerate(zip(prompts, firsts)):
            reply = s.complete(prompt)
            assert reply["choices"][0]["text"] == first["choices"][0]["text"], prompt[:20]
            if i < 2:  # the two pages before the bad one still come from disk, nothing past it
                assert cached(reply) == 2 * PAGE, reply["usage"]
        assert s.metric("minfer:kv_tier_corrupt_entries_total", "disk") == 2
        assert s.stderr().count("is torn or corrupt") == 2, s.stderr()
        s.stop()
    for path, content in bad.items():  # removed, then written again whole from the recomputed KV
        assert not path.exists() or (path.stat().st_size == whole and path.read_bytes() != content), path


def test_other_model_gets_no_hits(smollm2_gguf, tmp_path):
    cache, prompt = tmp_path / "kv", lines("Echo", 24)
    with server(smollm2_gguf, "--kv-cache-dir", cache) as s:
        s.complete(prompt)
        s.stop()
    (ours,) = identity_folders(cache)
    before = {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in ours.iterdir()}
    assert len(before) >= 3
    # Another KV type is another identity (f32 pages are twice as large: a larger pool for max_model_len).
    with server(smollm2_gguf, "--kv-cache-dir", cache, "--kv-cache-dtype", "f32", kv_memory="160MiB") as s:
        reply = s.complete(prompt)
        assert cached(reply) == 0, reply["usage"]
        assert s.metric("minfer:prefix_cache_hits_total", "disk") == 0
        s.stop()
    folders = identity_folders(cache)
    assert len(folders) == 2 and ours in folders, folders
    (theirs,) = [f for f in folders if f != ours]
    assert len(list(theirs.glob("*.kv"))) >= reply["usage"]["prompt_tokens"] // PAGE
    assert {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in ours.iterdir()} == before


def test_ram_tier_hits(smollm2_gguf):
    # 16 MiB of bf16 pages hold 44 pages: three other prompts of ~19 pages push the first one's out of the pool.
    prompts = [lines(topic, 20) for topic in ("Foxtrot", "Golf", "Hotel", "India")]
    with server(smollm2_gguf, "--kv-offload-ram", "64MiB", max_model_len=512, kv_memory="16MiB") as s:
        first = s.complete(prompts[0])
        for prompt in prompts[1:]:
            s.complete(prompt)
        assert s.metric("minfer:kv_tier_written_bytes_total", "ram") > 0
        assert s.metric("minfer:kv_tier_entries", "ram") > 0
        again = s.complete(prompts[0])
        assert again["choices"][0]["text"] == first["choices"][0]["text"]
        assert cached(again) >= PAGE, again["usage"]
        assert s.metric("minfer:prefix_cache_hits_total", "ram") > 0
        assert s.metric("minfer:kv_tier_read_bytes_total", "ram") > 0


def test_kv_cache_dir_size_below_one_mib_is_refused(minfer, smollm2_gguf, tmp_path):
    proc = minfer.run("serve", "--host", "127.0.0.1", "--port", "0", "--model", smollm2_gguf, *BASE_ARGS,
                      "--kv-cache-dir", tmp_path / "kv", "--kv-cache-dir-size", "10", check=False, timeout=120)
    assert proc.returncode != 0
    assert "kv_cache_dir_size" in proc.stdout + proc.stderr, proc.stderr
