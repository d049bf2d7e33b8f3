"""OpenAI-server parity with the official openai Python client against a real `minfer serve` of SmolLM2-135M-Instruct
(the PyPI GGUF): structured outputs (every output schema-valid under temperature 1, checked with the jsonschema
package; the client's `parse` helper with a pydantic model), tools (required, a named function, auto parsing the
model's own format, streamed as delta.tool_calls), reasoning_content split from <think> blocks, chat templates
rendered by minijinja (errors naming the template line), the fields clients send (content parts, logit_bias,
min_tokens, user, metadata, stream_options, 1e400), /tokenize and /detokenize, and the vLLM-named metrics.

The model is small: where a test needs a particular output (a tool call in the model's format, a <think> block)
it constrains the output with a regex, which exercises the same parsing as a model that writes them by itself."""

from __future__ import annotations

import json
import urllib.request

import jsonschema
import openai
import pydantic
import pytest

from chat_fixtures import CHAT_TEMPLATES, WEATHER_SCHEMA
from serve_process import post_json as post, serve


SCHEMAS = {
    "nested": {"type": "object", "properties": {
        "person": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 16},
                                                    "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                   "required": ["name", "age"], "additionalProperties": False},
        "city": {"type": "string", "maxLength": 20}},
        "required": ["person", "city"], "additionalProperties": False},
    "array_bounds": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 2, "maxItems": 4}},
        "required": ["tags"], "additionalProperties": False},
    "enums_and_numbers": {"type": "object", "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "score": {"type": "number", "minimum": -1.5, "maximum": 2.5},
        "count": {"type": "integer", "minimum": 3, "maximum": 9}},
        "required": ["color", "score", "count"], "additionalProperties": False},
    "string_pattern": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2,4}$"},
        "word": {"type": "string", "minLength": 2, "maxLength": 6}},
        "required": ["code", "word"], "additionalProperties": False},
}

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city", "parameters": WEATHER_SCHEMA}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "Local time in a city", "parameters": WEATHER_SCHEMA}}


@pytest.fixture(scope="module")
def url(smollm2_url):
    return smollm2_url


@pytest.fixture(scope="module")
def client(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300)


def ask(text: str) -> list:
    return [{"role": "user", "content": text}]




@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_output_follows_its_schema_at_temperature_1(client, name):
    schema = SCHEMAS[name]
    for seed in range(4):
        out = client.chat.completions.create(
            model="m", messages=ask("Reply with JSON."), temperature=1.0, seed=seed, max_tokens=200,
            response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}})
        choice = out.choices[0]
        assert choice.finish_reason == "stop", choice
        jsonschema.validate(json.loads(choice.message.content), schema)


def test_schemas_hold_on_a_random_weight_model(minfer, tiny_models):
    """tiny-qwen2 (random weights, the real Qwen2 vocabulary of 151k tokens) at temperature 1: nothing but the
    mask keeps its output in the language."""
    with serve(minfer.binary, "--model", tiny_models("tiny-qwen2", "f32"), "--served-model-name", "m") as base:
        c = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)
        for name, schema in sorted(SCHEMAS.items()):
            for seed in range(2):
                out = c.chat.completions.create(
                    model="m", messages=ask("JSON"), temperature=1.0, seed=seed, max_tokens=300,
                    response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema}})
                choice = out.choices[0]
                assert choice.finish_reason == "stop", (name, choice)
                jsonschema.validate(json.loads(choice.message.content), schema)


