"""Engine: a loaded model serving any number of requests at once (continuous batching, paged KV cache).

    from minfer import Engine, QuantConfig, SamplingParams

    engine = Engine(model_path="models/Qwen2.5-0.5B-Instruct", device="cpu", page_size=32, max_seq_len=2048)
    result = engine.generate("Once upon a time", max_new_tokens=50, temperature=0)
    print(result.text, result.token_ids, result.finish_reason)
    for chunk in engine.generate_stream("Once upon a time", max_new_tokens=50):
        print(chunk.text, end="", flush=True)

The engine's step loop runs on its own thread and every call waits with the GIL released, so Python threads
can call generate() on one Engine at the same time; their requests are batched together.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _checks
from ._minfer_loader import _minfer
from .config import QuantConfig
from .outputs import GenerationChunk, GenerationResult
from .sampling import SamplingParams

# A prompt: text, token ids, or vLLM's dict form {"prompt": str} / {"prompt_token_ids": [...]} with optional
# "multi_modal_data": {"image": one image or a list} (encoded file bytes, a path, or a PIL.Image), one image per
# placeholder of the model in the prompt (Gemma 3: <start_of_image>).
Prompt = Union[str, Sequence[int], Dict[str, Any]]

_OWNER = "Engine"


class Tokenizer:
    """The model's tokenizer (engine.tokenizer), with Hugging Face's method names."""

    def __init__(self, engine: "_minfer.Engine"):
        self._engine = engine
        self._info: Optional[Dict[str, Any]] = None

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of text. add_special_tokens: prepend BOS when the tokenizer's config says so (as the
        engine does for text prompts). Special-token text such as "<|im_start|>" becomes its id."""
        _checks.as_str("Tokenizer.encode", "text", text)
        _checks.as_bool("Tokenizer.encode", "add_special_tokens", add_special_tokens)
        return self._engine.tokenizer_encode(text, add_special_tokens, True)

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Text of token ids (special tokens such as BOS left out when skip_special_tokens)."""
        ids = _checks.as_token_ids("Tokenizer.decode", "token_ids", token_ids)
        _checks.as_bool("Tokenizer.decode", "skip_special_tokens", skip_special_tokens)
        return self._engine.tokenizer_decode(ids, skip_special_tokens)

    def _get_info(self) -> Dict[str, Any]:
        if self._info is None:
            self._info = self._engine.tokenizer_info()
        return self._info

    @property
    def vocab_size(self) -> int:
        return self._get_info()["vocab_size"]

    @property
    def bos_token_id(self) -> Optional[int]:
        return self._get_info()["bos_token_id"]

    @property
    def eos_token_ids(self) -> List[int]:
        return list(self._get_info()["eos_token_ids"])

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size})"


class GenerationStream:
    """Iterator over the GenerationChunks of one streamed request. Closing it (or dropping it, or breaking out
    of the loop and letting it go) aborts the request if it is still running."""

    def __init__(self, handle: "_minfer.RequestHandle"):
        self._handle = handle

    @property
    def request_id(self) -> int:
        return self._handle.request_id

    def __iter__(self) -> "GenerationStream":
        return self

    def __next__(self) -> GenerationChunk:
        out = self._handle.next_output()
        if out is None:
            raise StopIteration
        return GenerationChunk._from_cpp(out)

    def close(self) -> None:
        """Aborts the request if it is still running."""
        self._handle.abort()

    def __enter__(self) -> "GenerationStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.abort()


class Engine:
    """A loaded model serving requests (MindIE's / vLLM's LLM engine, on the CPU).

    Args:
        model_path: a Hugging Face directory (config.json + *.safetensors + tokenizer.json), a .gguf file or a
            llama2.c .bin (its tokenizer .bin beside it).
        device: "cpu", the only device minfer runs on.
        fusion_strategy: "auto" fuses operators when the model graph is compiled; "none" runs one op at a time.
        enable_continuous_batching: admit waiting requests at every step (True) or run a batch to completion
            before forming the next (False, static batching).
        page_size: tokens per KV-cache page, a power of two in [8, 256].
        max_model_len: context length per request, prompt + output; None = the model's
            max_position_embeddings, cut to what the KV budget holds for one sequence.
        max_seq_len: MindIE's name for max_model_len (give one or the other).
        quant_config: QuantConfig for int8 weights (W8A16) or int8 weights and activations (W8A8); None = the
            weights as stored.
        num_threads: worker threads for the kernels; None = one per hardware thread.
        kv_cache_memory: bytes for the KV cache (an int, or a str such as "512MiB"); None = kv_cache_memory_fraction
            of the memory free after loading.
        kv_cache_memory_fraction: share of the free memory for the KV cache when kv_cache_memory is None.
        enable_prefix_caching: share KV pages between requests with equal prompt prefixes.
        kv_offload_ram: bytes of host RAM (an int, or a str such as "4GiB") for KV pages evicted from the prefix
            cache, copied back on a later hit instead of recomputed; None = none.
        kv_cache_dir: a folder that keeps KV pages across restarts (each computed prompt page is written through;
            a later prefix hit, in this process or the next, reads it back); None = none.
        kv_cache_dir_size: the most bytes kv_cache_dir may hold (least recently used out first); default 8 GiB.
        mmproj: a llama.cpp projector GGUF giving a GGUF language model its vision tower (llama-server's --mmproj).
        max_image_pixels: images with more pixels are refused (PIL's decompression-bomb limit by default).
        max_num_encoder_tokens: image tokens the vision encoder may encode per step (vLLM's encoder budget);
            0 = max_num_batched_tokens.
        max_num_seqs: most requests running at once.
        max_num_batched_tokens: most tokens one step computes (long prompts are prefilled in chunks).
        kv_layout: "paged", or "contiguous" (max_model_len reserved per request; only to measure paging).
        kv_cache_dtype: "auto" (bf16 for 16-bit and quantized models, f32 for f32 ones), "f32",
            "bf16", "f16", "int8" (a scale per token and head), "fp8_e4m3", or llama.cpp's "q8_0" / "q4_0" (blocks
            of 32 along the head dimension; head_dim must be a multiple of 32). vLLM's --kv-cache-dtype.
        seed: seed of the requests that give none (each gets seed + its request id: a repeatable run whose
            requests still differ); None = such requests draw from the OS's entropy.
        task: "generate" (text), or "embed" (Engine.embed: one pooled, L2-normalised final hidden state per
            prompt; vLLM's pooling runner).
        pooling: with task="embed", "last" (the last position's hidden state) or "mean" (over the prompt).
        speculative_config: speculative decoding, as vLLM's: {"method": "ngram", "num_speculative_tokens": 4,
            "prompt_lookup_min": 2, "prompt_lookup_max": 4} (prompt lookup; the numbers optional with these
            defaults), or {"model": PATH, "num_speculative_tokens": 4} (a draft model with the same vocabulary;
            method "draft_model" implied); "disable_by_batch_size": N turns drafting off in steps running N or more
            sequences. Drafts are checked in the same step, outputs unchanged. None = off.

    Raises:
        TypeError: an unknown keyword, or a value of the wrong type.
        ValueError: a value out of range (minfer.MinferError, a ValueError, when the engine finds it), or a
            device other than "cpu".
        minfer.ModelLoadError: the checkpoint cannot be read (the message starts with its path).
    """

    @_checks.keywords_checked(_OWNER)
    def __init__(self, model_path: Union[str, os.PathLike], *, device: str = "cpu", fusion_strategy: str = "auto",
                 enable_continuous_batching: bool = True, page_size: int = 16, max_model_len: Optional[int] = None,
                 max_seq_len: Optional[int] = None,
                 quant_config: Optional[QuantConfig] = None, num_threads: Optional[int] = None,
                 kv_cache_memory: Union[None, int, str] = None, kv_cache_memory_fraction: float = 0.5,
                 enable_prefix_caching: bool = True, max_num_seqs: int = 256, max_num_batched_tokens: int = 2048,
                 kv_layout: str = "paged", kv_cache_dtype: str = "auto", seed: Optional[int] = None,
                 task: str = "generate", pooling: str = "last", speculative_config: Optional[dict] = None,
                 kv_offload_ram: Union[None, int, str] = None,
                 kv_cache_dir: Union[None, str, os.PathLike] = None,
                 kv_cache_dir_size: Union[int, str] = 8 << 30,
                 mmproj: Union[None, str, os.PathLike] = None, max_image_pixels: int = 89_478_485,
                 max_num_encoder_tokens: int = 0):
        self._engine = None  # so __del__ and close() work when the constructor fails
        self._chat_formats: Dict[str, Any] = {}  # Engine.chat's template and parsers, by chat_template
        _checks.as_str(_OWNER, "device", device)
        if device.lower() != "cpu":
            raise ValueError(f"{_OWNER}: device={device!r} is not supported: minfer runs on the CPU only "
                             "(device='cpu')")
        if not isinstance(model_path, (str, os.PathLike)):
            raise TypeError(f"{_OWNER}: model_path must be a str or os.PathLike, got {type(model_path).__name__}")
        c = _minfer.EngineConfig()
        c.model_path = os.fspath(model_path)
        c.fusion_strategy = _choice("fusion_strategy", fusion_strategy, ("auto", "none"))
        c.kv_layout = _choice("kv_layout", kv_layout, ("paged", "contiguous"))
        c.kv_cache_dtype = _choice("kv_cache_dtype", kv_cache_dtype,
                                   ("auto", "f32", "bf16", "f16", "int8", "fp8_e4m3", "q8_0", "q4_0"))
        c.task = _choice("task", task, ("generate", "embed"))
        c.pooling = _choice("pooling", pooling, ("last", "mean"))
        c.enable_continuous_batching = _checks.as_bool(_OWNER, "enable_continuous_batching",
                                                       enable_continuous_batching)
        c.enable_prefix_caching = _checks.as_bool(_OWNER, "enable_prefix_caching", enable_prefix_caching)
        c.page_size = _checks.as_int(_OWNER, "page_size", page_size, lo=1)
        if max_model_len is not None and max_seq_len is not None:
            raise TypeError(f"{_OWNER}: give max_model_len or its alias max_seq_len, not both")
        if max_model_len is not None:
            c.max_model_len = _checks.as_int(_OWNER, "max_model_len", max_model_len, lo=1)
        if max_seq_len is not None:
            c.max_model_len = _checks.as_int(_OWNER, "max_seq_len", max_seq_len, lo=1)
        if seed is not None:
            c.seed = _checks.as_int(_OWNER, "seed", seed, lo=0, hi=2**64 - 1)
        if num_threads is not None:
            c.num_threads = _checks.as_int(_OWNER, "num_threads", num_threads, lo=0, hi=_checks.INT32_MAX,
                                           what=" (0 = one per hardware thread)")
        if kv_cache_memory is not None:
            c.kv_cache_memory = _checks.as_bytes(_OWNER, "kv_cache_memory", kv_cache_memory)
        c.kv_cache_memory_fraction = _checks.as_float(_OWNER, "kv_cache_memory_fraction", kv_cache_memory_fraction)
        if kv_offload_ram is not None:
            c.kv_offload_ram = _checks.as_bytes(_OWNER, "kv_offload_ram", kv_offload_ram)
        if mmproj is not None:
            if not isinstance(mmproj, (str, os.PathLike)):
                raise TypeError(f"{_OWNER}: mmproj must be a str or os.PathLike, got {type(mmproj).__name__}")
            c.mmproj = os.fspath(mmproj)
        c.max_image_pixels = _checks.as_int(_OWNER, "max_image_pixels", max_image_pixels, lo=1)
        c.max_num_encoder_tokens = _checks.as_int(_OWNER, "max_num_encoder_tokens", max_num_encoder_tokens, lo=0)
        if kv_cache_dir is not None:
            if not isinstance(kv_cache_dir, (str, os.PathLike)):
                raise TypeError(f"{_OWNER}: kv_cache_dir must be a str or os.PathLike, got {type(kv_cache_dir).__name__}")
            c.kv_cache_dir = os.fspath(kv_cache_dir)
        c.kv_cache_dir_size = _checks.as_bytes(_OWNER, "kv_cache_dir_size", kv_cache_dir_size)
        c.max_num_seqs = _checks.as_int(_OWNER, "max_num_seqs", max_num_seqs, lo=1)
        c.max_num_batched_tokens = _checks.as_int(_OWNER, "max_num_batched_tokens", max_num_batched_tokens, lo=1)
        if quant_config is not None:
            if isinstance(quant_config, dict):
                quant_config = QuantConfig(**quant_config)
            if not isinstance(quant_config, QuantConfig):
                raise TypeError(f"{_OWNER}: quant_config must be a minfer.QuantConfig (or a dict of its fields), "
                                f"got {type(quant_config).__name__}")
            c.quant = quant_config._to_cpp()
        self._quant_config = quant_config or QuantConfig()
        if speculative_config is not None:
            c.speculative = _speculative(speculative_config)
        self._engine = _minfer.Engine(c)
        self._tokenizer = Tokenizer(self._engine)

    # ---- embeddings ------------------------------------------------------------------------------------

    def embed(self, prompts: Union[Prompt, Sequence[Prompt]]) -> Union[List[float], List[List[float]]]:
        """The embedding of one prompt (a list of floats) or of each of a batch, on an engine made with
        task="embed": the prompt's final hidden states pooled (the engine's pooling) and L2-normalised.

        Raises:
            minfer.MinferError: the engine generates text (task="generate"), or a prompt cannot be served.
        """
        engine = self._live_engine()
        if engine.config.task != "embed":
            raise _minfer.MinferError("Engine.embed: this engine generates text; make it with task='embed'")
        items, single = _prompt_list(prompts)
        ids = [self._prompt_ids(p) for p in items]
        outs = engine.generate(ids, [SamplingParams(max_new_tokens=1)._cpp] * len(ids))
        vectors = [list(o.embedding) for o in outs]
        return vectors[0] if single else vectors

    # ---- generation ------------------------------------------------------------------------------------

    @_checks.keywords_checked("Engine.generate")
    def generate(self, prompts: Union[Prompt, Sequence[Prompt]],
                 sampling_params: Union[None, SamplingParams, Sequence[SamplingParams]] = None, *,
                 max_new_tokens: Optional[int] = None, temperature: Optional[float] = None,
                 top_k: Optional[int] = None, top_p: Optional[float] = None, min_p: Optional[float] = None,
                 repetition_penalty: Optional[float] = None, presence_penalty: Optional[float] = None,
                 frequency_penalty: Optional[float] = None, seed: Optional[int] = None,
                 stop: Union[None, str, Sequence[str]] = None, stop_token_ids: Optional[Sequence[int]] = None,
                 ignore_eos: Optional[bool] = None,
                 stream: bool = False) -> Union[GenerationResult, List[GenerationResult], GenerationStream]:
        """Generates text for one prompt or a batch, blocking until all have finished.

        Args:
            prompts: a str, a list of token ids, or a list of either (run together as one batch).
            sampling_params: a SamplingParams for every prompt, or a list with one per prompt.
            max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,
            frequency_penalty, seed, stop, stop_token_ids, ignore_eos: SamplingParams fields; a keyword given
                here overrides sampling_params. Defaults are SamplingParams' (max_new_tokens=50,
                temperature=1.0, the rest off).
            stream: return a GenerationStream of chunks instead (one prompt only), as generate_stream().

        Returns:
            A GenerationResult for a single prompt (a str or a list of ints), a list of them (prompt order) for
            a list of prompts.

        Raises:
            ValueError (minfer.MinferError): an empty or too long prompt, a token id outside the vocabulary, a
                sampling value out of range, the engine closed or failing.
        """
        overrides = _overrides(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                               min_p=min_p, repetition_penalty=repetition_penalty, presence_penalty=presence_penalty,
                               frequency_penalty=frequency_penalty, seed=seed, stop=stop,
                               stop_token_ids=stop_token_ids, ignore_eos=ignore_eos)
        items, single = _prompt_list(prompts)
        if _checks.as_bool("Engine.generate", "stream", stream):
            if not single:
                raise ValueError("Engine.generate: stream=True takes one prompt (a str or a list of token ids), "
                                 f"got a list of {len(items)} prompts; call generate_stream() for each")
            return self._stream(items[0], sampling_params, overrides)
        params = _params_per_prompt(sampling_params, overrides, len(items))
        engine = self._live_engine()
        ids = [self._prompt_ids(p) for p in items]
        images = [_images_of(p) for p in items]
        outs = engine.generate(ids, [p._cpp for p in params], images if any(images) else [])
        results = [GenerationResult._from_cpp(o, _prompt_of(p)) for o, p in zip(outs, items)]
        return results[0] if single else results

    @_checks.keywords_checked("Engine.generate_stream")
    def generate_stream(self, prompt: Prompt, sampling_params: Optional[SamplingParams] = None, *,
                        max_new_tokens: Optional[int] = None, temperature: Optional[float] = None,
                        top_k: Optional[int] = None, top_p: Optional[float] = None, min_p: Optional[float] = None,
                        repetition_penalty: Optional[float] = None, presence_penalty: Optional[float] = None,
                        frequency_penalty: Optional[float] = None, seed: Optional[int] = None,
                        stop: Union[None, str, Sequence[str]] = None, stop_token_ids: Optional[Sequence[int]] = None,
                        ignore_eos: Optional[bool] = None) -> GenerationStream:
        """Starts one request and returns an iterator over its GenerationChunks (incremental text and token
        ids), as the engine produces them:

            for chunk in engine.generate_stream("Once upon a time", max_new_tokens=64):
                print(chunk.text, end="", flush=True)

        The request is queued (and checked) at once; errors in the prompt or parameters raise here, not at the
        first iteration. Arguments as for generate().
        """
        overrides = _overrides(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                               min_p=min_p, repetition_penalty=repetition_penalty, presence_penalty=presence_penalty,
                               frequency_penalty=frequency_penalty, seed=seed, stop=stop,
                               stop_token_ids=stop_token_ids, ignore_eos=ignore_eos)
        items, single = _prompt_list(prompt)
        if not single:
            raise ValueError(f"Engine.generate_stream takes one prompt (a str or a list of token ids), got a list of "
                             f"{len(items)} prompts")
        return self._stream(items[0], sampling_params, overrides)

    def _stream(self, prompt: Prompt, sampling_params, overrides: Dict[str, Any]) -> GenerationStream:
        if sampling_params is not None and not isinstance(sampling_params, SamplingParams):
            raise TypeError("Engine.generate_stream: sampling_params must be a minfer.SamplingParams, got "
                            f"{type(sampling_params).__name__}")
        params = _params_per_prompt(sampling_params, overrides, 1)[0]
        engine = self._live_engine()
        return GenerationStream(engine.submit(self._prompt_ids(prompt), params._cpp, _images_of(prompt)))

    def _prompt_ids(self, prompt: Prompt) -> List[int]:
        if isinstance(prompt, dict):
            prompt = prompt.get("prompt", prompt.get("prompt_token_ids"))
        if isinstance(prompt, str):
            return self._live_engine().encode_prompt(prompt)
        return prompt  # already checked by _prompt_list

    @_checks.keywords_checked("Engine.chat")
    def chat(self, messages, sampling_params: Union[None, SamplingParams, Sequence[SamplingParams]] = None, *,
             tools: Optional[List[Dict[str, Any]]] = None, tool_choice: Union[None, str, Dict[str, Any]] = None,
             chat_template_kwargs: Optional[Dict[str, Any]] = None, add_generation_prompt: bool = True,
             continue_final_message: bool = False, chat_template: Optional[str] = None):
        """Chat as vLLM's LLM.chat: messages (a list of {"role", "content", ...} dicts, or a list of such
        conversations run together) rendered by the model's chat template (or the Jinja file chat_template) with
        tools (OpenAI's function tools) and chat_template_kwargs (e.g. {"enable_thinking": False}); tool_choice
        "auto", "none", "required" or a named function forces calls as the server does. Returns a ChatResult (a list
        for several conversations): the GenerationResult fields plus content, reasoning_content and tool_calls,
        parsed by the template's formats.

        Raises:
            ValueError (minfer.MinferError): a model without a chat template, or a bad message, tool or field (named).
        """
        from . import chat as chat_module  # noqa: PLC0415  (the chat helpers load with their first use)
        key = chat_template or ""
        if key not in self._chat_formats:
            self._chat_formats[key] = _minfer.ChatFormat(self._live_engine(), key)
        params = _params_per_prompt(sampling_params, {}, 1 if not isinstance(sampling_params, (list, tuple))
                                    else len(sampling_params))
        return chat_module.chat(self._live_engine(), self._chat_formats[key], messages, params, tools=tools,
                                tool_choice=tool_choice, chat_template_kwargs=chat_template_kwargs,
                                add_generation_prompt=add_generation_prompt,
                                continue_final_message=continue_final_message)

    # ---- everything else ----------------------------------------------------------------------------------

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer: encode(text) and decode(token_ids)."""
        self._live_engine()
        return self._tokenizer

    def stats(self) -> Dict[str, Any]:
        """Counters after the last engine step: running/waiting requests, KV pages (total, used, free, cached),
        KV utilisation, prefix-cache hits, preemptions, prompt/generated/computed tokens, steps, ..."""
        return self._live_engine().stats()

    @property
    def config(self) -> Dict[str, Any]:
        """The configuration as the engine resolved it (max_model_len and kv_cache_memory filled in; max_seq_len
        repeats max_model_len under MindIE's name)."""
        c = self._live_engine().config
        return {"model_path": c.model_path, "device": "cpu", "fusion_strategy": c.fusion_strategy,
                "enable_continuous_batching": c.enable_continuous_batching, "page_size": c.page_size,
                "max_model_len": c.max_model_len, "max_seq_len": c.max_model_len, "quant_config": self._quant_config, "num_threads": c.num_threads,
                "kv_cache_memory": c.kv_cache_memory, "kv_cache_memory_fraction": c.kv_cache_memory_fraction,
                "enable_prefix_caching": c.enable_prefix_caching, "max_num_seqs": c.max_num_seqs,
                "max_num_batched_tokens": c.max_num_batched_tokens, "kv_layout": c.kv_layout,
                "kv_cache_dtype": c.kv_cache_dtype, "seed": c.seed, "kv_offload_ram": c.kv_offload_ram,
                "kv_cache_dir": c.kv_cache_dir or None, "kv_cache_dir_size": c.kv_cache_dir_size, "mmproj": c.mmproj or None,
                "speculative_config": None if c.speculative.method == "none" else {
                    "method": c.speculative.method, "model": c.speculative.model or None,
                    "num_speculative_tokens": c.speculative.num_speculative_tokens,
                    "prompt_lookup_min": c.speculative.prompt_lookup_min,
                    "prompt_lookup_max": c.speculative.prompt_lookup_max,
                    "disable_by_batch_size": c.speculative.disable_by_batch_size}}

    def close(self) -> None:
        """Stops the engine: running requests end with finish_reason "abort", later calls raise. Idempotent.
        The model's memory is released when the Engine object goes away."""
        if self._engine is not None:
            self._engine.close()

    @property
    def closed(self) -> bool:
        return self._engine is None or self._engine.closed

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._engine is None:
            return "Engine(<not loaded>)"
        c = self._engine.config
        state = ", closed" if self._engine.closed else ""
        return f"Engine(model_path={c.model_path!r}, max_model_len={c.max_model_len}, page_size={c.page_size}{state})"

    def _live_engine(self) -> "_minfer.Engine":
        if self._engine is None or self._engine.closed:
            raise _minfer.MinferError("the engine is closed: create a new minfer.Engine")
        return self._engine


def _choice(name: str, value, allowed: Tuple[str, ...]) -> str:
    _checks.as_str(_OWNER, name, value)
    if value not in allowed:
        raise ValueError(f"{_OWNER}: {name} must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")
    return value


def _speculative(config) -> "_minfer.SpeculativeConfig":
    name = "speculative_config"
    if not isinstance(config, dict):
        raise TypeError(f"{_OWNER}: {name} must be a dict such as {{'method': 'ngram'}}, got {type(config).__name__}")
    known = ("method", "model", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max",
             "disable_by_batch_size")
    unknown = [k for k in config if k not in known]
    if unknown:
        raise TypeError(f"{_OWNER}: {name} has unknown key(s) {', '.join(map(repr, unknown))}; "
                        f"known: {', '.join(known)}")
    s = _minfer.SpeculativeConfig()
    if "model" in config:
        model = config["model"]
        if not isinstance(model, (str, os.PathLike)):
            raise TypeError(f"{_OWNER}: {name}['model'] must be a path, got {type(model).__name__}")
        s.model = os.fspath(model)
    method = config.get("method", "draft_model" if "model" in config else None)
    if method is None:
        raise TypeError(f"{_OWNER}: {name} needs 'method' ('ngram') or 'model' (a draft model's path)")
    s.method = _choice(f"{name}['method']", method, ("ngram", "draft_model", "none"))
    for key in known[2:5]:
        if key in config:
            setattr(s, key, _checks.as_int(_OWNER, f"{name}['{key}']", config[key], lo=1, hi=64))
    if "disable_by_batch_size" in config:
        s.disable_by_batch_size = _checks.as_int(_OWNER, f"{name}['disable_by_batch_size']",
                                                 config["disable_by_batch_size"], lo=0, hi=_checks.INT32_MAX)
    return s


def _overrides(**fields) -> Dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _prompt_list(prompts) -> Tuple[List[Prompt], bool]:
    """(prompts as a list, whether a single prompt was given). A list of ints is one prompt of token ids."""
    owner = "Engine.generate"
    if hasattr(prompts, "tolist") and hasattr(prompts, "ndim"):  # numpy arrays of token ids
        prompts = prompts.tolist()
    if isinstance(prompts, str):
        return [prompts], True
    if isinstance(prompts, dict):
        return [_prompt_dict(owner, "prompts", prompts)], True
    if not isinstance(prompts, (list, tuple)):
        raise TypeError(f"{owner}: prompts must be a str, a list of token ids, or a list of those, "
                        f"got {type(prompts).__name__}")
    if not prompts:
        raise ValueError(f"{owner}: prompts is empty: give a str, a list of token ids, or a list of those")
    def is_scalar(p) -> bool:  # an int (or numpy integer), not a prompt
        return (not isinstance(p, (str, list, tuple, dict)) and not hasattr(p, "tolist")) or getattr(p, "ndim", None) == 0

    if all(is_scalar(p) for p in prompts):
        return [_checks.as_token_ids(owner, "prompts", prompts)], True
    items: List[Prompt] = []
    for i, p in enumerate(prompts):
        if isinstance(p, dict):
            items.append(_prompt_dict(owner, f"prompts[{i}]", p))
        elif isinstance(p, str):
            items.append(p)
        else:
            items.append(_checks.as_token_ids(owner, f"prompts[{i}]", p))
    return items, False


def _prompt_dict(owner: str, name: str, p: Dict[str, Any]) -> Dict[str, Any]:
    """vLLM's prompt dict, checked: exactly one of "prompt" (str) and "prompt_token_ids", and "multi_modal_data"."""
    unknown = set(p) - {"prompt", "prompt_token_ids", "multi_modal_data"}
    if unknown:
        raise ValueError(f"{owner}: {name} has unknown keys {sorted(unknown)} (known: prompt, prompt_token_ids, "
                         "multi_modal_data)")
    if ("prompt" in p) == ("prompt_token_ids" in p):
        raise ValueError(f"{owner}: {name} needs exactly one of \"prompt\" and \"prompt_token_ids\"")
    out: Dict[str, Any] = {}
    if "prompt" in p:
        if not isinstance(p["prompt"], str):
            raise TypeError(f"{owner}: {name}[\"prompt\"] must be a str, got {type(p['prompt']).__name__}")
        out["prompt"] = p["prompt"]
    else:
        out["prompt_token_ids"] = _checks.as_token_ids(owner, f"{name}[\"prompt_token_ids\"]", p["prompt_token_ids"])
    mm = p.get("multi_modal_data") or {}
    if not isinstance(mm, dict) or set(mm) - {"image"}:
        raise ValueError(f"{owner}: {name}[\"multi_modal_data\"] takes {{\"image\": ...}} only")
    images = mm.get("image", [])
    images = images if isinstance(images, (list, tuple)) else [images]
    out["images"] = [_image_bytes(owner, f"{name}[\"multi_modal_data\"][\"image\"][{j}]", im)
                     for j, im in enumerate(images)]
    return out


def _image_bytes(owner: str, name: str, image) -> bytes:
    """An image as its encoded file: bytes as given, a path read, a PIL.Image saved as PNG (lossless)."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    if isinstance(image, (str, os.PathLike)):
        with open(image, "rb") as f:
            return f.read()
    if hasattr(image, "save") and hasattr(image, "mode"):  # a PIL.Image, without importing PIL
        import io
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return buf.getvalue()
    raise TypeError(f"{owner}: {name} must be image file bytes, a path or a PIL.Image, got {type(image).__name__}")


def _prompt_of(prompt: Prompt):
    """What a result reports as its prompt: the text or ids, without the images."""
    return prompt.get("prompt", prompt.get("prompt_token_ids")) if isinstance(prompt, dict) else prompt


def _images_of(prompt: Prompt) -> List[bytes]:
    return prompt.get("images", []) if isinstance(prompt, dict) else []


def _params_per_prompt(sampling_params, overrides: Dict[str, Any], n: int) -> List[SamplingParams]:
    owner = "Engine.generate"
    if sampling_params is None:
        base = [SamplingParams(**overrides)] * n
        return base
    if isinstance(sampling_params, SamplingParams):
        one = sampling_params.replace(**overrides) if overrides else sampling_params
        return [one] * n
    if isinstance(sampling_params, (list, tuple)):
        if len(sampling_params) != n:
            raise ValueError(f"{owner}: {len(sampling_params)} sampling_params for {n} prompts: give one "
                             "SamplingParams, or one per prompt")
        out = []
        for i, p in enumerate(sampling_params):
            if not isinstance(p, SamplingParams):
                raise TypeError(f"{owner}: sampling_params[{i}] must be a minfer.SamplingParams, "
                                f"got {type(p).__name__}")
            out.append(p.replace(**overrides) if overrides else p)
        return out
    raise TypeError(f"{owner}: sampling_params must be a minfer.SamplingParams or a list of them, "
                    f"got {type(sampling_params).__name__}")


class LLM(Engine):
    """vLLM's spelling of Engine: LLM(model=...) is Engine(model_path=...), every other keyword as Engine's."""

    def __init__(self, model: Union[str, os.PathLike], **kwargs):
        if "model_path" in kwargs:
            raise TypeError("LLM: give the model as model= (LLM's name) or use Engine(model_path=...)")
        super().__init__(model, **kwargs)
