"""The Python API gives the same greedy tokens as the C++ API and `minfer generate --temperature 0` on the real
stories260K model: from BOS, exactly llama2.c's 200 ids (greedy_t0_n200.ids, computed by llama2.c), with and
without operator fusion, from the llama2.c .bin and the GGUF conversion."""

from __future__ import annotations

import subprocess

import pytest

from minfer import Engine
from pyapi_support import ENGINE_ARGS, read_ids


@pytest.mark.parametrize("model_file", ["stories260K.bin", "stories260K.gguf"])
@pytest.mark.parametrize("fusion", ["auto", "none"])
def test_greedy_from_bos_matches_llama2c(stories_dir, model_file, fusion):
    expected = read_ids(stories_dir / "greedy_t0_n200.ids")
    assert len(expected) == 200
    with Engine(model_path=stories_dir / model_file, fusion_strategy=fusion, **ENGINE_ARGS) as engine:
        r = engine.generate([1], max_new_tokens=200, temperature=0)
    first = next((i for i, (a, b) in enumerate(zip(r.token_ids, expected)) if a != b), None)
    assert r.token_ids == expected, f"first difference at step {first}"
    start = "\n".join((stories_dir / "expected_greedy_n200.txt").read_text().splitlines()[:2])
    assert r.text.startswith(start)


def test_text_prompt_matches_the_cli(engine, stories_model, minfer_bin, tmp_path):
    prompt = "Tom had a red ball"
    ids_file = tmp_path / "cli.ids"
    proc = subprocess.run([str(minfer_bin), "generate", "--model", stories_model, "--prompt", prompt,
                           "--max-new-tokens", "64", "--temperature", "0", "--threads", "1", "--ids-out", str(ids_file)],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    cli_ids = read_ids(ids_file)
    r = engine.generate(prompt, max_new_tokens=64, temperature=0)
    assert r.token_ids == cli_ids
    assert prompt + r.text + "\n" in proc.stdout  # the CLI echoes the prompt, then streams the text