def test_vllm_and_older_spellings_constrain_too(client):
    schema = SCHEMAS["enums_and_numbers"]
    for extra in ({"structured_outputs": {"json": schema}}, {"guided_json": schema}):
        out = client.chat.completions.create(model="m", messages=ask("JSON please"), temperature=1.0, max_tokens=100,
                                             extra_body=extra)
        jsonschema.validate(json.loads(out.choices[0].message.content), schema)
    regex = client.completions.create(model="m", prompt="Code:", max_tokens=20, temperature=1.0,
                                      extra_body={"guided_regex": "[A-Z]{2}[0-9]{3}"})
    assert len(regex.choices[0].text) == 5 and regex.choices[0].text[:2].isupper()
    choice = client.chat.completions.create(model="m", messages=ask("Pick"), max_tokens=10, temperature=1.0,
                                            extra_body={"structured_outputs": {"choice": ["yes", "no", "maybe"]}})
    assert choice.choices[0].message.content in ("yes", "no", "maybe")
    lark = client.completions.create(model="m", prompt="Sum:", max_tokens=20, temperature=1.0,
                                     extra_body={"grammar": 'start: NUM "+" NUM\nNUM: /[0-9]{1,2}/'})
    left, right = lark.choices[0].text.split("+")
    assert left.isdigit() and right.isdigit()
    obj = client.chat.completions.create(model="m", messages=ask("JSON"), max_tokens=200, temperature=0,
                                         response_format={"type": "json_object"})
    if obj.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(obj.choices[0].message.content), dict)


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=16)
    age: int = pydantic.Field(ge=0, le=120)


def test_parse_helper_with_a_pydantic_model(client):
    out = client.chat.completions.parse(model="m", messages=ask("Invent a person."), response_format=Person,
                                        temperature=1.0, seed=3, max_tokens=100)
    person = out.choices[0].message.parsed
    assert isinstance(person, Person) and 0 <= person.age <= 120


def test_invalid_schema_and_conflicting_fields_are_400s(url):
    bad = {"messages": ask("x"), "response_format": {"type": "json_schema",
                                                       "json_schema": {"name": "x", "schema": {"type": "objekt"}}}}
    status, body = post(url, "/v1/chat/completions", bad)
    assert status == 400 and body["error"]["param"] == "response_format.json_schema.schema", body
    assert "objekt" in body["error"]["message"]
    status, body = post(url, "/v1/chat/completions", {"messages": ask("x"), "guided_regex": "[a-"})
    assert status == 400 and body["error"]["param"] == "guided_regex" and "regex" in body["error"]["message"], body
    status, body = post(url, "/v1/chat/completions",
                        {"messages": ask("x"), "guided_regex": "a", "structured_outputs": {"regex": "b"}})
    assert status == 400 and "both constrain" in body["error"]["message"], body


def test_tool_choice_required_and_named_always_parse(client):
    for seed in range(3):
        out = client.chat.completions.create(model="m", messages=ask("Weather and time in Paris?"), seed=seed,
                                             temperature=1.0, max_tokens=120, tools=[WEATHER_TOOL, TIME_TOOL],
                                             tool_choice="required", parallel_tool_calls=seed == 0)
        choice = out.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        for call in choice.message.tool_calls:
            assert call.function.name in ("get_weather", "get_time") and call.id.startswith("call_")
            jsonschema.validate(json.loads(call.function.arguments), WEATHER_TOOL["function"]["parameters"])
    named = client.chat.completions.create(model="m", messages=ask("Time in Rome?"), max_tokens=60, temperature=1.0,
                                           tools=[WEATHER_TOOL, TIME_TOOL],
                                           tool_choice={"type": "function", "function": {"name": "get_time"}})
    calls = named.choices[0].message.tool_calls
    assert len(calls) == 1 and calls[0].function.name == "get_time"
    assert set(json.loads(calls[0].function.arguments)) == {"city"}


HERMES_CALL = r'I will check\. <tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Paris"\}\}\n</tool_call>'


