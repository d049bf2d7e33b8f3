"""Engine construction and the errors of bad options: unknown keywords are TypeErrors naming them, bad values
ValueErrors naming the field, and nothing reaches the engine half-checked."""

from __future__ import annotations

import inspect

import pytest

import minfer
from minfer import Engine, QuantConfig, SamplingParams
from pyapi_support import ENGINE_ARGS


def test_public_names():
    for name in ("Engine", "QuantConfig", "SamplingParams", "GenerationResult", "GenerationChunk", "MinferError",
                 "ModelLoadError"):
        assert hasattr(minfer, name), name
    assert issubclass(minfer.MinferError, ValueError)
    assert issubclass(minfer.ModelLoadError, minfer.MinferError)
    assert minfer.MinferError.__module__ == "minfer"


def test_defaults_are_the_engines():
    """The keyword defaults shown by help(Engine) are EngineConfig's own."""
    cpp = minfer._minfer.EngineConfig()
    sig = inspect.signature(Engine.__init__).parameters
    for name in ("page_size", "kv_cache_memory_fraction", "enable_prefix_caching", "max_num_seqs",
                 "max_num_batched_tokens", "enable_continuous_batching", "fusion_strategy", "kv_layout", "kv_cache_dtype"):
        assert sig[name].default == getattr(cpp, name), name
    assert cpp.max_model_len == 0 and sig["max_seq_len"].default is None
    assert cpp.num_threads == 0 and sig["num_threads"].default is None
    q = QuantConfig()
    assert (q.weight_bits, q.activation_bits, q.symmetric, q.group_size) == (
        cpp.quant.weight_bits, cpp.quant.activation_bits, cpp.quant.symmetric, cpp.quant.group_size)


def test_engine_with_the_issue_arguments(stories_model):
    with Engine(model_path=stories_model, device="cpu", fusion_strategy="auto", enable_continuous_batching=True,
                page_size=32, max_seq_len=256, num_threads=1, kv_cache_memory=4 << 20,
                enable_prefix_caching=True) as engine:
        c = engine.config
        assert (c["page_size"], c["max_seq_len"], c["num_threads"], c["kv_cache_memory"] > 0) == (32, 256, 1, True)
        assert c["fusion_strategy"] == "auto" and c["enable_continuous_batching"] is True
        assert "stories260K.bin" in repr(engine)
    assert engine.closed


def test_kv_cache_dtype(stories_model):
    with Engine(model_path=stories_model, max_seq_len=128, num_threads=1, kv_cache_memory=4 << 20) as f32:
        assert f32.config["kv_cache_dtype"] == "f32"  # auto: an f32 model keeps an f32 cache
        want = f32.generate("Once upon a time", max_new_tokens=8, temperature=0).token_ids
    with Engine(model_path=stories_model, max_seq_len=128, num_threads=1, kv_cache_memory=4 << 20,
                kv_cache_dtype="bf16") as bf16:
        assert bf16.config["kv_cache_dtype"] == "bf16"
        got = bf16.generate("Once upon a time", max_new_tokens=8, temperature=0).token_ids
    assert len(got) == 8 and got[:2] == want[:2]  # bf16 rounding may change later greedy picks
    for kv in ("int8", "fp8_e4m3", "f16"):  # stories260K's head_dim is 8: the per-token scaled types apply
        with Engine(model_path=stories_model, max_seq_len=128, num_threads=1, kv_cache_memory=4 << 20,
                    kv_cache_dtype=kv) as quantized:
            assert quantized.config["kv_cache_dtype"] == kv
            assert len(quantized.generate("Once upon a time", max_new_tokens=8, temperature=0).token_ids) == 8
    with pytest.raises(Exception, match="head_dim is 8"):  # llama.cpp's blocks of 32 do not fit
        Engine(model_path=stories_model, max_seq_len=128, num_threads=1, kv_cache_memory=4 << 20,
               kv_cache_dtype="q4_0")


