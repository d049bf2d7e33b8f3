"""Anthropic's Messages API with the official `anthropic` Python SDK against a real `minfer serve` of SmolLM2-135M-Instruct
(the PyPI GGUF): plain and streamed messages (the SDK's stream helper assembles the message the plain call returns at
temperature 0), count_tokens equal to usage.input_tokens, a forced tool call whose input validates against its
schema, the tool_result round trip, stop sequences, thinking blocks, x-api-key, the model's own sampling defaults,
and bad input answered 400 in Anthropic's error shape (raised as the SDK's typed exceptions).

Where a test needs a particular output (a tool call in the model's format, a <think> block) it constrains the output
with vLLM's structured_outputs regex, which exercises the same parsing as a model that writes them by itself."""

from __future__ import annotations

import json

import anthropic
import jsonschema
import pytest

from chat_fixtures import CHAT_TEMPLATES, WEATHER_SCHEMA
from serve_process import post_json as post, serve

WEATHER = {"name": "get_weather", "description": "Current weather in a city", "input_schema": WEATHER_SCHEMA}


@pytest.fixture(scope="module")
def client(smollm2_url):
    return anthropic.Anthropic(base_url=smollm2_url, api_key="unused", max_retries=0, timeout=300)


# The current SDK takes no temperature (it samples with the model's defaults); clients may still send one.
GREEDY = {"temperature": 0}


def ask(text: str) -> list:
    return [{"role": "user", "content": text}]




def test_plain_and_streamed_messages_agree(client):
    kwargs = dict(model="m", max_tokens=24, messages=ask("Name three colors."), extra_body=GREEDY)
    whole = client.messages.create(**kwargs)
    assert whole.type == "message" and whole.role == "assistant" and whole.id.startswith("msg_")
    assert [b.type for b in whole.content] == ["text"] and whole.content[0].text
    assert whole.stop_reason in ("end_turn", "max_tokens")
    assert whole.usage.output_tokens > 0
    count = client.messages.count_tokens(model="m", messages=ask("Name three colors."))
    assert count.input_tokens == whole.usage.input_tokens + (whole.usage.cache_read_input_tokens or 0)
    with client.messages.stream(**kwargs) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_message()
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in whole.content]
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens
    assert events[0] == "message_start" and events[-1] == "message_stop", events
    assert "content_block_start" in events and "content_block_stop" in events and "message_delta" in events


def test_prefix_cache_hits_are_reported_as_cache_reads(client):
    system = "You are a careful assistant. " * 40  # several pages of the same prefix
    first = client.messages.create(model="m", max_tokens=4, system=system, messages=ask("Hi"), extra_body=GREEDY)
    second = client.messages.create(model="m", max_tokens=4, system=system, messages=ask("Hello"), extra_body=GREEDY)
    assert (first.usage.cache_read_input_tokens or 0) < (second.usage.cache_read_input_tokens or 0)
    count = client.messages.count_tokens(model="m", system=system, messages=ask("Hello"))
    assert second.usage.input_tokens + second.usage.cache_read_input_tokens == count.input_tokens


