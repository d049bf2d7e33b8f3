"""The Python API's speculative decoding: vLLM's speculative_config dict, greedy outputs equal to a plain engine's
on the real stories260K model, acceptance per request (GenerationResult.spec_decode) and in stats(), and bad
configs refused naming the key."""

from __future__ import annotations

import pytest

from minfer import Engine
from pyapi_support import ENGINE_ARGS

PROMPT = "Lily had a red ball. Lily had a big red ball. Lily had a"


def test_speculative_config_keeps_greedy_outputs_and_reports_acceptance(stories_model):
    plain = Engine(stories_model, **ENGINE_ARGS)
    spec = Engine(stories_model, **ENGINE_ARGS, speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                                                    "prompt_lookup_min": 1})
    assert spec.config["speculative_config"] == {"method": "ngram", "model": None, "num_speculative_tokens": 3,
                                                 "prompt_lookup_min": 1, "prompt_lookup_max": 4,
                                                 "disable_by_batch_size": 0}
    assert plain.config["speculative_config"] is None
    a = plain.generate([PROMPT, "Once upon a time"], max_new_tokens=40, temperature=0, ignore_eos=True)
    b = spec.generate([PROMPT, "Once upon a time"], max_new_tokens=40, temperature=0, ignore_eos=True)
    assert [r.token_ids for r in b] == [r.token_ids for r in a]
    assert [r.text for r in b] == [r.text for r in a]
    assert a[0].spec_decode is None
    usage = b[0].spec_decode
    assert 0 < usage["accepted_tokens"] <= usage["draft_tokens"] and usage["num_drafts"] > 0
    stats = spec.stats()
    assert stats["spec_accepted_tokens"] == sum(r.spec_decode["accepted_tokens"] for r in b if r.spec_decode)
    assert len(stats["spec_accepted_per_pos"]) == 3


def test_bad_speculative_configs_are_refused(stories_model):
    with pytest.raises(TypeError, match="unknown key.*'k'"):
        Engine(stories_model, **ENGINE_ARGS, speculative_config={"method": "ngram", "k": 3})
    with pytest.raises(TypeError, match="needs 'method'.*or 'model'"):
        Engine(stories_model, **ENGINE_ARGS, speculative_config={"num_speculative_tokens": 3})
    with pytest.raises(ValueError, match=r"speculative_config\['method'\]"):
        Engine(stories_model, **ENGINE_ARGS, speculative_config={"method": "medusa"})
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        Engine(stories_model, **ENGINE_ARGS, speculative_config={"method": "ngram", "num_speculative_tokens": 0})
    with pytest.raises(TypeError, match="speculative_config must be a dict"):
        Engine(stories_model, **ENGINE_ARGS, speculative_config="ngram")


def test_draft_model_config(stories_model):
    plain = Engine(stories_model, **ENGINE_ARGS)
    spec = Engine(stories_model, **ENGINE_ARGS, speculative_config={"model": stories_model, "num_speculative_tokens": 3})
    assert spec.config["speculative_config"]["method"] == "draft_model"
    assert spec.config["speculative_config"]["model"] == str(stories_model)
    a = plain.generate("Once upon a time", max_new_tokens=30, temperature=0, ignore_eos=True)
    b = spec.generate("Once upon a time", max_new_tokens=30, temperature=0, ignore_eos=True)
    assert b.token_ids == a.token_ids
    assert b.spec_decode["accepted_tokens"] > 0
    with pytest.raises(TypeError, match=r"speculative_config\['model'\] must be a path"):
        Engine(stories_model, **ENGINE_ARGS, speculative_config={"model": 3})
