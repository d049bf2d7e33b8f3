"""OpenAI's Responses API with the official `openai` Python client against a real `minfer serve` of SmolLM2-135M-Instruct
(the PyPI GGUF): responses.create, responses.stream (the helper assembles the response create returns at temperature
0), responses.parse with a pydantic model, a function-call round trip through previous_response_id, retrieval,
input_items and deletion, stored responses surviving a restart in SQLite (--responses-store), and bad input answered
400 naming the field (404 naming an unknown previous_response_id).

Where a test needs a particular output (a tool call in the model's format, a <think> block) it constrains the output
with vLLM's structured_outputs regex, which exercises the same parsing as a model that writes them by itself."""

from __future__ import annotations

import json
import urllib.request

import jsonschema
import openai
import pydantic
import pytest

from chat_fixtures import CHAT_TEMPLATES, WEATHER_SCHEMA
from serve_process import post_json as post, serve

WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather in a city",
           "parameters": WEATHER_SCHEMA}


@pytest.fixture(scope="module")
def client(smollm2_url):
    return openai.OpenAI(base_url=smollm2_url + "/v1", api_key="unused", max_retries=0, timeout=300)




def test_create_and_stream_agree(client):
    kwargs = dict(model="m", input="Name three colors.", max_output_tokens=20, temperature=0,
                  instructions="You are terse.")
    whole = client.responses.create(**kwargs)
    assert whole.object == "response" and whole.id.startswith("resp_") and whole.status in ("completed", "incomplete")
    assert whole.output[0].type == "message" and whole.output_text
    assert whole.instructions == "You are terse." and whole.max_output_tokens == 20
    assert whole.usage.output_tokens > 0 and whole.usage.input_tokens > 0
    with client.responses.stream(**kwargs) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_text == whole.output_text and final.status == whole.status
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed", types
    for expected in ("response.output_item.added", "response.content_part.added", "response.output_text.delta",
                     "response.output_text.done", "response.output_item.done"):
        assert expected in types, (expected, types)


def test_sequence_numbers_increase(smollm2_url):
    request = urllib.request.Request(smollm2_url + "/v1/responses", method="POST", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"model": "m", "input": "Hi", "max_output_tokens": 4,
                                                      "stream": True}).encode())
    with urllib.request.urlopen(request, timeout=300) as r:
        events = [json.loads(line[6:]) for line in r.read().decode().splitlines() if line.startswith("data: ")]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["status"] == "incomplete"


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=16)
    age: int = pydantic.Field(ge=0, le=120)


def test_parse_with_a_pydantic_model(client):
    for seed_temperature in (1.0, 0.7):
        parsed = client.responses.parse(model="m", input="Invent a person.", text_format=Person, max_output_tokens=80,
                                        temperature=seed_temperature).output_parsed
        assert isinstance(parsed, Person) and 0 <= parsed.age <= 120


def test_json_object_and_schema_formats(client):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    r = client.responses.create(model="m", input="A number", max_output_tokens=40,
                                text={"format": {"type": "json_schema", "name": "n", "schema": schema}})
    jsonschema.validate(json.loads(r.output_text), schema)
    r = client.responses.create(model="m", input="An object", max_output_tokens=60, temperature=0,
                                text={"format": {"type": "json_object"}})
    assert isinstance(json.loads(r.output_text), dict)