def test_kv_tiers(stories_model, tmp_path):
    """kv_cache_dir keeps a prompt's pages across engines: a second engine on the folder finds them (stats and the
    output's cached tokens) and gives the same greedy tokens; kv_offload_ram sizes the RAM tier."""
    prompt = "Once upon a time, there was a little girl named Lily. " * 6
    args = dict(model_path=stories_model, max_seq_len=256, num_threads=1, kv_cache_memory=4 << 20,
                kv_cache_dir=tmp_path, kv_offload_ram="16MiB")
    with Engine(**args) as first:
        assert first.config["kv_cache_dir"] == str(tmp_path) and first.config["kv_offload_ram"] == 16 << 20
        assert first.config["kv_cache_dir_size"] == 8 << 30
        want = first.generate(prompt, max_new_tokens=8, temperature=0)
    assert any(p.suffix == ".kv" for p in tmp_path.rglob("*"))
    with Engine(**args) as second:
        got = second.generate(prompt, max_new_tokens=8, temperature=0)
        stats = second.stats()
    assert got.token_ids == want.token_ids
    assert stats["disk_tier"]["enabled"] and stats["disk_tier"]["hit_tokens"] > 0
    assert stats["ram_tier"]["enabled"]
    with pytest.raises(ValueError, match="kv_cache_dir_size"):
        Engine(**{**args, "kv_cache_dir_size": 1000})
    with pytest.raises(TypeError, match="kv_cache_dir"):
        Engine(**{**args, "kv_cache_dir": 5})


def test_unknown_keyword_names_it(stories_model):
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'page_sise' \(did you mean 'page_size'\?\)"):
        Engine(model_path=stories_model, page_sise=16)
    with pytest.raises(TypeError, match="'max_new_token'.*did you mean 'max_new_tokens'"):
        SamplingParams(max_new_token=5)
    with pytest.raises(TypeError, match="'weight_bit'.*did you mean 'weight_bits'"):
        QuantConfig(weight_bit=8)


def test_unknown_generate_keyword_names_it(engine):
    with pytest.raises(TypeError, match="Engine.generate.*'max_token'"):
        engine.generate("Once", max_token=5)
    with pytest.raises(TypeError, match="Engine.generate_stream.*'temprature'.*'temperature'"):
        engine.generate_stream("Once", temprature=0)


def test_device_other_than_cpu(stories_model):
    with pytest.raises(ValueError, match=r"device='cuda' is not supported: minfer runs on the CPU only"):
        Engine(model_path=stories_model, device="cuda")


@pytest.mark.parametrize("field, value, error, pattern", [
    ("fusion_strategy", "fast", ValueError, r"fusion_strategy must be one of 'auto', 'none', got 'fast'"),
    ("kv_layout", "flat", ValueError, "kv_layout must be one of"),
    ("kv_cache_dtype", "f8", ValueError, r"kv_cache_dtype must be one of 'auto', 'f32', 'bf16', 'f16', 'int8', "
                                         r"'fp8_e4m3', 'q8_0', 'q4_0', got 'f8'"),
    ("page_size", 7, ValueError, r"page_size must be a power of two in \[8, 256\], got 7"),
    ("page_size", "16", TypeError, "page_size must be an int, got str"),
    ("page_size", 16.0, TypeError, "page_size must be an int, got float"),
    ("max_seq_len", 0, ValueError, "max_seq_len must be >= 1, got 0"),
    ("num_threads", -1, ValueError, "num_threads must be >= 0"),
    ("kv_cache_memory", -5, ValueError, "kv_cache_memory must be >= 0"),
    ("kv_cache_memory", "lots", ValueError, "kv_cache_memory must be a byte count"),
    ("kv_cache_memory_fraction", 1.5, ValueError, r"kv_cache_memory_fraction must be in \(0, 1\]"),
    ("max_num_seqs", 0, ValueError, "max_num_seqs must be >= 1"),
    ("enable_prefix_caching", 1, TypeError, "enable_prefix_caching must be True or False"),
    ("quant_config", "int8", TypeError, "quant_config must be a minfer.QuantConfig"),
])
def test_bad_engine_values_name_the_field(stories_model, field, value, error, pattern):
    args = dict(ENGINE_ARGS, **{field: value})
    with pytest.raises(error, match=pattern):
        Engine(model_path=stories_model, **args)


def test_missing_model_is_a_load_error(tmp_path):
    missing = tmp_path / "no-such-model.bin"
    with pytest.raises(minfer.MinferError, match="no-such-model.bin"):
        Engine(model_path=missing, **ENGINE_ARGS)


