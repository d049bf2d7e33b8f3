"""`minfer bench serve` against a real `minfer serve` (built-in demo model): the report and the JSON carry
vLLM's serving metrics and count every token. Only the fields and counts are checked, never the speed."""

from __future__ import annotations

import json
import math

from serve_process import serve
from conftest import MINFER_BIN, describe

REPORT_LINES = [
    "Successful requests:", "Benchmark duration (s):", "Total input tokens:", "Total generated tokens:",
    "Request throughput (req/s):", "Output token throughput (tok/s):", "Total Token throughput (tok/s):",
    "Mean TTFT (ms):", "Median TTFT (ms):", "P99 TTFT (ms):", "Mean TPOT (ms):", "Median TPOT (ms):",
    "P99 TPOT (ms):", "Mean ITL (ms):", "Median ITL (ms):", "P99 ITL (ms):", "Mean E2EL (ms):",
    "Median E2EL (ms):", "P99 E2EL (ms):",
]
METRICS = ["request_throughput", "output_throughput", "total_token_throughput"] + [
    f"{stat}_{name}_ms" for name in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "std", "p99")]

NUM, INPUT, OUTPUT = 6, 16, 8


def check_run(run: dict, concurrency: int):
    assert run["max_concurrency"] == concurrency
    assert run["completed"] == NUM and run["failed"] == 0
    assert run["total_input_tokens"] == NUM * INPUT
    assert run["total_output_tokens"] == NUM * OUTPUT
    for key in METRICS:
        assert math.isfinite(run[key]) and run[key] >= 0, (key, run[key])
    assert run["request_throughput"] > 0
    assert len(run["requests"]) == NUM
    for r in run["requests"]:
        assert r["success"], r
        assert r["output_tokens"] == OUTPUT and r["prompt_len"] == INPUT
        assert 0 < r["ttft_s"] <= r["latency_s"]
        # One ITL per streamed chunk after the first (a final chunk carrying only finish_reason counts, as in vLLM).
        assert 1 <= len(r["itl_s"]) <= OUTPUT


def test_bench_serve_reports_vllm_metrics(minfer, tmp_path):
    out = tmp_path / "bench.json"
    with serve(MINFER_BIN, "--max-model-len", 256) as url:
        proc = minfer.run("bench", "serve", "--url", url, "--num-prompts", NUM, "--request-rate", 50,
                          "--concurrency", 3, "--input-len", INPUT, "--output-len", OUTPUT, "--vocab-size", 200,
                          "--json", out, timeout=300)
    for label in REPORT_LINES:
        assert label in proc.stdout, f"missing '{label}'\n{describe(proc)}"
    assert "Maximum request concurrency:" in proc.stdout
    result = json.loads(out.read_text())
    assert result["input_len"] == INPUT and result["output_len"] == OUTPUT and result["ignore_eos"] is True
    assert len(result["runs"]) == 1
    check_run(result["runs"][0], 3)


def test_bench_serve_plot_sweeps_concurrency(minfer, tmp_path):
    png = tmp_path / "sweep.png"
    with serve(MINFER_BIN, "--max-model-len", 256) as url:
        proc = minfer.run("bench", "serve", "--url", url, "--num-prompts", NUM, "--input-len", INPUT,
                          "--output-len", OUTPUT, "--vocab-size", 200, "--plot", png, "--sweep", "1,4",
                          "--prompt-kind", "ids", timeout=300)
    assert proc.stdout.count("Serving Benchmark Result") == 2, describe(proc)
    result = json.loads(png.with_suffix(".json").read_text())
    assert [r["max_concurrency"] for r in result["runs"]] == [1, 4]
    for run, c in zip(result["runs"], (1, 4)):
        check_run(run, c)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_serve_bad_arguments_are_clear_errors(minfer):
    proc = minfer.run("bench", "serve", "--url", "https://example.com", check=False)
    assert proc.returncode != 0 and "https is not supported" in proc.stdout + proc.stderr, describe(proc)
    proc = minfer.run("bench", "serve", "--url", "http://127.0.0.1:1", "--request-rate", "fast", check=False)
    assert proc.returncode != 0 and "--request-rate fast" in proc.stdout + proc.stderr, describe(proc)
    # Nothing listens on port 1: the error names the URL.
    proc = minfer.run("bench", "serve", "--url", "http://127.0.0.1:1", check=False, timeout=120)
    assert proc.returncode != 0 and "http://127.0.0.1:1/v1/models" in proc.stdout + proc.stderr, describe(proc)