def test_function_call_round_trip_through_previous_response_id(client):
    # Sampled arguments can spend many tokens (a 20-character string of \u escapes): room enough for them.
    first = client.responses.create(model="m", input="Weather in Paris?", tools=[WEATHER], max_output_tokens=300,
                                    tool_choice={"type": "function", "name": "get_weather"})
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER["parameters"])
    second = client.responses.create(model="m", previous_response_id=first.id, tools=[WEATHER], max_output_tokens=12,
                                     temperature=0, input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                                                            "output": "21 C and sunny"}])
    assert second.previous_response_id == first.id and second.output_text
    # The conversation carried over: the first turn's input, its call and the call's output, in order.
    items = client.responses.input_items.list(second.id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output"]
    assert items[1].call_id == calls[0].call_id and items[2].output == "21 C and sunny"
    # Streamed, the arguments arrive as function_call_arguments events the helper assembles.
    with client.responses.stream(model="m", input="Weather in Rome?", tools=[WEATHER], max_output_tokens=300,
                                 tool_choice="required", parallel_tool_calls=False) as stream:
        pieces = sum(1 for e in stream if e.type == "response.function_call_arguments.delta")
        final = stream.get_final_response()
    assert pieces > 2  # the arguments streamed as they were generated
    call = next(item for item in final.output if item.type == "function_call")
    jsonschema.validate(json.loads(call.arguments), WEATHER["parameters"])


def test_retrieve_and_delete(client):
    r = client.responses.create(model="m", input="Hi", max_output_tokens=4)
    assert client.responses.retrieve(r.id).output_text == r.output_text
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    unstored = client.responses.create(model="m", input="Hi", max_output_tokens=4, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model="m", input="Hi", max_output_tokens=4, previous_response_id=unstored.id)
    assert "previous_response_id" in str(e.value)


def test_reasoning_items_whole_and_streamed(minfer, smollm2_gguf):
    regex = r"<think>\nLet me think\.\n</think>\n\nHello!"
    with serve(minfer.binary, "--model", smollm2_gguf, "--served-model-name", "m", "--chat-template",
               CHAT_TEMPLATES / "qwen3.jinja") as base:
        c = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)
        kwargs = dict(model="m", input="Hi", max_output_tokens=100, reasoning={"effort": "high"},
                      extra_body={"structured_outputs": {"regex": regex}})
        whole = c.responses.create(**kwargs)
        assert [i.type for i in whole.output] == ["reasoning", "message"]
        assert whole.output[0].content[0].text.strip() == "Let me think." and whole.output_text == "Hello!"
        with c.responses.stream(**kwargs) as stream:
            types = [e.type for e in stream]
            final = stream.get_final_response()
        assert [i.type for i in final.output] == ["reasoning", "message"] and final.output_text == "Hello!"
        assert "response.reasoning_text.delta" in types


def test_stored_responses_survive_a_restart_in_sqlite(minfer, smollm2_gguf, tmp_path):
    db = tmp_path / "responses.sqlite"
    args = ["--model", smollm2_gguf, "--served-model-name", "m", "--responses-store", db]
    with serve(minfer.binary, *args) as base:
        c = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)
        first = c.responses.create(model="m", input="Remember the word apple.", max_output_tokens=4)
    with serve(minfer.binary, *args) as base:
        c = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)
        assert c.responses.retrieve(first.id).output_text == first.output_text
        second = c.responses.create(model="m", input="Which word?", previous_response_id=first.id, max_output_tokens=4)
        items = c.responses.input_items.list(second.id, order="asc").data
        assert [i.type for i in items] == ["message", "message", "message"]


BAD = [
    ({"max_output_tokens": 4}, "input"),
    ({"input": [{"type": "function_call_output", "call_id": "call_nope", "output": "x"}]}, "call_id"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]}, "input[0].content[0].type"),
    ({"input": "Hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "Hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object",
                                                                                       "minProperties": "x"}}}},
     "text.format"),
    ({"input": "Hi", "temperature": 3}, "temperature"),
    ({"input": "Hi", "background": True}, "background"),
]


@pytest.mark.parametrize("body,param", BAD, ids=[p for _, p in BAD])
def test_bad_input_is_a_400_naming_the_field(smollm2_url, body, param):
    status, reply = post(smollm2_url, "/v1/responses", {"model": "m", **body})
    assert status == 400, reply
    assert reply["error"]["param"] == param or param in reply["error"]["message"], reply


def test_unknown_previous_response_is_a_404_naming_it(smollm2_url):
    status, reply = post(smollm2_url, "/v1/responses", {"model": "m", "input": "Hi", "previous_response_id": "resp_nope"})
    assert status == 404 and "resp_nope" in reply["error"]["message"] and reply["error"]["param"] == "previous_response_id"