def test_unsupported_quant_config_raises(stories_model):
    """Values the engine cannot run are refused by the C++ side and surface as MinferError naming the field."""
    with pytest.raises(ValueError, match="weight_bits"):
        Engine(model_path=stories_model, quant_config=QuantConfig(weight_bits=3), **ENGINE_ARGS)
    with pytest.raises(ValueError, match="group_size"):
        Engine(model_path=stories_model, quant_config=QuantConfig(weight_bits=8, group_size=48), **ENGINE_ARGS)


@pytest.mark.parametrize("kwargs, error, pattern", [
    (dict(temperature=-1), ValueError, "temperature must be a finite value >= 0"),
    (dict(temperature=float("nan")), ValueError, "temperature"),
    (dict(top_p=0), ValueError, r"top_p must be in \(0, 1\]"),
    (dict(top_k=-2), ValueError, "top_k must be >= -1"),
    (dict(min_p=2), ValueError, r"min_p must be in \[0, 1\]"),
    (dict(max_new_tokens=0), ValueError, "max_new_tokens must be >= 1"),
    (dict(max_new_tokens=2**40), ValueError, "max_new_tokens must be <="),
    (dict(max_new_tokens=5.0), TypeError, "max_new_tokens must be an int"),
    (dict(presence_penalty=3), ValueError, r"presence_penalty must be in \[-2, 2\]"),
    (dict(seed=-1), ValueError, "seed must be >= 0"),
    (dict(stop=5), TypeError, "stop must be a str or a list of str"),
    (dict(stop=[""]), ValueError, r"stop\[0\] is an empty string"),
    (dict(stop_token_ids=[-3]), ValueError, "not a valid token id"),
])
def test_bad_sampling_values_name_the_field(engine, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        SamplingParams(**kwargs)
    with pytest.raises(error, match=pattern):
        engine.generate("Once upon a time", **kwargs)


def test_bad_prompts(engine):
    with pytest.raises(ValueError, match="prompts is empty"):
        engine.generate([])
    with pytest.raises(TypeError, match="prompts must be a str"):
        engine.generate(42)
    with pytest.raises(minfer.MinferError, match="outside the vocabulary"):
        engine.generate([1, 100000])
    with pytest.raises(minfer.MinferError, match="max_model_len"):
        engine.generate([1] * 600)
    with pytest.raises(ValueError, match="stream=True takes one prompt"):
        engine.generate(["a", "b"], stream=True)
    with pytest.raises(ValueError, match=r"3 sampling_params for 2 prompts"):
        engine.generate(["a", "b"], [SamplingParams()] * 3)
    # A bad prompt in a batch leaves the engine serving the others afterwards.
    with pytest.raises(minfer.MinferError):
        engine.generate(["Once", [1, 100000]], max_new_tokens=4)
    assert len(engine.generate("Once", max_new_tokens=4, temperature=0).token_ids) == 4


def test_closed_engine_refuses_work(stories_model):
    e = Engine(model_path=stories_model, **ENGINE_ARGS)
    e.close()
    e.close()  # idempotent
    with pytest.raises(minfer.MinferError, match="closed"):
        e.generate("Once")
    with pytest.raises(minfer.MinferError, match="closed"):
        e.stats()


def test_vllm_spellings(stories_model):
    """vLLM's names beside MindIE's: SamplingParams(max_tokens=...) and LLM(model=...)."""
    assert SamplingParams(max_tokens=6).max_new_tokens == 6 and SamplingParams(max_new_tokens=6).max_tokens == 6
    assert SamplingParams().max_new_tokens == 50 and SamplingParams(max_tokens=6, max_new_tokens=6).max_tokens == 6
    assert SamplingParams(max_tokens=6).replace(max_new_tokens=9).max_tokens == 9
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=6, max_new_tokens=7)
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    llm = minfer.LLM(model=stories_model, **ENGINE_ARGS)
    try:
        out = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=6))
        assert len(out.token_ids) == 6
    finally:
        llm.close()
    with pytest.raises(TypeError, match="model="):
        minfer.LLM(model=stories_model, model_path=stories_model)
