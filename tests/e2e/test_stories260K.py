"""minfer on a real trained model: llama2.c's stories260K, as the llama2.c .bin and as the GGUF conversion.

Greedy from BOS for 200 tokens must give exactly the ids llama2.c's run.c produced (greedy_t0_n200.ids: 200 ids,
BOS not included; computed by llama2.c, not by minfer), and the printed text must start like llama2.c's
(expected_greedy_n200.txt).
"""

from __future__ import annotations

import pytest

from conftest import describe, read_ids


@pytest.mark.parametrize("model_file", ["stories260K.bin", "stories260K.gguf"])
def test_greedy_matches_llama2c(minfer, stories_dir, model_file, tmp_path):
    expected = read_ids(stories_dir / "greedy_t0_n200.ids")
    assert len(expected) == 200
    ids_file = tmp_path / "generated.ids"
    proc = minfer.run("generate", "--model", stories_dir / model_file, "--prompt-ids", "1", "--max-new-tokens", 200,
                      "--temperature", 0, "--ids-out", ids_file)
    assert ids_file.exists(), f"--ids-out wrote nothing\n{describe(proc)}"
    got = read_ids(ids_file)
    first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), None)
    assert got == expected, (f"{model_file}: {len(got)} ids, first difference at step {first}\n"
                             f"got      {got}\nexpected {expected}")

    text = (stories_dir / "expected_greedy_n200.txt").read_text()
    start = "\n".join(text.splitlines()[:2])  # two full lines: apostrophes, quotes and a newline included
    assert start in proc.stdout, f"printed text does not start like llama2.c's:\n{start!r}\n{describe(proc)}"