def test_forced_tool_call_and_the_tool_result_round_trip(client):
    # Sampled input can spend many tokens (a 20-character string of \u escapes): room enough for it.
    reply = client.messages.create(model="m", max_tokens=300, messages=ask("Weather in Paris?"), tools=[WEATHER],
                                   tool_choice={"type": "tool", "name": "get_weather"},
                                   extra_body={"temperature": 1.0})
    assert reply.stop_reason == "tool_use", reply
    call = next(b for b in reply.content if b.type == "tool_use")
    assert call.name == "get_weather" and call.id
    jsonschema.validate(call.input, WEATHER["input_schema"])
    # Streamed: the input arrives as input_json_delta fragments the SDK assembles into the same block shape.
    with client.messages.stream(model="m", max_tokens=60, messages=ask("Weather in Paris?"), tools=[WEATHER],
                                tool_choice={"type": "tool", "name": "get_weather"}, extra_body=GREEDY) as stream:
        pieces = sum(1 for e in stream if e.type == "content_block_delta" and e.delta.type == "input_json_delta")
        streamed = stream.get_final_message()
    assert pieces > 2  # the input streamed as it was generated
    assert streamed.stop_reason == "tool_use"
    jsonschema.validate(next(b for b in streamed.content if b.type == "tool_use").input, WEATHER["input_schema"])
    history = ask("Weather in Paris?") + [
        {"role": "assistant", "content": [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "21 C and sunny"}]}]
    final = client.messages.create(model="m", max_tokens=16, messages=history, tools=[WEATHER], extra_body=GREEDY)
    assert final.content[0].type == "text" and final.stop_reason in ("end_turn", "max_tokens")
    # The result reached the prompt: it costs tokens.
    without = client.messages.count_tokens(model="m", messages=history[:2] + [ask("ok")[0]], tools=[WEATHER])
    assert client.messages.count_tokens(model="m", messages=history, tools=[WEATHER]).input_tokens > without.input_tokens


def test_stop_sequences_and_max_tokens(client):
    text = client.messages.create(model="m", max_tokens=40, messages=ask("Count: one, two, three"), extra_body=GREEDY)
    words = text.content[0].text.split()
    assert len(words) >= 2
    stop = words[1]
    stopped = client.messages.create(model="m", max_tokens=40, messages=ask("Count: one, two, three"), extra_body=GREEDY,
                                     stop_sequences=[stop])
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == stop
    short = client.messages.create(model="m", max_tokens=1, messages=ask("Count: one, two, three"), extra_body=GREEDY)
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 1


def test_thinking_blocks_whole_and_streamed(minfer, smollm2_gguf):
    regex = r"<think>\nLet me think\.\n</think>\n\nHello!"
    with serve(minfer.binary, "--model", smollm2_gguf, "--served-model-name", "m", "--chat-template",
               CHAT_TEMPLATES / "qwen3.jinja") as base:
        c = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=300)
        kwargs = dict(model="m", max_tokens=100, messages=ask("Hi"), extra_body={"structured_outputs": {"regex": regex}},
                      thinking={"type": "enabled", "budget_tokens": 1024})
        whole = c.messages.create(**kwargs)
        assert [b.type for b in whole.content] == ["thinking", "text"]
        assert whole.content[0].thinking.strip() == "Let me think." and whole.content[1].text == "Hello!"
        with c.messages.stream(**kwargs) as stream:
            streamed = stream.get_final_message()
        assert [b.type for b in streamed.content] == ["thinking", "text"]
        assert streamed.content[0].thinking.strip() == "Let me think." and streamed.content[1].text == "Hello!"
        # Earlier turns' thinking blocks are accepted (and given to the template as reasoning_content).
        history = ask("Hi") + [{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": ""}, {"type": "text", "text": "Hello!"}]}] + ask("Bye")
        assert c.messages.count_tokens(model="m", messages=history).input_tokens > 0


def test_api_keys_by_x_api_key_or_bearer(minfer, smollm2_gguf):
    with serve(minfer.binary, "--model", smollm2_gguf, "--served-model-name", "m", "--api-key", "k1") as base:
        good = anthropic.Anthropic(base_url=base, api_key="k1", max_retries=0, timeout=300)  # sends x-api-key
        assert good.messages.create(model="m", max_tokens=2, messages=ask("Hi")).content
        bearer = anthropic.Anthropic(base_url=base, auth_token="k1", max_retries=0, timeout=300)
        assert bearer.messages.count_tokens(model="m", messages=ask("Hi")).input_tokens > 0
        with pytest.raises(anthropic.AuthenticationError) as e:
            anthropic.Anthropic(base_url=base, api_key="wrong", max_retries=0).messages.create(
                model="m", max_tokens=2, messages=ask("Hi"))
        assert e.value.body["error"]["type"] == "authentication_error"


BAD = [
    ({"messages": [{"role": "user", "content": "Hi"}]}, "max_tokens"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}]}]}, "tool_use_id"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "video", "text": "x"}]}]}, "type"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]}, "image"),
    ({"max_tokens": 4, "messages": [{"role": "system", "content": "Hi"}]}, "role"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}],
      "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "minProperties": "x"}}}},
     "output_config.format"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}], "tools": [{"name": "f"}]}, "input_schema"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}], "temperature": 1.5}, "temperature"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}],
      "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "web_search_20250305"),
]


