#!/usr/bin/env python3
"""Writes a Qwen2-architecture Hugging Face directory (config.json, *.safetensors, tokenizer.json) as one GGUF
file with the tensor names, metadata keys and tokenizer layout of llama.cpp's convert_hf_to_gguf.py: matrices
keep their element type (bf16 stays bf16), vectors (norms, biases) are widened to f32 as that converter does
(llama.cpp's CPU additions take no bf16 operand). It exists so that minfer and llama.cpp can be benchmarked on the
very same file (bench/llamacpp_compare.sh); llama.cpp's own converter needs PyPI packages this project cannot
install. Qwen2 only: Llama checkpoints would also need llama.cpp's q/k row permutation.
With q8_0, every matrix is quantized to llama.cpp's Q8_0 (blocks of 32 along a row: an f16 scale
max|x| / 127 and 32 int8 round(x / scale)), as `convert_hf_to_gguf.py --outtype q8_0` writes it.

  bench/hf_to_gguf.py MODEL_DIR OUT.gguf [keep|q8_0]
"""
import glob
import json
import os
import struct
import sys

import numpy as np

GGUF_VERSION = 3
ALIGNMENT = 32
# GGUF metadata value types and tensor types (ggml.h / gguf.h).
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
GGML_TYPES = {"F32": 0, "F16": 1, "Q8_0": 8, "BF16": 30}
Q8_0_BLOCK = 32  # elements per Q8_0 block: 2 bytes of f16 scale + 32 int8
# llama.cpp token types.
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED = 1, 3, 4, 5


def fail(msg):
    sys.exit(f"hf_to_gguf: {msg}")


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    if vtype == T_UINT32:
        return struct.pack("<I", value)
    if vtype == T_INT32:
        return struct.pack("<i", value)
    if vtype == T_FLOAT32:
        return struct.pack("<f", value)
    if vtype == T_BOOL:
        return struct.pack("<?", value)
    if vtype == T_STRING:
        return gguf_string(value)
    elem_type, items = value
    return struct.pack("<IQ", elem_type, len(items)) + b"".join(gguf_value(elem_type, v) for v in items)


def tensor_name(hf):
    """HF name -> llama.cpp's GGUF name (None: not a weight llama.cpp loads)."""
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf]
    parts = hf.split(".")
    if len(parts) < 5 or parts[:2] != ["model", "layers"]:
        return None
    layer, rest = parts[2], ".".join(parts[3:])
    per_layer = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
                 "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
                 "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
                 "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
                 "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    return f"blk.{layer}.{per_layer[rest]}" if rest in per_layer else None


def read_tensors(model_dir, outtype):
    """[(gguf name, ggml type, HF shape, file, byte offset, byte length, source type)] from every safetensors
    file; vectors get ggml type F32 whatever their source type."""
    files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    if not files:
        fail(f"{model_dir}: no *.safetensors files")
    out = []
    for path in files:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for hf, info in header.items():
            if hf == "__metadata__":
                continue
            name = tensor_name(hf)
            if name is None:
                fail(f"{path}: tensor '{hf}' is not a Qwen2 weight")
            if info["dtype"] not in GGML_TYPES:
                fail(f"{path}: tensor '{hf}' has type {info['dtype']} (have F32, F16, BF16)")
            begin, end = info["data_offsets"]
            ggml_type = GGML_TYPES["F32"] if len(info["shape"]) == 1 else GGML_TYPES[info["dtype"]]
            if outtype == "q8_0" and len(info["shape"]) == 2:
                if info["shape"][1] % Q8_0_BLOCK:
                    fail(f"{path}: tensor '{hf}' rows of {info['shape'][1]} are not whole Q8_0 blocks")
                ggml_type = GGML_TYPES["Q8_0"]
            out.append((name, ggml_type, info["shape"], path, 8 + n + begin, end - begin, info["dtype"]))
    return out


def out_bytes(ggml_type, shape):
    if ggml_type == GGML_TYPES["Q8_0"]:
        return int(np.prod(shape)) // Q8_0_BLOCK * (2 + Q8_0_BLOCK)
    elem = 4 if ggml_type == GGML_TYPES["F32"] else 2
    return elem * int(np.prod(shape))


def to_f32(raw, source):
    if source == "F32":
        return np.frombuffer(raw, dtype="<f4")
    if source == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype("<u4") << 16).view("<f4")
    return np.frombuffer(raw, dtype="<f2").astype("<f4")


def widen_to_f32(raw, source):
    return to_f32(raw, source).tobytes()


def quantize_q8_0(raw, source):
    x = to_f32(raw, source).reshape(-1, Q8_0_BLOCK)
    scale = np.abs(x).max(axis=1) / 127.0
    inv = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale > 0)
    q = np.rint(x * inv[:, None]).astype(np.int8)
    blocks = np.empty(len(x), dtype=[("d", "<f2"), ("qs", "i1", Q8_0_BLOCK)])
    blocks["d"] = scale.astype("<f2")
    blocks["qs"] = q
    return blocks.tobytes()


