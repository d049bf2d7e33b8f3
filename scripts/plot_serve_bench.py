#!/usr/bin/python3
"""Plots `minfer bench serve --plot` results: throughput and latency against concurrency.

Usage: plot_serve_bench.py RESULTS.json OUT.png   (RESULTS.json as written by `minfer bench serve --json`)
Needs Debian's python3-matplotlib (scripts/install-deps.sh installs it).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    with open(argv[1]) as f:
        results = json.load(f)
    runs = sorted(results["runs"], key=lambda r: r["max_concurrency"])
    if not runs:
        sys.exit(f"{argv[1]}: no runs")
    conc = [r["max_concurrency"] for r in runs]

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.plot(conc, [r["output_throughput"] for r in runs], "o-", label="output tokens/s")
    left.plot(conc, [r["total_token_throughput"] for r in runs], "s--", label="total (input + output) tokens/s")
    left.set_xlabel("max concurrency")
    left.set_ylabel("tokens/s")
    left.set_title("Throughput")
    req = left.twinx()
    req.plot(conc, [r["request_throughput"] for r in runs], "^:", color="tab:green", label="requests/s")
    req.set_ylabel("requests/s")
    lines = left.get_legend_handles_labels()
    more = req.get_legend_handles_labels()
    left.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize="small")

    for key, style, label in (("mean_ttft_ms", "o-", "mean TTFT"), ("p99_ttft_ms", "o:", "P99 TTFT"),
                              ("mean_tpot_ms", "s-", "mean TPOT"), ("p99_itl_ms", "s:", "P99 ITL"),
                              ("mean_e2el_ms", "^-", "mean E2E latency")):
        right.plot(conc, [r[key] for r in runs], style, label=label)
    right.set_xlabel("max concurrency")
    right.set_ylabel("ms")
    right.set_yscale("log")
    right.set_title("Latency")
    right.legend(fontsize="small")

    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(conc)
        ax.set_xticklabels([str(c) for c in conc])
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"minfer bench serve: {results['model']}, {results['num_prompts']} requests, "
                 f"{results['input_len']} -> {results['output_len']} tokens")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)


if __name__ == "__main__":
    main(sys.argv)
