#!/usr/bin/python3
"""Writes expected.json: each template here rendered by Jinja2 the way transformers' apply_chat_template
renders it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls, raise_exception, tojson
with ensure_ascii=False, strftime_now pinned to NOW). tests/unit/tokenizer_chat_template_test.cpp checks that
minfer's ChatTemplate (minijinja, rust/minfer_ffi) produces the same strings, and fails where Jinja2 fails.

Test-data generation only (Debian python3-jinja2). Rerun after changing a template or a case:
  /usr/bin/python3 tests/data/chat_templates/generate_expected.py
"""
import json
import pathlib
from datetime import datetime, timezone

import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent
NOW = 1796212800  # 2026-12-02 12:00:00 UTC: strftime_now's time in every case (the test pins it too)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.fromtimestamp(NOW, timezone.utc).strftime(fmt)
    return env


def m(role, content):
    return {"role": role, "content": content}


# The conversations every template is rendered with (where the family allows the roles).
SYSTEM_CHAT = [
    m("system", "You are a helpful assistant"),
    m("user", "Hello"),
    m("assistant", "Hi there"),
    m("user", "Who are you"),
    m("assistant", "   I am an assistant   "),
    m("user", "Another question"),
]
PLAIN_CHAT = SYSTEM_CHAT[1:]
SINGLE = [m("user", "  Tell me a joke.\n")]
UNICODE = [m("system", "\u3000Réponds en français.\n"), m("user", "Ça va ? 你好 \U0001F600\u00a0")]
TOOL_CHAT = [
    m("user", "What is the weather in Paris?"),
    m("assistant", "Let me check."),
    m("tool", '{"temp": 21, "sky": "clear"}'),
    m("tool", 'line one\nline "two"'),
]
THINKING_CHAT = [
    m("user", "2+2?"),
    m("assistant", "<think>\nadd them\n</think>\n\n4"),
    m("user", "and 3+3?"),
    m("assistant", "<think>\nagain\n</think>\n\n6"),
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
            "threshold": {"type": "number", "default": 0.5}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web \u2014 \"quoted\" & <tags>",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
]
CALL = {"id": "abcDEF123", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 2}}}
TOOL_CALL_CHAT = [
    m("system", "You are a weather bot."),
    m("user", "What is the weather in Paris?"),
    # The server gives templates "" for a null content (as vLLM): Qwen3's template tests '</think>' in content.
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "abcDEF123", "name": "get_weather", "content": '{"temp": 21.5, "sky": "clear"}'},
    m("assistant", "It is 21.5 C and clear."),
    m("user", "And tomorrow?"),
]
TOOL_CALL_NO_SYSTEM = TOOL_CALL_CHAT[1:]
# Templates that concatenate the arguments as text (DeepSeek-R1) receive them as the client's JSON string.
TOOL_CALL_STRING_ARGS = [
    m("user", "What is the weather in Paris?"),
    {"role": "assistant", "content": None, "tool_calls": [dict(CALL, function={
        "name": "get_weather", "arguments": '{"city": "Paris"}'})]},
    {"role": "tool", "tool_call_id": "abcDEF123", "content": '{"temp": 21.5}'},
    m("assistant", "<think>\nlook it up\n</think>\n\nIt is 21.5 C."),
    m("user", "Thanks"),
]
QWEN_TOOL_CALL = [
    m("user", "Weather in Paris and Rome?"),
    {"role": "assistant", "content": "<think>\ntwo cities\n</think>\n\nChecking.", "tool_calls": [
        CALL, dict(CALL, id="ghiJKL456", function={"name": "get_weather", "arguments": {"city": "Rome"}})]},
    {"role": "tool", "tool_call_id": "abcDEF123", "content": "21"},
    {"role": "tool", "tool_call_id": "ghiJKL456", "content": "25"},
    m("assistant", "Paris 21, Rome 25."),
]
# Qwen3.5's XML-style calls: arguments of every JSON kind (objects and lists go through tojson, the rest |string).
QWEN35_TOOL_CALL = [
    m("user", "Weather in Paris?"),
    {"role": "assistant", "content": "", "tool_calls": [dict(CALL, function={"name": "get_weather", "arguments": {
        "city": "Paris", "days": 2, "threshold": 0.5, "exact": True, "note": None, "hours": [9, 12],
        "filters": {"sky": "clear", "wind": {"max": 3}}, "text": "line one\nline <two>"}})]},
    {"role": "tool", "tool_call_id": "abcDEF123", "content": "21"},
]
# Content as a list of parts (OpenAI's multimodal form): text parts are joined, an image becomes Qwen's placeholder.
CONTENT_PARTS = [
    m("system", [{"type": "text", "text": "Be brief."}]),
    m("user", [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "x"}}]),
]
REASONING_FIELD = [
    m("user", "2+2?"),
    {"role": "assistant", "content": "4", "reasoning_content": "add them"},
    m("user", "and 3+3?"),
]

