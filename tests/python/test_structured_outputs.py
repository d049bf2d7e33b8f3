"""Structured outputs, logit_bias and min_tokens through the Python API (vLLM's spelling: SamplingParams with
structured_outputs=StructuredOutputsParams(...)), on the real stories260K model at temperature 1, and Engine.embed
(task="embed")."""

from __future__ import annotations

import json
import re

import pytest

import minfer
from minfer import SamplingParams, StructuredOutputsParams


def test_json_schema_regex_and_choice_hold_under_sampling(engine):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                               "n": {"type": "integer", "minimum": 1, "maximum": 9}},
              "required": ["name", "n"], "additionalProperties": False}
    for seed in range(3):
        r = engine.generate("Once upon a time", SamplingParams(
            max_new_tokens=200, temperature=1.0, seed=seed, structured_outputs=StructuredOutputsParams(json=schema)))
        value = json.loads(r.text)
        assert set(value) == {"name", "n"} and 1 <= value["n"] <= 9 and r.finish_reason == "stop"
        regex = engine.generate("Once", SamplingParams(max_new_tokens=50, temperature=1.0, seed=seed,
                                                      structured_outputs=StructuredOutputsParams(regex=r"[a-z]{3,6}!")))
        assert re.fullmatch(r"[a-z]{3,6}!", regex.text), regex.text
        pick = engine.generate("Once", SamplingParams(max_new_tokens=20, temperature=1.0, seed=seed,
                                                     structured_outputs=StructuredOutputsParams(choice=["cat", "dog"])))
        assert pick.text in ("cat", "dog")


def test_invalid_specs_raise_with_llguidances_message(engine):
    with pytest.raises(minfer.MinferError, match="structured outputs"):
        engine.generate("Once", SamplingParams(structured_outputs=StructuredOutputsParams(regex="[a-")))
    with pytest.raises(ValueError, match="exactly one"):
        StructuredOutputsParams(regex="a", choice=["b"])


def test_logit_bias_and_min_tokens(engine):
    forced = engine.generate("Once", SamplingParams(max_new_tokens=5, temperature=1.0, logit_bias={300: 100.0}))
    assert forced.token_ids == [300] * 5
    eos_first = SamplingParams(max_new_tokens=20, temperature=0, logit_bias={2: 100.0})
    assert len(engine.generate("Once", eos_first).token_ids) == 1
    assert len(engine.generate("Once", eos_first.replace(min_tokens=4)).token_ids) == 5


def test_embed_engine(stories_model):
    with minfer.Engine(model_path=stories_model, task="embed", pooling="mean", num_threads=1,
                       kv_cache_memory="8MiB") as e:
        one = e.embed("Once upon a time")
        batch = e.embed(["Once upon a time", "The dog ran"])
        assert len(one) == 64 and abs(sum(v * v for v in one) - 1.0) < 1e-4
        assert max(abs(a - b) for a, b in zip(one, batch[0])) < 1e-5
    with minfer.Engine(model_path=stories_model, num_threads=1, kv_cache_memory="8MiB") as g:
        with pytest.raises(minfer.MinferError, match="task='embed'"):
            g.embed("x")
