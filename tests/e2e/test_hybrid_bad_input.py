"""The 2026 hybrids' bad checkpoints are refused with an error naming the file and the field or tensor, never a crash:
a config naming an unknown layer kind, a state shape (heads, head width, state size) that does not match the weights,
and a GGUF file missing a recurrent layer's conv or SSM tensor."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import REFERENCE_DIR  # noqa: F401 (puts tests/reference on sys.path)

gguf_py_writer = pytest.importorskip("gguf_py_writer", reason="gguf is in the project venv (scripts/setup-venv.sh)")


def refused(minfer, model) -> str:
    proc = minfer.run("generate", "--model", model, "--prompt-ids", "1 2 3", "-n", 2, check=False)
    assert proc.returncode == 1, f"exit {proc.returncode} (a crash is not a refusal)\n{proc.stderr[-3000:]}"
    return proc.stderr


def edited(tiny_models, tmp_path, preset, edit):
    model = tmp_path / preset
    shutil.copytree(tiny_models(preset, "f32"), model)
    config = json.loads((model / "config.json").read_text())
    edit(config.get("text_config") or config)
    (model / "config.json").write_text(json.dumps(config))
    return model


LAYER_KINDS = [
    ("tiny-qwen3.5", lambda c: c["layer_types"].__setitem__(0, "sliding_attention"),
     'unsupported layer type "sliding_attention" in "layer_types"'),
    ("tiny-lfm2", lambda c: c["layer_types"].__setitem__(0, "mamba"), 'unsupported layer type "mamba"'),
    ("tiny-granite-4.0-h", lambda c: c["layer_types"].__setitem__(0, "conv"), 'unsupported layer type "conv"'),
    ("tiny-nemotron-h", lambda c: c.update(hybrid_override_pattern="M-X" + c["hybrid_override_pattern"][3:]),
     "unsupported layer type 'X' at layer 2"),
    ("tiny-nemotron-h", lambda c: c.update(hybrid_override_pattern="M-E" + c["hybrid_override_pattern"][3:]),
     "Nemotron-H MoE layers"),
]


@pytest.mark.parametrize("case", range(len(LAYER_KINDS)), ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(LAYER_KINDS)])
def test_unknown_layer_kind_names_the_field(minfer, tiny_models, tmp_path, case):
    preset, edit, message = LAYER_KINDS[case]
    err = refused(minfer, edited(tiny_models, tmp_path, preset, edit))
    assert "config.json" in err and message in err, err[-2000:]


STATE_SHAPES = [
    ("tiny-qwen3.5", {"linear_num_value_heads": 8}, "model.language_model.layers.0.linear_attn."),
    ("tiny-qwen3-next", {"linear_num_value_heads": 8}, "model.layers.0.linear_attn.in_proj_qkvz.weight"),
    ("tiny-granite-4.0-h", {"mamba_d_state": 32}, "model.layers.0.mamba.in_proj.weight"),
    ("tiny-nemotron-h", {"mamba_head_dim": 32}, "backbone.layers.0.mixer.in_proj.weight"),
    ("tiny-lfm2", {"conv_L_cache": 5}, "model.layers.0.conv.conv.weight"),
]


@pytest.mark.parametrize("preset,fields,tensor", STATE_SHAPES, ids=[p for p, _, _ in STATE_SHAPES])
def test_state_shape_not_matching_the_weights_names_the_tensor(minfer, tiny_models, tmp_path, preset, fields, tensor):
    err = refused(minfer, edited(tiny_models, tmp_path, preset, lambda c: c.update(fields)))
    assert f"tensor '{tensor}" in err and "expected" in err, err[-2000:]


MISSING = [("tiny-qwen3.5", "blk.0.ssm_conv1d.weight"), ("tiny-qwen3-next", "blk.1.ssm_a"),
           ("tiny-lfm2", "blk.0.shortconv.conv.weight"), ("tiny-nemotron-h", "blk.0.ssm_d"),
           ("tiny-nemotron-h", "blk.3.ssm_in.weight")]


@pytest.mark.parametrize("preset,tensor", MISSING, ids=[f"{p}-{t}" for p, t in MISSING])
def test_gguf_missing_a_recurrent_tensor_names_it(minfer, tiny_models, tmp_path, monkeypatch, preset, tensor):
    write_tensors = gguf_py_writer.write_tensors

    def without(w, arch, cfg, tensors, *rest):
        assert tensor in tensors, sorted(tensors)
        write_tensors(w, arch, cfg, {k: v for k, v in tensors.items() if k != tensor}, *rest)

    monkeypatch.setattr(gguf_py_writer, "write_tensors", without)
    path = tmp_path / "model.gguf"
    gguf_py_writer.write(str(tiny_models(preset, "f32")), str(path))
    err = refused(minfer, path)
    assert "model.gguf" in err and f"missing tensor '{tensor}'" in err, err[-2000:]