# (template file, BOS / EOS, extra variables besides messages / add_generation_prompt, conversations)
LLAMA2 = ("<s>", "</s>")
LLAMA3 = ("<|begin_of_text|>", "<|eot_id|>")
NONE = ("", "")
CASES = [
    ("qwen2.5-instruct.jinja", NONE, {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT]),
    ("qwen2.5-instruct.jinja", NONE, {"tools": TOOLS}, [PLAIN_CHAT, TOOL_CALL_CHAT]),
    ("qwen3.jinja", NONE, {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT, THINKING_CHAT, REASONING_FIELD]),
    ("qwen3.jinja", NONE, {"enable_thinking": False}, [PLAIN_CHAT, THINKING_CHAT]),
    ("qwen3.jinja", NONE, {"tools": TOOLS}, [SINGLE, TOOL_CALL_CHAT, QWEN_TOOL_CALL]),
    ("qwen3.jinja", NONE, {"tools": TOOLS, "enable_thinking": False}, [QWEN_TOOL_CALL]),
    ("qwen3.5.jinja", NONE, {},
     [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT, THINKING_CHAT, REASONING_FIELD, CONTENT_PARTS]),
    ("qwen3.5.jinja", NONE, {"enable_thinking": False}, [PLAIN_CHAT, THINKING_CHAT]),
    ("qwen3.5.jinja", NONE, {"tools": TOOLS}, [SINGLE, TOOL_CALL_CHAT, QWEN_TOOL_CALL, QWEN35_TOOL_CALL]),
    ("qwen3.5.jinja", NONE, {"tools": TOOLS, "enable_thinking": False}, [QWEN_TOOL_CALL, QWEN35_TOOL_CALL]),
    ("chatml-openhermes-2.5.jinja", NONE, {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE]),
    ("smollm2-instruct.jinja", NONE, {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE]),
    ("llama-3-instruct.jinja", LLAMA3, {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE]),
    ("llama-3.2-instruct.jinja", LLAMA3, {"date_string": "26 Jul 2024"},
     [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT]),
    ("llama-3.2-instruct.jinja", LLAMA3, {}, [SINGLE]),  # today's date from strftime_now
    ("llama-3.2-instruct.jinja", LLAMA3, {"tools": TOOLS}, [TOOL_CALL_CHAT]),
    ("llama-3.1-instruct.jinja", LLAMA3, {}, [SYSTEM_CHAT, PLAIN_CHAT, UNICODE]),
    ("llama-3.1-instruct.jinja", LLAMA3, {"tools": TOOLS}, [SINGLE, TOOL_CALL_CHAT, TOOL_CALL_NO_SYSTEM]),
    ("llama-3.1-instruct.jinja", LLAMA3, {"tools": TOOLS, "tools_in_user_message": False}, [TOOL_CALL_CHAT]),
    ("llama-3.1-instruct.jinja", LLAMA3, {"builtin_tools": ["brave_search", "wolfram_alpha"]}, [SYSTEM_CHAT]),
    ("llama-2-chat.jinja", LLAMA2, {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT]),
    ("mistral-7b-instruct-v0.1.jinja", LLAMA2, {}, [PLAIN_CHAT, SINGLE, SYSTEM_CHAT]),
    ("mixtral-8x7b-instruct-v0.1.jinja", LLAMA2, {}, [PLAIN_CHAT, SINGLE]),
    ("mistral-7b-instruct-v0.3.jinja", LLAMA2, {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT]),
    ("mistral-7b-instruct-v0.3.jinja", LLAMA2, {"tools": TOOLS}, [TOOL_CALL_CHAT, TOOL_CALL_NO_SYSTEM]),
    ("mistral-nemo-instruct-2407.jinja", LLAMA2, {}, [SYSTEM_CHAT, PLAIN_CHAT, UNICODE]),
    ("mistral-nemo-instruct-2407.jinja", LLAMA2, {"tools": TOOLS}, [TOOL_CALL_CHAT]),
    ("phi-3.5-mini-instruct.jinja", ("<s>", "<|endoftext|>"), {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE]),
    ("deepseek-r1-distill-qwen.jinja", ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"), {},
     [SYSTEM_CHAT, PLAIN_CHAT, UNICODE, THINKING_CHAT, TOOL_CALL_STRING_ARGS]),
    ("gemma3.jinja", ("<bos>", "<eos>"), {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT]),
    ("openai-gpt-oss.jinja", ("<|startoftext|>", "<|return|>"), {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE]),
    ("openai-gpt-oss.jinja", NONE, {"reasoning_effort": "high"}, [PLAIN_CHAT, REASONING_FIELD]),
    ("openai-gpt-oss.jinja", NONE, {"tools": TOOLS}, [SINGLE, TOOL_CALL_CHAT, TOOL_CALL_NO_SYSTEM]),
    ("openai-gpt-oss.jinja", NONE, {"builtin_tools": ["browser", "python"]}, [SINGLE]),
]


def main():
    env = environment()
    out = []
    for file, (bos, eos), extra, conversations in CASES:
        template = env.from_string((HERE / file).read_text())
        for messages in conversations:
            for add_generation_prompt in (False, True):
                case = {"template": file, "bos_token": bos, "eos_token": eos, "extra": extra, "messages": messages,
                        "add_generation_prompt": add_generation_prompt}
                try:
                    case["expected"] = template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                                       bos_token=bos, eos_token=eos, **extra)
                except (TemplateError, TypeError) as e:  # what the template rejects: the test expects an error
                    case["error"] = str(e)
                out.append(case)
    (HERE / "expected.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    errors = sum("error" in c for c in out)
    print(f"wrote {len(out)} cases ({errors} rejected by the template) to {HERE / 'expected.json'}")


if __name__ == "__main__":
    main()