def copy_bytes(src, dst, length, path):
    while length:
        chunk = src.read(min(length, 64 << 20))
        if not chunk:
            fail(f"{path}: truncated tensor data")
        dst.write(chunk)
        length -= len(chunk)


def tokenizer_metadata(model_dir, vocab_size):
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    if tok["model"]["type"] != "BPE":
        fail("tokenizer.json: only byte-level BPE tokenizers (gpt2 in GGUF) are written")
    tokens = {i: t for t, i in tok["model"]["vocab"].items()}
    types = {i: TOKEN_NORMAL for i in tokens}
    for added in tok.get("added_tokens", []):
        tokens[added["id"]] = added["content"]
        types[added["id"]] = TOKEN_CONTROL if added.get("special") else TOKEN_USER_DEFINED
    if max(tokens) >= vocab_size:
        fail(f"tokenizer.json has token id {max(tokens)} past the model's vocab_size {vocab_size}")
    # The embedding has rows past the tokenizer's last id: llama.cpp's converter names them [PADn], unused.
    names = [tokens.get(i, f"[PAD{i}]") for i in range(vocab_size)]
    kinds = [types.get(i, TOKEN_UNUSED) for i in range(vocab_size)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    meta = [("tokenizer.ggml.model", T_STRING, "gpt2"), ("tokenizer.ggml.pre", T_STRING, "qwen2"),
            ("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, names)),
            ("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, kinds)),
            ("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges))]
    config_path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            tcfg = json.load(f)
        ids = {t: i for i, t in enumerate(names)}
        for key, field in (("eos", "eos_token"), ("padding", "pad_token"), ("bos", "bos_token")):
            value = tcfg.get(field)
            if isinstance(value, dict):
                value = value.get("content")
            if value in ids:
                meta.append((f"tokenizer.ggml.{key}_token_id", T_UINT32, ids[value]))
        meta.append(("tokenizer.ggml.add_bos_token", T_BOOL, bool(tcfg.get("add_bos_token", False))))
        if isinstance(tcfg.get("chat_template"), str):
            meta.append(("tokenizer.chat_template", T_STRING, tcfg["chat_template"]))
    return meta


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] not in ("keep", "q8_0")):
        sys.exit(__doc__)
    model_dir, out_path = sys.argv[1], sys.argv[2]
    outtype = sys.argv[3] if len(sys.argv) == 4 else "keep"
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "qwen2":
        fail(f"{model_dir}/config.json: model_type '{cfg.get('model_type')}' (only qwen2 is written)")
    arch = "qwen2"
    meta = [("general.architecture", T_STRING, arch), ("general.name", T_STRING, os.path.basename(model_dir.rstrip("/"))),
            (f"{arch}.block_count", T_UINT32, cfg["num_hidden_layers"]),
            (f"{arch}.context_length", T_UINT32, cfg["max_position_embeddings"]),
            (f"{arch}.embedding_length", T_UINT32, cfg["hidden_size"]),
            (f"{arch}.feed_forward_length", T_UINT32, cfg["intermediate_size"]),
            (f"{arch}.attention.head_count", T_UINT32, cfg["num_attention_heads"]),
            (f"{arch}.attention.head_count_kv", T_UINT32, cfg.get("num_key_value_heads", cfg["num_attention_heads"])),
            (f"{arch}.rope.freq_base", T_FLOAT32, float(cfg.get("rope_theta", 10000.0))),
            (f"{arch}.attention.layer_norm_rms_epsilon", T_FLOAT32, float(cfg["rms_norm_eps"]))]
    meta += tokenizer_metadata(model_dir, cfg["vocab_size"])
    meta.append(("general.alignment", T_UINT32, ALIGNMENT))
    tensors = read_tensors(model_dir, outtype)

    header = bytearray(b"GGUF" + struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(meta)))
    for key, vtype, value in meta:
        header += gguf_string(key) + struct.pack("<I", vtype) + gguf_value(vtype, value)
    offset = 0
    for name, ggml_type, shape, _, _, _, _ in tensors:
        dims = list(reversed(shape))  # GGUF lists the fastest-varying dimension first
        header += gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        header += struct.pack("<IQ", ggml_type, offset)
        offset += (out_bytes(ggml_type, shape) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    header += b"\0" * (-len(header) % ALIGNMENT)
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as out:
        out.write(header)
        for _, ggml_type, shape, path, begin, length, source in tensors:
            with open(path, "rb") as f:
                f.seek(begin)
                if ggml_type == GGML_TYPES["Q8_0"]:
                    out.write(quantize_q8_0(f.read(length), source))
                elif ggml_type == GGML_TYPES["F32"] and source != "F32":
                    data = widen_to_f32(f.read(length), source)
                    if len(data) != out_bytes(ggml_type, shape):
                        fail(f"{path}: truncated tensor data")
                    out.write(data)
                else:
                    copy_bytes(f, out, length, path)
            out.write(b"\0" * (-out_bytes(ggml_type, shape) % ALIGNMENT))
    os.replace(tmp, out_path)
    print(f"wrote {out_path}: {len(tensors)} tensors, {len(meta)} metadata keys")


if __name__ == "__main__":
    main()
