"""Engine.chat: conversations through the model's chat template, replies split into content, reasoning and tool
calls by the same parsers as the server's /v1/chat/completions (vLLM's LLM.chat)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _checks
from ._minfer_loader import _minfer
from .outputs import ChatResult, GenerationResult
from .sampling import SamplingParams

Message = Dict[str, Any]
_OWNER = "Engine.chat"


def _conversations(messages) -> tuple:
    """(a list of conversations, whether one was given). A conversation is a list of message dicts."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise TypeError(f"{_OWNER}: messages must be a non-empty list of message dicts, or a list of such lists")
    if all(isinstance(m, dict) for m in messages):
        return [list(messages)], True
    if all(isinstance(c, (list, tuple)) and c and all(isinstance(m, dict) for m in c) for c in messages):
        return [list(c) for c in messages], False
    raise TypeError(f"{_OWNER}: messages must be a list of message dicts (one conversation) or a list of such lists")


def _request(conversation: List[Message], tools, tool_choice, chat_template_kwargs, add_generation_prompt: bool,
             continue_final_message: bool) -> str:
    """The chat route's request body (as JSON text) for one conversation."""
    body: Dict[str, Any] = {"messages": conversation, "add_generation_prompt": add_generation_prompt,
                            "continue_final_message": continue_final_message}
    if tools is not None:
        body["tools"] = tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if chat_template_kwargs is not None:
        body["chat_template_kwargs"] = chat_template_kwargs
    try:
        return json.dumps(body)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{_OWNER}: messages, tools and chat_template_kwargs must be JSON values: {e}") from None


def chat(engine, chat_format: "_minfer.ChatFormat", messages, params: List[SamplingParams], *, tools=None,
         tool_choice=None, chat_template_kwargs: Optional[Dict[str, Any]] = None, add_generation_prompt: bool = True,
         continue_final_message: bool = False) -> Union[ChatResult, List[ChatResult]]:
    """Runs the conversations together; see Engine.chat."""
    conversations, single = _conversations(messages)
    if len(params) == 1:
        params = params * len(conversations)
    if len(params) != len(conversations):
        raise ValueError(f"{_OWNER}: {len(params)} sampling_params for {len(conversations)} conversations")
    _checks.as_bool(_OWNER, "add_generation_prompt", add_generation_prompt)
    _checks.as_bool(_OWNER, "continue_final_message", continue_final_message)
    requests, prompts, ids, cpp_params = [], [], [], []
    for conversation, p in zip(conversations, params):
        request = _request(conversation, tools, tool_choice, chat_template_kwargs, add_generation_prompt,
                           continue_final_message)
        prompt, cpp = chat_format.render(request, p._cpp)
        requests.append(request)
        prompts.append(prompt)
        ids.append(engine.tokenizer_encode(prompt, False, True))  # the template writes BOS where the model wants it
        cpp_params.append(cpp)
    outs = engine.generate(ids, cpp_params)
    results = []
    for out, request, prompt in zip(outs, requests, prompts):
        content, reasoning, calls = chat_format.parse(request, prompt, out.text)
        base = GenerationResult._from_cpp(out, prompt)
        results.append(ChatResult(**{f: getattr(base, f) for f in base.__dataclass_fields__}, content=content,
                                  reasoning_content=reasoning or None, tool_calls=calls))
    return results[0] if single else results
