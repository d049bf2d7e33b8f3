#!/usr/bin/python3
"""Writes expected.json: each template here rendered by Jinja2 the way transformers' apply_chat_template
renders it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, raise_exception, tojson with
ensure_ascii=False, strftime_now). tests/unit/tokenizer_chat_template_test.cpp checks that minfer's C++
ChatTemplate produces the same strings.

Test-data generation only (Debian python3-jinja2); nothing in minfer runs Jinja. Rerun after changing a
template or a case:  /usr/bin/python3 tests/data/chat_templates/generate_expected.py
"""
import json
import pathlib
from datetime import datetime

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
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

# (template file, options passed to the template besides messages / add_generation_prompt, conversations)
TOKENS_LLAMA2 = {"bos_token": "<s>", "eos_token": "</s>"}
TOKENS_LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
CASES = [
    ("qwen2.5-instruct.jinja", {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT]),
    ("qwen3.jinja", {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT, THINKING_CHAT]),
    ("qwen3.jinja", {"enable_thinking": False}, [PLAIN_CHAT, THINKING_CHAT]),
    ("chatml-openhermes-2.5.jinja", {}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE]),
    ("llama-3-instruct.jinja", TOKENS_LLAMA3, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE]),
    ("llama-3.2-instruct.jinja", dict(TOKENS_LLAMA3, date_string="26 Jul 2024"),
     [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE, TOOL_CHAT]),
    ("llama-3.2-instruct.jinja", dict(TOKENS_LLAMA3, date_string="02 Dec 2026"), [SINGLE]),
    ("llama-2-chat.jinja", TOKENS_LLAMA2, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE]),
    ("mistral-7b-instruct-v0.1.jinja", TOKENS_LLAMA2, [PLAIN_CHAT, SINGLE]),
    ("mixtral-8x7b-instruct-v0.1.jinja", TOKENS_LLAMA2, [PLAIN_CHAT, SINGLE]),
    ("gemma3.jinja", {"bos_token": "<bos>", "eos_token": "<eos>"}, [SYSTEM_CHAT, PLAIN_CHAT, SINGLE, UNICODE]),
]


def main():
    env = environment()
    out = []
    for file, options, conversations in CASES:
        template = env.from_string((HERE / file).read_text())
        for messages in conversations:
            for add_generation_prompt in (False, True):
                text = template.render(messages=messages, add_generation_prompt=add_generation_prompt, **options)
                out.append({"template": file, "options": options, "messages": messages,
                            "add_generation_prompt": add_generation_prompt, "expected": text})
    (HERE / "expected.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(out)} cases to {HERE / 'expected.json'}")


if __name__ == "__main__":
    main()
