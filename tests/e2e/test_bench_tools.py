"""`minfer bench ops` and `minfer bench offline` run end to end on stories260K and print every section they
promise (the figures themselves are for docs/BENCHMARKS.md, never asserted: speed is not tested)."""

import re


def test_bench_ops_reports_dispatches_and_the_mixed_step(minfer, stories_dir):
    proc = minfer.run("bench", "ops", "-m", stories_dir / "stories260K.bin", "--batches", "1,4", "--context", 16,
                      "--prefill", 16, "--mix-decodes", 4, "--repeat", 1, "--profile")
    out = proc.stdout
    for step in ("prefill 16 tokens", "prefill 20 tokens", "prefill 16 + decode 4", "decode batch 1",
                 "decode batch 4"):
        assert f"| {step} |" in out, out
    # stories260K: 5 layers, 16 nodes per layer unfused and 5 fused.
    assert re.search(r"\| prefill 16 \+ decode 4 \| \d+ \| \d+ \| 16 \| 5 \|", out), out
    assert "prefill 16 + decode 4, ms per step by operator" in out, out


def test_bench_offline_prints_every_section(minfer, stories_dir):
    proc = minfer.run("bench", "offline", "-m", stories_dir / "stories260K.bin", "-t", 1, "-n", 6,
                      "--prompt-min", 4, "--prompt-max", 40, "--output-min", 2, "--output-max", 12,
                      "--max-model-len", 128, "--kv-cache-memory", "4MiB", "--max-num-seqs", 4,
                      "--sections", "batching,kv,decode,prefill", "--concurrency", "1,2", "--decode-steps", 2,
                      "--prefill-tokens", 32, "--peak-gflops", 100, "--log-steps")
    out = proc.stdout
    assert "continuous / static output tokens/s" in out, out
    assert re.search(r"workload arithmetic: [\d.]+ TFLOP; continuous \d+ GFLOP/s, static \d+ GFLOP/s", out), out
    assert "no schedule can exceed" in out, out
    assert "paged vs contiguous: utilisation" in out, out
    assert "### Aggregate decode throughput" in out and "### Prefill" in out, out
    # --log-steps: one line per step with its shape and both times.
    assert re.search(r"step \d+: \d+ tokens, \d+ decodes, \d+ prefill chunks, \d+ sampled, \d+ attention pairs, "
                     r"[\d.]+ ms model, [\d.]+ ms step", proc.stderr + proc.stdout)
