"""SamplingParams: how tokens are chosen for one request (the vLLM / OpenAI set), and StructuredOutputsParams."""

from __future__ import annotations

import dataclasses
import json as _json
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

from . import _checks
from ._minfer_loader import _minfer

_OWNER = "SamplingParams"


@dataclasses.dataclass(frozen=True)
class StructuredOutputsParams:
    """Constrains the output to a formal language (vLLM's StructuredOutputsParams), through llguidance: give exactly
    one of json (a JSON schema: dict or JSON text), regex, choice (strings), grammar (Lark) or json_object=True.
    An invalid schema, regex or grammar raises minfer.MinferError (a ValueError) with llguidance's message when the
    request is added."""

    json: Union[None, str, Mapping[str, Any]] = None
    regex: Optional[str] = None
    choice: Optional[Sequence[str]] = None
    grammar: Optional[str] = None
    json_object: bool = False

    def __post_init__(self):
        given = [n for n in ("json", "regex", "choice", "grammar") if getattr(self, n) is not None]
        if self.json_object:
            given.append("json_object")
        if len(given) != 1:
            raise ValueError(f"StructuredOutputsParams: give exactly one of json, regex, choice, grammar, json_object "
                             f"(got {', '.join(given) or 'none'})")

    def _build_cpp(self) -> "_minfer.StructuredOutputs":
        so = _minfer.StructuredOutputs()
        kinds = _minfer.StructuredOutputsKind
        if self.json is not None:
            so.kind, so.spec = kinds.json_schema, self.json if isinstance(self.json, str) else _json.dumps(self.json)
        elif self.regex is not None:
            so.kind, so.spec = kinds.regex, _checks.as_str("StructuredOutputsParams", "regex", self.regex)
        elif self.choice is not None:
            choices = list(self.choice)
            if not choices or not all(isinstance(c, str) for c in choices):
                raise TypeError("StructuredOutputsParams: choice must be a non-empty list of str")
            so.kind, so.spec = kinds.choice, _json.dumps(choices)
        elif self.grammar is not None:
            so.kind, so.spec = kinds.grammar, _checks.as_str("StructuredOutputsParams", "grammar", self.grammar)
        else:
            so.kind = kinds.json_object
        return so


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters of a request, as in vLLM. Checked when built: a value out of range raises
    minfer.MinferError (a ValueError) naming the field.

    Args:
        max_new_tokens: tokens to generate at most (default 50). The context (prompt + output) is further limited
            by the engine's max_seq_len.
        max_tokens: vLLM's name for max_new_tokens (give one or the other).
        temperature: 0 = greedy (argmax, ties to the lowest id); higher = more random.
        top_k: keep the k most likely tokens; 0 or -1 = off.
        top_p: nucleus sampling, keep the smallest set whose probability reaches top_p; 1 = off.
        min_p: drop tokens less likely than min_p times the most likely one; 0 = off.
        repetition_penalty: > 1 discourages tokens already seen (prompt or output); 1 = off.
        presence_penalty: OpenAI's, in [-2, 2]; 0 = off.
        frequency_penalty: OpenAI's, in [-2, 2]; 0 = off.
        seed: same seed and inputs give the same tokens; None = nondeterministic.
        stop: a string or strings that end the output (not included in the text).
        stop_token_ids: token ids that end the output (included in token_ids, not in the text).
        ignore_eos: keep generating after the end-of-sequence token.
        skip_special_tokens: leave special tokens out of the text (vLLM's); False keeps them (e.g. gpt-oss's harmony
            markers).
        min_tokens: EOS, stop_token_ids and stop strings cannot end the output before this many tokens.
        logit_bias: {token id: bias in [-100, 100]} added to the logits (OpenAI's logit_bias).
        structured_outputs: a StructuredOutputsParams constraining the output (JSON schema, regex, ...).
    """

    max_new_tokens: Optional[int] = None  # 50 when neither it nor max_tokens is given
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: Optional[int] = None
    stop: Union[None, str, Sequence[str]] = None
    stop_token_ids: Sequence[int] = ()
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    min_tokens: int = 0
    logit_bias: Optional[Mapping[int, float]] = None
    structured_outputs: Optional[StructuredOutputsParams] = None
    max_tokens: Optional[int] = None  # vLLM's name for max_new_tokens

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731  (frozen dataclass)
        if self.max_new_tokens is not None and self.max_tokens is not None and self.max_new_tokens != self.max_tokens:
            raise ValueError(f"{_OWNER}: max_new_tokens={self.max_new_tokens} and its alias max_tokens="
                             f"{self.max_tokens} disagree: give one of them")
        length = self.max_new_tokens if self.max_new_tokens is not None else self.max_tokens
        name = "max_new_tokens" if self.max_new_tokens is not None or self.max_tokens is None else "max_tokens"
        length = _checks.as_int(_OWNER, name, 50 if length is None else length, lo=1, hi=_checks.INT32_MAX)
        set_("max_new_tokens", length)
        set_("max_tokens", length)
        for name in ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"):
            set_(name, _checks.as_float(_OWNER, name, getattr(self, name)))
        set_("top_k", _checks.as_int(_OWNER, "top_k", self.top_k, lo=-1, hi=_checks.INT32_MAX,
                                     what=" (0 and -1 both mean off)"))
        if self.seed is not None:
            set_("seed", _checks.as_int(_OWNER, "seed", self.seed, lo=0, hi=_checks.UINT64_MAX))
        set_("stop", _stop_strings(self.stop))
        ids = sorted(self.stop_token_ids) if isinstance(self.stop_token_ids, (set, frozenset)) else self.stop_token_ids
        set_("stop_token_ids", tuple(_checks.as_token_ids(_OWNER, "stop_token_ids", ids)))
        _checks.as_bool(_OWNER, "ignore_eos", self.ignore_eos)
        _checks.as_bool(_OWNER, "skip_special_tokens", self.skip_special_tokens)
        set_("min_tokens", _checks.as_int(_OWNER, "min_tokens", self.min_tokens, lo=0, hi=_checks.INT32_MAX))
        if self.structured_outputs is not None and not isinstance(self.structured_outputs, StructuredOutputsParams):
            raise TypeError(f"{_OWNER}: structured_outputs must be a StructuredOutputsParams, "
                            f"got {type(self.structured_outputs).__name__}")
        cpp = self._build_cpp()
        cpp.validate()  # the engine's range checks, with its messages
        object.__setattr__(self, "_cpp", cpp)

    def _build_cpp(self) -> "_minfer.SamplingParams":
        p = _minfer.SamplingParams()
        p.max_tokens = self.max_new_tokens
        p.temperature = self.temperature
        p.top_k = self.top_k
        p.top_p = self.top_p
        p.min_p = self.min_p
        p.repetition_penalty = self.repetition_penalty
        p.presence_penalty = self.presence_penalty
        p.frequency_penalty = self.frequency_penalty
        p.seed = self.seed
        p.stop = list(self.stop)
        p.stop_token_ids = list(self.stop_token_ids)
        p.ignore_eos = self.ignore_eos
        p.skip_special_tokens = self.skip_special_tokens
        p.min_tokens = self.min_tokens
        p.logit_bias = [(_checks.as_int(_OWNER, "logit_bias", int(k), lo=0, hi=_checks.INT32_MAX), float(v))
                        for k, v in (self.logit_bias or {}).items()]
        if self.structured_outputs is not None:
            p.structured_outputs = self.structured_outputs._build_cpp()
        return p

    def replace(self, **changes) -> "SamplingParams":
        """A copy with some fields changed (checked like the constructor)."""
        for name in changes:
            if name not in _FIELDS:
                raise _checks.unknown_keyword("SamplingParams.replace", name, _FIELDS)
        # The output length and its alias change together (either name sets both).
        for name, alias in (("max_new_tokens", "max_tokens"), ("max_tokens", "max_new_tokens")):
            if name in changes and alias not in changes:
                changes[alias] = changes[name]
        return dataclasses.replace(self, **changes)


def _stop_strings(stop) -> Tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, (list, tuple)):
        raise TypeError(f"{_OWNER}: stop must be a str or a list of str, got {type(stop).__name__}")
    for i, s in enumerate(stop):
        if not isinstance(s, str):
            raise TypeError(f"{_OWNER}: stop[{i}] must be a str, got {type(s).__name__} {s!r}")
        if not s:
            raise ValueError(f"{_OWNER}: stop[{i}] is an empty string")
    return tuple(stop)


_FIELDS = tuple(f.name for f in dataclasses.fields(SamplingParams))
SamplingParams.__init__ = _checks.keywords_checked(_OWNER)(SamplingParams.__init__)  # type: ignore[method-assign]
