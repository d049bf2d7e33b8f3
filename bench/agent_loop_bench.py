#!/usr/bin/env python3
"""An agent loop through Anthropic's Messages API (docs/BENCHMARKS.md, "An agent loop over /v1/messages"): a
conversation of TURNS tool-using turns, each re-sending a long system prompt (about SYSTEM_TOKENS tokens) and the same
tools, as coding agents do. Per turn: time to first token (the first content_block_delta of the streamed reply), the
whole turn, and the usage the server reports (input_tokens, cache_read_input_tokens). Turns after the first should
find the system prompt, the tools and the earlier turns in the prefix cache.

Each turn the client sends the history plus one new user message; the model's reply (MAX_TOKENS tokens, greedy) is
kept as text, and every turn after the first also carries a tool_use block of the previous reply with its
tool_result, so the conversation has the shape of a tool-using session whatever the model writes.

  bench/agent_loop_bench.py MODEL [TURNS=10] [SYSTEM_TOKENS=4096] [MAX_TOKENS=16] [THREADS=2] [FLAGS...]
(run with the project venv's python from the repository root, after building the release preset; FLAGS go to
`minfer serve`)
"""
import json
import os
import sys
import time

import anthropic

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "e2e"))
from serve_process import serve  # noqa: E402

TOOLS = [
    {"name": "read_file", "description": "Read a file of the repository and return its text.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "run_tests", "description": "Run the test suite (or the tests matching a pattern); return the report.",
     "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}}},
    {"name": "edit_file", "description": "Replace one exact string of a file by another.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"},
                                                       "new": {"type": "string"}},
                      "required": ["path", "old", "new"]}},
]

RULES = ("Read the files you change before changing them. Keep every function short and name what it holds. "
         "Run the tests after each change and report what failed, with the command that shows it. ")


def system_prompt(client, tokens: int) -> str:
    """Instructions grown to about `tokens` tokens as the server counts them."""
    text = "You are a coding agent working in a C++ repository. "
    step = 0
    while True:
        n = client.messages.count_tokens(model="m", system=text, messages=[{"role": "user", "content": "x"}])
        if n.input_tokens >= tokens:
            return text
        step += 1
        text += f"Rule {step}: " + RULES


def turn(client, system: str, history: list, max_tokens: int) -> dict:
    start = time.perf_counter()
    first = None
    with client.messages.stream(model="m", system=system, tools=TOOLS, messages=history, max_tokens=max_tokens,
                                extra_body={"temperature": 0}) as stream:
        for event in stream:
            if first is None and event.type == "content_block_delta":
                first = time.perf_counter() - start
        reply = stream.get_final_message()
    return {"ttft": first if first is not None else time.perf_counter() - start,
            "total": time.perf_counter() - start, "input": reply.usage.input_tokens,
            "cached": reply.usage.cache_read_input_tokens or 0,
            "text": "".join(b.text for b in reply.content if b.type == "text")}


def main():
    model = sys.argv[1]
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    system_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    max_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    threads = sys.argv[5] if len(sys.argv) > 5 else "2"
    binary = os.path.join(here, "..", "build", "release", "tools", "minfer")
    with serve(binary, "--model", model, "--served-model-name", "m", "-t", threads, "--max-model-len", "8192",
               *sys.argv[6:]) as url:
        client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=1800)
        system = system_prompt(client, system_tokens)
        history = [{"role": "user", "content": "The build fails in src/kv/page_manager.cpp. Find out why."}]
        rows = []
        for i in range(turns):
            r = turn(client, system, history, max_tokens)
            rows.append(r)
            print(json.dumps({"turn": i + 1, **{k: v for k, v in r.items() if k != "text"}}), file=sys.stderr)
            call_id = f"toolu_{i:04d}"
            history += [{"role": "assistant", "content": [
                            {"type": "text", "text": r["text"] or "Let me look."},
                            {"type": "tool_use", "id": call_id, "name": "read_file",
                             "input": {"path": f"src/kv/file_{i}.cpp"}}]},
                        {"role": "user", "content": [
                            {"type": "tool_result", "tool_use_id": call_id,
                             "content": f"// file_{i}.cpp\nint page_{i}(int x) {{ return x * {i + 2}; }}\n"}]}]
    first = rows[0]["ttft"]
    print(f"model {model}, {turns} turns, system prompt + tools {rows[0]['input'] + rows[0]['cached']} tokens, "
          f"{max_tokens} output tokens a turn\n")
    print("| turn | prompt tokens | cache_read_input_tokens | time to first token (s) | TTFT / first turn's | turn (s) |")
    print("|---|---|---|---|---|---|")
    for i, r in enumerate(rows):
        print(f"| {i + 1} | {r['input'] + r['cached']} | {r['cached']} | {r['ttft']:.3f} | {r['ttft'] / first:.1%} | "
              f"{r['total']:.2f} |")


if __name__ == "__main__":
    main()
