"""The scripts in examples/ run as documented: offline batch generation with the Python API, and the
MindIE-style /generate client against `minfer serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pyapi_support import REPO

EXAMPLES = REPO / "examples"


def run_example(script, *args, timeout=300):
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, env=dict(os.environ))
    assert proc.returncode == 0, f"{script} failed ({proc.returncode})\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_offline_batch(stories_model, tmp_path):
    out = tmp_path / "results.jsonl"
    proc = run_example("offline_batch.py", "--model", stories_model, "--max-new-tokens", 16, "--threads", 1,
                       "--output", out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 6 and all(r["token_ids"] and r["text"] for r in rows)
    assert rows[0]["prompt"] == "Once upon a time"
    assert "6 prompts" in proc.stdout


def test_fastapi_style_client_against_minfer_serve(engine, stories_model, minfer_bin):
    help_proc = subprocess.run([str(minfer_bin), "serve", "--help"], capture_output=True, text=True, timeout=60)
    if help_proc.returncode != 0:
        pytest.skip(f"{minfer_bin} has no `serve` command")
    proc = run_example("fastapi_style_client.py", "--model", stories_model, "--minfer-bin", minfer_bin,
                       "--server-arg=--threads=1", "--server-arg=--kv-cache-memory=16MiB", "--max-new-tokens", 12,
                       "--temperature", 0, "Once upon a time", "The little dog")
    replies = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [r["text"] for r in replies] == ["Once upon a time", "The little dog"]
    # Greedy, so the server's engine and the Python API's give the same text.
    for r in replies:
        assert r["output"] == engine.generate(r["text"], max_new_tokens=12, temperature=0).text, r