def test_auto_tool_calls_parsed_from_the_models_format_whole_and_streamed(client):
    kwargs = dict(model="m", messages=ask("Weather in Paris?"), tools=[WEATHER_TOOL], max_tokens=200,
                  temperature=0, extra_body={"structured_outputs": {"regex": HERMES_CALL}})
    whole = client.chat.completions.create(**kwargs).choices[0]
    assert whole.finish_reason == "tool_calls"
    assert whole.message.content.strip() == "I will check."  # the text before the call, as vLLM keeps it
    assert [(c.function.name, json.loads(c.function.arguments)) for c in whole.message.tool_calls] == [
        ("get_weather", {"city": "Paris"})]
    content, calls, reasons = "", {}, []
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            entry = calls.setdefault(tc.index, {"name": "", "arguments": "", "pieces": 0})
            entry["name"] += tc.function.name or ""
            entry["arguments"] += tc.function.arguments or ""
            entry["pieces"] += 1
        if chunk.choices[0].finish_reason:
            reasons.append(chunk.choices[0].finish_reason)
    assert content.strip() == "I will check." and reasons == ["tool_calls"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [("get_weather", {"city": "Paris"})]
    # The arguments streamed as the model wrote them, in pieces (vLLM's way), not in one delta at the end.
    assert calls[0]["pieces"] > 2, calls
    # Without tools the same text is plain content.
    plain = client.chat.completions.create(model="m", messages=ask("Weather in Paris?"), max_tokens=200,
                                           extra_body={"structured_outputs": {"regex": HERMES_CALL}})
    assert plain.choices[0].message.tool_calls is None and "<tool_call>" in plain.choices[0].message.content


def test_tool_results_are_rendered_back_into_the_prompt(url):
    messages = [{"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'}]
    status, body = post(url, "/v1/chat/completions", {"messages": messages, "tools": [WEATHER_TOOL], "max_tokens": 8})
    assert status == 200, body
    status, tokens = post(url, "/tokenize", {"messages": messages, "tools": [WEATHER_TOOL], "return_token_strs": True})
    assert status == 200 and tokens["count"] == len(tokens["tokens"]) > 10
    status, text = post(url, "/detokenize", {"tokens": tokens["tokens"]})
    assert '{"temp": 21}' in text["prompt"] and "tool" in text["prompt"]


def test_reasoning_content_is_split_from_think_blocks(minfer, smollm2_gguf):
    regex = r"<think>\nLet me think\.\n</think>\n\nHello!"
    with serve(minfer.binary, "--model", smollm2_gguf, "--served-model-name", "m", "--chat-template", CHAT_TEMPLATES / "qwen3.jinja") as base:
        c = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)
        kwargs = dict(model="m", messages=ask("Hi"), max_tokens=100, extra_body={"structured_outputs": {"regex": regex}})
        whole = c.chat.completions.create(**kwargs).choices[0].message
        assert whole.content == "Hello!"
        assert whole.model_extra["reasoning_content"].strip() == "Let me think."
        reasoning, content = "", ""
        for chunk in c.chat.completions.create(stream=True, **kwargs):
            delta = chunk.choices[0].delta
            reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            content += delta.content or ""
        assert reasoning.strip() == "Let me think." and content == "Hello!"
        # enable_thinking false: the template closes the block itself, the output is all content.
        status, body = post(base, "/tokenize", {"messages": ask("Hi"), "chat_template_kwargs": {"enable_thinking": False}})
        status, text = post(base, "/detokenize", {"tokens": body["tokens"]})
        assert text["prompt"].endswith("<think>\n\n</think>\n\n"), text


@pytest.mark.parametrize("flags", [[], ["--tool-call-parser", "openai"]], ids=["auto", "openai-tool-parser"])
def test_harmony_channels_become_reasoning_content_and_tool_calls(minfer, smollm2_gguf, flags):
    """gpt-oss's template (harmony messages) switches the server to harmony parsing: the analysis channel is
    reasoning_content, the final one content, a commentary message to functions.NAME a tool call; whole and streamed;
    also under vLLM's --tool-call-parser openai.
    SmolLM2 writes the markers as plain text under a regex, which parses as gpt-oss's special tokens do once decoded."""
    thought = r"<\|channel\|>analysis<\|message\|>Let me think\.<\|end\|><\|start\|>assistant"
    with serve(minfer.binary, "--model", smollm2_gguf, "--served-model-name", "m", "--chat-template",
               CHAT_TEMPLATES / "openai-gpt-oss.jinja", *flags) as base:
        c = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)
        regex = thought + r"<\|channel\|>final<\|message\|>Hello!"
        kwargs = dict(model="m", messages=ask("Hi"), max_tokens=100, extra_body={"structured_outputs": {"regex": regex}})
        whole = c.chat.completions.create(**kwargs).choices[0].message
        assert whole.content == "Hello!" and whole.model_extra["reasoning_content"] == "Let me think.", whole
        reasoning, content = "", ""
        for chunk in c.chat.completions.create(stream=True, **kwargs):
            delta = chunk.choices[0].delta
            reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            content += delta.content or ""
        assert (reasoning, content) == ("Let me think.", "Hello!")
        call = thought + r'<\|channel\|>commentary to=functions\.get_weather <\|constrain\|>json<\|message\|>\{"city": "Paris"\}'
        # Room for the longest spelling of the call: sampled (the default temperature), the regex allows the same text
        # in more or fewer tokens, and 100 cut it short once in a full-suite run.
        reply = c.chat.completions.create(model="m", messages=ask("Weather in Paris?"), tools=[WEATHER_TOOL],
                                          max_tokens=300, extra_body={"structured_outputs": {"regex": call}})
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        assert choice.message.tool_calls[0].function.name == "get_weather"
        assert json.loads(choice.message.tool_calls[0].function.arguments) == {"city": "Paris"}
        assert choice.message.model_extra["reasoning_content"] == "Let me think."


def test_template_errors_name_the_template_line(minfer, smollm2_gguf):
    with serve(minfer.binary, "--model", smollm2_gguf, "--served-model-name", "m", "--chat-template", CHAT_TEMPLATES / "mistral-7b-instruct-v0.1.jinja") as base:
        status, body = post(base, "/v1/chat/completions", {"messages": ask("a") + ask("b")})
        assert status == 400 and body["error"]["code"] == "chat_template_error", body
        assert "line" in body["error"]["message"] and "alternate" in body["error"]["message"], body


def test_fields_clients_send(url, client):
    parts = client.chat.completions.create(model="m", max_tokens=3, temperature=0, user="u-1",
                                           metadata={"team": "a"}, messages=[{"role": "user", "content": [
                                               {"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}])
    assert parts.choices[0].message.content
    status, body = post(url, "/v1/chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]})
    assert status == 400 and body["error"]["param"] == "messages[0].content[0].type", body
    for raw in (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}',
                b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
                b'{"messages": [{"role": "user", "content": "x"}], "top_p": -1e400}'):
        request = urllib.request.Request(url + "/v1/chat/completions", data=raw, method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=60)
        assert err.value.code == 400
    forced = client.chat.completions.create(model="m", messages=ask("Hi"), max_tokens=4, temperature=1.0,
                                            logit_bias={"28": 100})
    assert forced.choices[0].message.content == ",,,,"
    eos_first = {"messages": ask("Hi"), "max_tokens": 10, "logit_bias": {"2": 100}}
    status, body = post(url, "/v1/chat/completions", eos_first)
    assert body["usage"]["completion_tokens"] == 1
    status, body = post(url, "/v1/chat/completions", {**eos_first, "min_tokens": 4})
    assert body["usage"]["completion_tokens"] == 5, body
    stream = client.chat.completions.create(model="m", messages=ask("Hi"), max_tokens=3, stream=True,
                                            stream_options={"include_usage": True})
    usage = [c.usage for c in stream if c.usage]
    assert usage and usage[-1].completion_tokens == 3
    max_completion = client.chat.completions.create(model="m", messages=ask("Hi"), max_completion_tokens=2)
    assert max_completion.usage.completion_tokens == 2
    status, cont = post(url, "/tokenize", {"messages": ask("Hi") + [{"role": "assistant", "content": "Well,"}],
                                           "continue_final_message": True, "add_generation_prompt": False})
    status, text = post(url, "/detokenize", {"tokens": cont["tokens"]})
    assert text["prompt"].endswith("assistant\nWell,"), text  # the reply continues the assistant's message
    status, body = post(url, "/v1/chat/completions", {"messages": ask("Hi"), "continue_final_message": True})
    assert status == 400 and body["error"]["param"] == "continue_final_message", body
    echo = {"messages": ask("Hi") + [{"role": "assistant", "content": "Well,"}], "max_tokens": 3, "echo": True}
    status, body = post(url, "/v1/chat/completions", echo)
    assert status == 200 and body["choices"][0]["message"]["content"].startswith("Well,"), body


def test_vllm_named_metrics(url, client):
    client.chat.completions.create(model="m", messages=ask("Hi"), max_tokens=3)
    text = urllib.request.urlopen(url + "/metrics", timeout=60).read().decode()
    for name in ("minfer:num_requests_running", "minfer:kv_cache_usage_perc", "minfer:prefix_cache_queries_total",
                 "minfer:prefix_cache_hits_total", "minfer:request_success_total",
                 "minfer:time_to_first_token_seconds_bucket", "minfer:inter_token_latency_seconds_count",
                 "minfer:e2e_request_latency_seconds_sum", "minfer:iteration_tokens_total_bucket",
                 "minfer:num_preemptions_total"):
        assert f"\n{name}{{model_name=" in text, name
    length = [line for line in text.splitlines()
              if line.startswith("minfer:request_success_total") and 'finished_reason="length"' in line]
    assert length and int(length[0].split()[-1]) >= 1


def test_return_token_ids_whole_and_streamed(url, client, minfer, smollm2_gguf):
    """vLLM's return_token_ids: the output's ids per choice and the prompt's ids (completions per choice, chat at the
    top level; streamed: each chunk's new ids, the prompt's in the first chunk), equal to /tokenize's; and
    return_tokens_as_token_ids spells logprob tokens as token_id:N."""
    kwargs = dict(model="m", max_tokens=6, temperature=0, extra_body={"return_token_ids": True, "ignore_eos": True})
    chat = client.chat.completions.create(messages=ask("Hi"), **kwargs)
    prompt_ids = post(url, "/tokenize", {"messages": ask("Hi")})[1]["tokens"]
    assert chat.model_extra["prompt_token_ids"] == prompt_ids
    out_ids = chat.choices[0].model_extra["token_ids"]
    assert len(out_ids) == 6 and post(url, "/detokenize", {"tokens": out_ids})[1]["prompt"] == chat.choices[0].message.content
    streamed_ids, streamed_prompt = [], None
    for chunk in client.chat.completions.create(messages=ask("Hi"), stream=True, **kwargs):
        streamed_prompt = streamed_prompt or (chunk.model_extra or {}).get("prompt_token_ids")
        for c in chunk.choices:
            streamed_ids += (c.model_extra or {}).get("token_ids") or []
    assert streamed_ids == out_ids and streamed_prompt == prompt_ids
    completion = client.completions.create(prompt="Once upon a time", **kwargs).choices[0]
    assert completion.model_extra["prompt_token_ids"] == post(url, "/tokenize", {"prompt": "Once upon a time"})[1]["tokens"]
    ids = []
    for chunk in client.completions.create(prompt="Once upon a time", stream=True, **kwargs):
        ids += chunk.choices[0].model_extra.get("token_ids") or []
    assert ids == completion.model_extra["token_ids"]
    lp = client.chat.completions.create(messages=ask("Hi"), model="m", max_tokens=3, logprobs=True, top_logprobs=2,
                                        extra_body={"return_tokens_as_token_ids": True, "return_token_ids": True})
    content = lp.choices[0].logprobs.content
    assert [c.token for c in content] == [f"token_id:{i}" for i in lp.choices[0].model_extra["token_ids"]]
    assert all(t.token.startswith("token_id:") for c in content for t in c.top_logprobs)
