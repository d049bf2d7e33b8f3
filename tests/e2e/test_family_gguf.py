"""Every family's GGUF file computes what its Hugging Face directory does: each tiny preset written as GGUF by
gguf-py's GGUFWriter (tests/reference/gguf_py_writer.py: llama.cpp's names, keys and layouts, independent of minfer's
own writer), then minfer's prompt logits and 32 greedy tokens on the file against those on the directory, and
llama.cpp's logits on the same file against minfer's (a second engine reading the same bytes).

Adjustments to the HF copy, so that the GGUF can say the same thing: tiny-llama without its llama3 RoPE scaling (which
llama.cpp's converter bakes into a rope_freqs tensor this writer does not make); tiny-gemma2 and tiny-gemma3 with a window of
8 (the prompt runs past it) and query_pre_attn_scalar = head_dim (GGUF has no key for it; llama.cpp scales by head_dim);
tiny-mistral and tiny-phi3 without their windows (a GGUF Mistral has none; llama.cpp switches Phi-3's off);
tiny-smollm3 with llama.cpp's NoPE rule (every fourth layer; GGUF has no key for it); tiny-gpt-oss with a window of 8
and YaRN's truncate on (llama.cpp rounds the ramp's ends outwards whatever the config says). tiny-phi3
keeps its partial rotary embedding and longrope (its factors as llama.cpp's rope_factors_long/short tensors).
tiny-qwen3.5 (a Qwen3_5ForConditionalGeneration directory, its text fields under text_config) is written as
llama.cpp's qwen35: value heads tiled, ssm_a = -exp(A_log), norms but the delta rule's as 1 + w (gguf_py_writer.py);
tiny-qwen3.5-moe likewise as llama.cpp's qwen35moe, its experts stacked per projection, the shared expert and its gate
as *_shexp and ffn_gate_inp_shexp, and no feed_forward_length (its config has no intermediate_size, and llama.cpp's
converter then writes none). tiny-qwen3-next as llama.cpp's qwen3next: in_proj_qkvz split into attn_qkv and attn_gate,
in_proj_ba kept grouped per key head as ssm_ba, value heads in HF's grouped order; tiny-lfm2-moe as lfm2moe (the
expert bias as exp_probs_b, expert_gating_func sigmoid, leading_dense_block_count); tiny-nemotron-h as nemotron_h (the
layer kinds in per-layer head_count_kv and feed_forward_length lists, q/k rows permuted per head as the converter
does, which leaves a model without RoPE unchanged); tiny-granite-4.0-h as granitehybrid (in_proj whole, the
multipliers as keys, stacked experts and the shared MLP). Both Mamba2 presets have a vocabulary padded to a multiple
of 8, as llama.cpp's converter pads theirs.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import (REFERENCE_DIR, ids_arg, read_config, read_ids,  # noqa: F401 (puts tests/reference on sys.path)
                      tokenization_mismatches, vocab_test_texts)

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is in the project venv (scripts/setup-venv.sh)")
gguf_py_writer = pytest.importorskip("gguf_py_writer", reason="gguf is in the project venv (scripts/setup-venv.sh)")

PROMPT = ("The little robot walked slowly through the quiet garden, looking at every flower it passed. "
          "It had never seen so many colours before.")
STEPS = 32


def engine(minfer, model, ids, tmp_path, tag):
    logits, out = tmp_path / f"{tag}.f32", tmp_path / f"{tag}.ids"
    # A 256-token context, as llama.cpp's below (tiny-phi3's longrope picks its short factors for it), and an f32 KV
    # cache as llama.cpp's below (a GGUF file's default is bf16).
    minfer.run("generate", "--model", model, "--prompt-ids", ids_arg(ids), "-n", STEPS, "--temperature", 0,
               "--ignore-eos", "--dump-prompt-logits", logits, "--ids-out", out, "--max-model-len", 256,
               "--kv-cache-dtype", "f32")
    return np.fromfile(logits, dtype="<f4").reshape(len(ids), -1), read_ids(out)


def llamacpp_logits(path, ids):
    """llama.cpp's logits of every prompt position on the file (f32 KV cache, a 256-token context as minfer's)."""
    llama = llama_cpp.Llama(model_path=str(path), n_ctx=256, logits_all=True, type_k=0, type_v=0, verbose=False)
    llama.eval(ids)
    return np.array(llama.scores[:len(ids)], dtype=np.float32), llama


def gguf_matches_hf_directory(minfer, hf, config, tmp_path):
    """Writes `config` into the HF copy `hf`, the copy as GGUF with gguf-py, and asserts minfer computes the same
    prompt logits (1e-5 of the largest) and greedy ids on both. Returns the file, the ids and the two logits."""
    (hf / "config.json").write_text(json.dumps(config, indent=2))
    path = tmp_path / "model.gguf"
    gguf_py_writer.write(str(hf), str(path))
    ids = minfer.tokenize(hf / "tokenizer.json", PROMPT)
    from_hf, hf_ids = engine(minfer, hf, ids, tmp_path, "hf")
    from_gguf, gguf_ids = engine(minfer, path, ids, tmp_path, "gguf")
    assert np.abs(from_gguf - from_hf).max() <= 1e-5 * np.abs(from_hf).max()
    assert gguf_ids == hf_ids
    return path, ids, from_hf, from_gguf


@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3", "tiny-gemma2", "tiny-gemma3",
                                    "tiny-phi3", "tiny-qwen3-moe", "tiny-mixtral", "tiny-smollm3", "tiny-olmo2",
                                    "tiny-olmo3", "tiny-granite", "tiny-gpt-oss", "tiny-qwen3.5", "tiny-qwen3.5-moe",
                                    "tiny-lfm2", "tiny-qwen3-next", "tiny-lfm2-moe", "tiny-nemotron-h",
                                    "tiny-granite-4.0-h"])
def test_gguf_from_gguf_py_matches_hf_directory(minfer, tiny_models, preset, tmp_path):
    hf = tmp_path / "hf"
    shutil.copytree(tiny_models(preset, "f32"), hf)
    config = read_config(hf)
    if preset == "tiny-llama":
        config["rope_scaling"] = None
    if preset == "tiny-mistral":
        config["sliding_window"] = None  # a GGUF Mistral has no window (gguf_py_writer.py)
    if preset == "tiny-phi3":
        config["sliding_window"] = None  # llama.cpp switches Phi-3's window off (test_oracle_hf.py covers it)
    if preset in ("tiny-gemma2", "tiny-gemma3"):
        config.update(sliding_window=8, query_pre_attn_scalar=config["head_dim"])
    if preset == "tiny-olmo3":
        config.update(sliding_window=8)
    if preset == "tiny-gpt-oss":  # llama.cpp always rounds YaRN's ramp outwards (GGUF has no key for truncate)
        config.update(sliding_window=8)
        config["rope_scaling"]["truncate"] = True
    if preset == "tiny-smollm3":  # GGUF has no key for the NoPE layers: llama.cpp takes every fourth
        config.update(no_rope_layer_interval=4, no_rope_layers=[int((i + 1) % 4 != 0) for i in range(4)])
    path, ids, from_hf, from_gguf = gguf_matches_hf_directory(minfer, hf, config, tmp_path)
    scale = np.abs(from_hf).max()

    theirs, llama = llamacpp_logits(path, ids)
    # minfer's tokenize adds the BOS (a multimodal config, Qwen3.5's, names it in text_config)
    text_ids = ids[1:] if ids[0] == (config.get("text_config") or config).get("bos_token_id") else ids
    assert llama.tokenize(PROMPT.encode(), add_bos=False, special=False) == text_ids
    print(f"{preset}: minfer GGUF vs HF {np.abs(from_gguf - from_hf).max():.2e}, llama.cpp vs minfer "
          f"{np.abs(theirs - from_gguf).max() / scale:.2e} (relative to the largest logit)")
    assert np.abs(theirs - from_gguf).max() <= 2e-3 * scale


# YaRN in GGUF (llama.cpp's keys): with transformers' defaults, which llama.cpp computes too (it reads neither the
# betas nor the attention factor from the file), and with every knob stated, which minfer reads from the file.
YARN = {"defaults": dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64),
        "explicit": dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=48, beta_fast=16, beta_slow=2,
                         attention_factor=1.1)}


@pytest.mark.parametrize("name", list(YARN))
def test_yarn_gguf_matches_hf_directory_and_llamacpp(minfer, tiny_models, name, tmp_path):
    hf = tmp_path / "hf"
    shutil.copytree(tiny_models("tiny-qwen3", "f32"), hf)
    config = read_config(hf)
    config["rope_scaling"] = YARN[name]
    path, ids, from_hf, from_gguf = gguf_matches_hf_directory(minfer, hf, config, tmp_path)
    scale = np.abs(from_hf).max()
    if name != "defaults":
        return
    theirs, _ = llamacpp_logits(path, ids)
    print(f"yarn: llama.cpp vs minfer {np.abs(theirs - from_gguf).max() / scale:.2e} (relative to the largest logit)")
    assert np.abs(theirs - from_gguf).max() <= 2e-3 * scale


def llama_quantize(src, dst, ftype: int):
    import ctypes
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.nthread = ftype, 2
    assert llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) == 0


QUANTIZED = [(p, f) for p in ["tiny-mistral", "tiny-gemma2", "tiny-gemma3", "tiny-phi3", "tiny-qwen3-moe",
                               "tiny-mixtral", "tiny-olmo2", "tiny-granite", "tiny-gpt-oss", "tiny-qwen3.5"]
             for f in (7, 15)]
# gpt-oss as its GGUFs ship: llama.cpp's MXFP4_MOE (ftype 38) puts the experts' matrices in MXFP4, the rest in Q8_0.
QUANTIZED.append(("tiny-gpt-oss", 38))


@pytest.mark.parametrize("preset,ftype", QUANTIZED, ids=[f"{p}-{ {7: 'Q8_0', 15: 'Q4_K_M', 38: 'MXFP4_MOE'}[f]}"
                                                         for p, f in QUANTIZED])
def test_quantized_family_gguf_is_as_faithful_as_llamacpp(minfer, tiny_models, preset, ftype, tmp_path):
    """The families in GGUF quant types: the gguf-py file quantized by llama.cpp itself (64-wide rows are not whole
    256-blocks, so Q4_K_M falls back to the 32-blocks types llama.cpp picks for them), then minfer and llama.cpp on
    that file, each against the unquantized model (minfer on the f32 directory, which test_oracle_hf.py checks against
    PyTorch). Both engines round activations to int8 blocks for these weights, and on random tiny models with flat
    logits (and MoE routing that such rounding can flip) that moves logits by a few percent; what is asserted:
    minfer's mean per-row error against the unquantized logits is at most 1.5x llama.cpp's, and the two engines' logits
    on the quantized file within 5% of each other (mean per row)."""
    hf = tmp_path / "hf"
    shutil.copytree(tiny_models(preset, "f32"), hf)
    config = read_config(hf)
    config["sliding_window"] = None if preset in ("tiny-mistral", "tiny-phi3") else config.get("sliding_window")
    if preset in ("tiny-gemma2", "tiny-gemma3"):
        config["query_pre_attn_scalar"] = config["head_dim"]
    if preset == "tiny-gpt-oss":
        config["rope_scaling"]["truncate"] = True  # as llama.cpp computes YaRN
    (hf / "config.json").write_text(json.dumps(config, indent=2))
    f32, quantized = tmp_path / "f32.gguf", tmp_path / "quantized.gguf"
    gguf_py_writer.write(str(hf), str(f32))
    llama_quantize(f32, quantized, ftype)
    if ftype == 38:
        types = {t.name: t.tensor_type.name for t in gguf_py_writer.gguf.GGUFReader(quantized).tensors}
        assert types["blk.0.ffn_gate_exps.weight"] == types["blk.0.ffn_down_exps.weight"] == "MXFP4", types
    ids = minfer.tokenize(hf / "tokenizer.json", PROMPT)
    exact, _ = engine(minfer, hf, ids, tmp_path, "f32")
    ours, _ = engine(minfer, quantized, ids, tmp_path, "q")
    theirs, _ = llamacpp_logits(quantized, ids)
    scale = np.abs(exact).max(axis=1)
    err_ours = float((np.abs(ours - exact).max(axis=1) / scale).mean())
    err_theirs = float((np.abs(theirs - exact).max(axis=1) / scale).mean())
    err_between = float((np.abs(ours - theirs).max(axis=1) / scale).mean())
    print(f"{preset} ftype {ftype}: mean row error against the f32 model: minfer {err_ours:.2e}, llama.cpp "
          f"{err_theirs:.2e}; between them {err_between:.2e}")
    assert err_ours <= 1.5 * err_theirs
    assert err_between <= 0.05  # the two engines on the same quantized bytes (measured up to 2.4e-2)


def test_gpt4o_pre_tokenizer_matches_llamacpp(minfer, tiny_models, shared_dir, tmp_path):
    """gpt-oss's GGUFs name llama.cpp's "gpt-4o" pre-tokenizer (o200k's split): the tiny model's byte-level vocabulary
    written with that name, then minfer's and llama.cpp's tokenization of llama.cpp's tokenizer test texts (Unicode,
    digits, whitespace runs, contractions) and of mixed-case words."""
    path = tmp_path / "gpt4o.gguf"
    gguf_py_writer.write(str(tiny_models("tiny-gpt-oss", "f32")), str(path), pre="gpt-4o")
    texts = vocab_test_texts(shared_dir) + ["HelloWorld WORLDwide's CamelCase iPhone 1234567 DON'T ÉCOLE"]
    mismatches = tokenization_mismatches(minfer, path, texts)
    print(f"gpt-4o pre-tokenizer: {len(texts)} texts, {len(mismatches)} mismatches")
    assert not mismatches, "\n".join(mismatches[:10])


def with_mark_merges(src, dst):
    """A copy of the tiny-qwen3.5 directory `src` whose vocabulary also merges e + U+0301 (a combining acute accent)
    into one token, so that Qwen3.5's split, which keeps the mark with its letter, tokenizes "cafe\u0301"
    differently from Qwen2's, which splits the mark off."""
    shutil.copytree(src, dst)
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]  # GPT-2's byte-to-character map
    others = [b for b in range(256) if b not in printable]
    chars = {**{b: chr(b) for b in printable}, **{b: chr(256 + i) for i, b in enumerate(others)}}
    mark = "".join(chars[b] for b in "\u0301".encode())
    tok = json.loads((dst / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    size = max([*vocab.values(), *(t["id"] for t in tok.get("added_tokens", []))]) + 1
    vocab.update({mark: size, "e" + mark: size + 1})
    pairs = isinstance(tok["model"]["merges"][0], list)
    tok["model"]["merges"] += [[mark[0], mark[1]], ["e", mark]] if pairs else [" ".join(mark), "e " + mark]
    (dst / "tokenizer.json").write_text(json.dumps(tok))
    config = read_config(dst)  # the vocabulary's size where it is read (top level and text_config alike)
    for fields in (config, config.get("text_config") or {}):
        fields["vocab_size"] = size + 2
    (dst / "config.json").write_text(json.dumps(config, indent=2))


def test_qwen35_pre_tokenizer_matches_llamacpp(minfer, tiny_models, shared_dir, tmp_path):
    """Qwen3.5's GGUFs name llama.cpp's "qwen35" pre-tokenizer (Qwen2's split with combining marks kept with the
    letters before them): the tiny model's byte-level vocabulary, plus a merge across a letter and a mark
    (with_mark_merges), written with that name, then minfer's and llama.cpp's tokenization of llama.cpp's tokenizer
    test texts and of text with combining marks (which llama.cpp tokenizes differently under "qwen2")."""
    hf, path = tmp_path / "hf", tmp_path / "qwen35.gguf"
    with_mark_merges(tiny_models("tiny-qwen3.5", "f32"), hf)
    gguf_py_writer.write(str(hf), str(path), pre="qwen35")
    texts = vocab_test_texts(shared_dir) + ["cafe\u0301 na\u0308ive \u0915\u093f\u0924\u093e\u092c x\u0301\u0302y 'S'LL"]
    mismatches = tokenization_mismatches(minfer, path, texts)
    print(f"qwen35 pre-tokenizer: {len(texts)} texts, {len(mismatches)} mismatches")
    assert not mismatches, "\n".join(mismatches[:10])


def write_hf_mxfp4(src, dst):
    """src (an f32 tiny-gpt-oss directory) as OpenAI's own gpt-oss checkpoints store it: each expert projection as
    MXFP4 *_blocks [experts, rows, cols / 32, 16] and *_scales [experts, rows, cols / 32] (rows the outputs, gate and up
    interleaved by row; byte j holds elements 2j and 2j + 1 in its low and high nibbles), quantized by gguf-py's MXFP4
    quantizer and repacked from its block layout (scale byte, then elements j and j + 16 in one byte), U8 in
    safetensors, and quantization_config quant_method mxfp4."""
    import gguf
    from hf_reference import load_hf_tensors
    T = gguf.GGMLQuantizationType.MXFP4
    shutil.copytree(src, dst)
    (dst / "model.safetensors").unlink()
    out = {}
    for name, t in load_hf_tensors(str(src)).items():
        if not name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            out[name] = t.astype(np.float32)
            continue
        rows = np.ascontiguousarray(t.swapaxes(-1, -2))  # [experts, outputs, inputs]
        blocks = gguf.quants.quantize(rows, T).reshape(*rows.shape[:2], -1, 17)
        elements = np.concatenate([blocks[..., 1:] & 0x0F, blocks[..., 1:] >> 4], axis=-1)  # 32 codes in order
        out[name + "_blocks"] = (elements[..., 0::2] | (elements[..., 1::2] << 4)).astype(np.uint8)
        out[name + "_scales"] = np.ascontiguousarray(blocks[..., 0])
    header, blobs, offset = {}, [], 0
    for name, a in out.items():
        a = np.ascontiguousarray(a)
        header[name] = {"dtype": "U8" if a.dtype == np.uint8 else "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(dst / "model.safetensors", "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))
    config = read_config(dst)
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (dst / "config.json").write_text(json.dumps(config, indent=2))


def test_gpt_oss_mxfp4_checkpoint_matches_its_gguf_and_llamacpp(minfer, tiny_models, tmp_path):
    """OpenAI's MXFP4 checkpoint layout loads: minfer computes bit for bit the same on it as on a GGUF holding the same
    MXFP4 blocks (the experts quantized by gguf-py into both), and llama.cpp on that GGUF agrees with minfer as it
    does on llama.cpp's own MXFP4_MOE files."""
    hf = tmp_path / "hf"
    shutil.copytree(tiny_models("tiny-gpt-oss", "f32"), hf)
    config = read_config(hf)
    config["rope_scaling"]["truncate"] = True  # as llama.cpp computes YaRN
    (hf / "config.json").write_text(json.dumps(config, indent=2))
    mxfp4_dir, path = tmp_path / "hf-mxfp4", tmp_path / "mxfp4.gguf"
    write_hf_mxfp4(hf, mxfp4_dir)
    gguf_py_writer.write(str(hf), str(path), experts="mxfp4")
    ids = minfer.tokenize(hf / "tokenizer.json", PROMPT)
    from_hf, hf_ids = engine(minfer, mxfp4_dir, ids, tmp_path, "hf")
    from_gguf, gguf_ids = engine(minfer, path, ids, tmp_path, "gguf")
    assert np.array_equal(from_hf, from_gguf) and hf_ids == gguf_ids
    exact, _ = engine(minfer, hf, ids, tmp_path, "f32")
    theirs, _ = llamacpp_logits(path, ids)
    scale = np.abs(exact).max(axis=1)
    between = float((np.abs(theirs - from_gguf).max(axis=1) / scale).mean())
    quantization = float((np.abs(from_gguf - exact).max(axis=1) / scale).mean())
    print(f"gpt-oss MXFP4: minfer HF == GGUF; llama.cpp vs minfer {between:.2e}; MXFP4 vs f32 {quantization:.2e}")
    assert between <= 0.05