@pytest.mark.parametrize("body,named", BAD, ids=[n for _, n in BAD])
def test_bad_input_is_a_400_in_anthropics_shape(smollm2_url, body, named):
    status, reply = post(smollm2_url, "/v1/messages", {"model": "m", **body})
    assert status == 400, reply
    assert reply["type"] == "error" and reply["error"]["type"] == "invalid_request_error", reply
    assert named in reply["error"]["message"], reply


def test_sdk_raises_its_typed_exceptions(client):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}]}])
    assert "tool_use_id" in e.value.body["error"]["message"]
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="another-model", max_tokens=4, messages=ask("Hi"))


def test_unset_sampling_fields_take_the_models_defaults(minfer, tiny_models, tmp_path):
    """The current SDK sends no temperature: a checkpoint whose generation_config.json says greedy (do_sample false)
    answers deterministically, as it does with temperature 0 given; the same request at temperature 1 samples."""
    model = tmp_path / "model"
    import shutil
    shutil.copytree(tiny_models("tiny-qwen3", "f32"), model)
    (model / "generation_config.json").write_text(json.dumps({"do_sample": False, "eos_token_id": []}))
    with serve(minfer.binary, "--model", model, "--served-model-name", "m") as base:
        body = {"model": "m", "max_tokens": 12, "messages": ask("Hi"), "metadata": {"user_id": "u1"}}
        outs = {json.dumps(post(base, "/v1/messages", body)[1]["content"]) for _ in range(3)}
        assert len(outs) == 1
        greedy = post(base, "/v1/messages", {**body, "temperature": 0})[1]["content"]
        assert json.dumps(greedy) in outs
        sampled = {json.dumps(post(base, "/v1/messages", {**body, "temperature": 1, "top_k": 0})[1]["content"])
                   for _ in range(4)}
        assert len(sampled) > 1


def running_line(base: str) -> str:
    """The metrics line saying a request runs ("" while none does)."""
    import urllib.request
    text = urllib.request.urlopen(base + "/metrics", timeout=60).read().decode()
    return next((line for line in text.splitlines()
                 if line.startswith("minfer:num_requests_running") and not line.endswith(" 0")), "")


def test_waiting_streams_are_pinged(minfer, smollm2_gguf):
    """A stream waiting behind another request (one sequence at a time) gets ping events every
    --stream-ping-interval seconds (the SDK drops them, so the events are read raw), and still ends with its message."""
    import threading
    import time
    import urllib.request
    with serve(minfer.binary, "--model", smollm2_gguf, "--served-model-name", "m", "--max-num-seqs", "1",
               "--stream-ping-interval", "0.05") as base:
        c = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=300)
        first = threading.Thread(target=lambda: c.messages.create(
            model="m", max_tokens=300, messages=ask("Tell me a long story."),
            extra_body={"temperature": 0, "ignore_eos": True}))
        first.start()
        deadline = time.monotonic() + 60
        while "num_requests_running" not in running_line(base) and time.monotonic() < deadline:
            time.sleep(0.02)  # until the long request holds the one sequence slot
        body = {"model": "m", "max_tokens": 4, "messages": ask("Hi"), "stream": True, "temperature": 0}
        request = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as r:
            names = [line[7:] for line in r.read().decode().splitlines() if line.startswith("event: ")]
        first.join()
    assert names.count("ping") >= 3, names  # the one after message_start, and the waiting ones
    assert names[0] == "message_start" and names[-1] == "message_stop", names
