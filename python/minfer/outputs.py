"""What generation returns: GenerationResult for a finished request, GenerationChunk for each streamed step."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Union


@dataclasses.dataclass(frozen=True)
class GenerationResult:
    """One finished request.

    Attributes:
        text: the generated text (special tokens and a matched stop string left out).
        token_ids: the generated token ids (an end-of-sequence or stop token id included).
        finish_reason: "stop" (end of sequence, a stop string or stop token), "length" (max_new_tokens or the
            context reached) or "abort" (the engine was closed while it ran).
        stop_reason: the stop string that matched, or None.
        prompt: the prompt as given (a str, or a list of token ids).
        prompt_token_ids: the prompt as the model saw it.
        cached_tokens: prompt tokens served from the prefix cache.
        request_id: the engine's id of the request.
        spec_decode: with speculative decoding, {"num_drafts", "draft_tokens", "accepted_tokens"} over the request
            (acceptance rate = accepted_tokens / draft_tokens); None without.
    """

    text: str
    token_ids: List[int]
    finish_reason: Optional[str]
    stop_reason: Optional[str]
    prompt: Union[str, List[int]]
    prompt_token_ids: List[int]
    cached_tokens: int
    request_id: int
    spec_decode: Optional[Dict[str, int]] = None

    @classmethod
    def _from_cpp(cls, out, prompt) -> "GenerationResult":
        return cls(text=out.text, token_ids=list(out.token_ids), finish_reason=out.finish_reason,
                   stop_reason=out.stop_reason or None, prompt=prompt, prompt_token_ids=list(out.prompt_token_ids),
                   cached_tokens=out.cached_tokens, request_id=out.request_id,
                   spec_decode=_spec_decode(out.spec_decode))


@dataclasses.dataclass(frozen=True)
class ChatResult(GenerationResult):
    """A finished chat request (Engine.chat): the GenerationResult of its rendered prompt, with the reply split as
    the server's /v1/chat/completions splits it.

    Attributes:
        content: the answer (text outside reasoning and tool calls).
        reasoning_content: the reasoning block's text (<think>, harmony's analysis channel), or None.
        tool_calls: the calls, OpenAI's shape: [{"id", "type": "function", "function": {"name", "arguments"}}]
            (arguments is JSON text).
    """

    content: str = ""
    reasoning_content: Optional[str] = None
    tool_calls: List[Dict] = dataclasses.field(default_factory=list)


def _spec_decode(usage) -> Optional[Dict[str, int]]:
    if usage.num_drafts == 0:
        return None
    return {"num_drafts": usage.num_drafts, "draft_tokens": usage.draft_tokens,
            "accepted_tokens": usage.accepted_tokens}


@dataclasses.dataclass(frozen=True)
class GenerationChunk:
    """What one engine step added to a streamed request.

    Attributes:
        text: text that became final in this step (possibly "": text that could be the start of a stop string,
            or part of a multi-byte character, is held back until it is settled; nothing is sent twice).
        token_ids: the token ids generated in this step.
        finished: True on the request's last chunk.
        finish_reason: None until finished, then "stop", "length" or "abort".
        stop_reason: the stop string that matched, or None.
        output_tokens: tokens generated so far, these included.
        request_id: the engine's id of the request.
    """

    text: str
    token_ids: List[int]
    finished: bool
    finish_reason: Optional[str]
    stop_reason: Optional[str]
    output_tokens: int
    request_id: int

    @classmethod
    def _from_cpp(cls, out) -> "GenerationChunk":
        return cls(text=out.text_delta, token_ids=list(out.new_token_ids), finished=out.finished,
                   finish_reason=out.finish_reason, stop_reason=out.stop_reason or None,
                   output_tokens=out.output_tokens, request_id=out.request_id)
