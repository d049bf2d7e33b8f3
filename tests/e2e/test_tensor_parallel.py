"""Tensor and expert parallel over Open MPI, with real processes: `mpirun -np N minfer ...` and minfer's own
launch (`--tensor-parallel-size N` without mpirun). Greedy ids of every rank count must equal one process's (f32 tiny
models: the split changes only the order of a few sums); the server under TP=2 answers the openai client, streaming
included, exactly as one process does; a rank killed mid-request ends the group with 503 and a non-zero exit; two
ranks in two network namespaces joined by a veth pair run over TCP as two hosts would, and a link that drops ends
them within the timeout."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterator, List

import openai
import pytest

from conftest import MINFER_BIN, read_ids
from serve_process import serve, started

MPIRUN = shutil.which("mpirun")
ROOT = os.geteuid() == 0
PROMPT_IDS = " ".join(str(i) for i in range(1, 41))  # 40 tokens: three 16-token pages


def mpirun_args(ranks: int) -> List[str]:
    assert MPIRUN, "mpirun is not installed (Debian: openmpi-bin; scripts/install-deps.sh installs it)"
    return [MPIRUN, *(["--allow-run-as-root"] if ROOT else []), "-np", str(ranks), "--oversubscribe", "--bind-to",
            "none"]


def run(cmd: List[str], timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\nexit {proc.returncode}\n{proc.stderr[-4000:]}"
    return proc


def generate_ids(tmp: Path, model: Path, *extra, ranks: int = 1, launch: str = "mpirun", tokens: int = 32,
                 prompt: List[str] | None = None) -> List[int]:
    out = tmp / f"ids-{uuid.uuid4().hex}.txt"
    args = [MINFER_BIN, "generate", "-m", model, *(prompt or ["--prompt-ids", PROMPT_IDS]), "-n", tokens,
            "--temperature", "0", "--ids-out", out, "-t", "1", *extra]
    if ranks > 1:
        args += ["--tensor-parallel-size", ranks]
        if launch == "mpirun":
            args = [*mpirun_args(ranks), *args]
    run(args)
    return read_ids(out)


@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3-moe"])
def test_greedy_ids_equal_one_process(preset, tiny_models, tmp_path):
    model = tiny_models(preset, "f32")
    want = generate_ids(tmp_path, model)
    assert len(want) == 32
    for ranks in (2, 4):  # 4 ranks oversubscribe the 2 cores
        assert generate_ids(tmp_path, model, ranks=ranks) == want, f"TP={ranks}"
        if preset == "tiny-qwen3-moe":
            assert generate_ids(tmp_path, model, "--enable-expert-parallel", ranks=ranks) == want, f"EP={ranks}"


@pytest.mark.parametrize("kv", ["bf16", "f16", "int8", "fp8_e4m3", "q8_0", "q4_0"])
def test_kv_types_equal_one_process(kv, tiny_models, tmp_path):
    """Every KV cache type under tensor parallel: each rank quantizes its own heads' K and V as one process would
    (tiny-qwen3: head_dim 32, so llama.cpp's blocks apply)."""
    model = tiny_models("tiny-qwen3", "f32")
    want = generate_ids(tmp_path, model, "--kv-cache-dtype", kv)
    assert generate_ids(tmp_path, model, "--kv-cache-dtype", kv, ranks=2) == want, f"TP=2, {kv}"


HYBRIDS = ["tiny-qwen3.5", "tiny-qwen3.5-moe", "tiny-qwen3-next", "tiny-lfm2", "tiny-lfm2-moe", "tiny-nemotron-h"]


@pytest.mark.parametrize("preset", HYBRIDS)
def test_hybrid_greedy_ids_equal_one_process(preset, tiny_models, tmp_path):
    """The recurrent layers' heads (delta rule, Mamba2) or channels (short conv) split over 2 ranks, each rank keeping
    its heads' state: one process's greedy ids, with the prompt in one chunk and in 16-token chunks (the state carried
    from chunk to chunk on every rank)."""
    model = tiny_models(preset, "f32")
    want = generate_ids(tmp_path, model)
    assert generate_ids(tmp_path, model, ranks=2) == want
    assert generate_ids(tmp_path, model, "--max-num-batched-tokens", "16", ranks=2, launch="self") == want
    if preset in ("tiny-qwen3.5-moe", "tiny-qwen3-next"):
        assert generate_ids(tmp_path, model, "--enable-expert-parallel", ranks=2) == want, "EP=2"


def test_hybrid_refuses_what_does_not_split(tiny_models):
    """Granite 4.0-H's one Mamba2 group normalises across every head: no rank can hold part of it."""
    model = tiny_models("tiny-granite-4.0-h", "f32")
    proc = subprocess.run([str(c) for c in [MINFER_BIN, "generate", "-m", model, "--prompt-ids", "1 2 3", "-n", "4",
                                            "--tensor-parallel-size", "2"]], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert "Mamba2 layers have 1 group(s) (n_groups), which do not divide among 2 ranks" in proc.stderr


def test_self_launch_unfused_and_batched_prefill(tiny_models, tmp_path):
    """minfer starts mpirun itself; the unfused graph and a prefill split in chunks (each step broadcast) agree."""
    model = tiny_models("tiny-qwen3", "f32")
    want = generate_ids(tmp_path, model)
    assert generate_ids(tmp_path, model, "--fusion-strategy", "none", ranks=2, launch="self") == want
    assert generate_ids(tmp_path, model, "--max-num-batched-tokens", "16", ranks=2, launch="self") == want


def test_real_quantized_models(smollm2_gguf, gemma3_gguf, tmp_path):
    """SmolLM2 (9 heads: 3 ranks, Q4_1 split on 32-blocks) and Gemma 3 (1 KV head replicated, Q4_K/Q6_K split on
    256-blocks, sliding-window layers) keep one process's greedy text, on an f32 KV cache: a rounded cache (their
    default bf16) turns the last-bit differences of the row-split GEMMs' summation order into whole rounding steps
    of K and V, which a real model's greedy text can follow (exactness per KV type: test_kv_types_equal_one_process)."""
    prompt = ["--prompt", "The capital of France is", "--kv-cache-dtype", "f32"]
    for model, ranks in ((smollm2_gguf, 3), (gemma3_gguf, 2)):
        want = generate_ids(tmp_path, model, prompt=prompt, tokens=24)
        assert generate_ids(tmp_path, model, prompt=prompt, tokens=24, ranks=ranks, launch="self") == want, model.name


def test_speculative_prompt_lookup_under_tensor_parallel(gemma3_gguf, tmp_path):
    """Verification chunks (the decode token and its drafts, a row each) are ordinary chunks to the other ranks: the
    greedy text of Gemma 3 over 2 ranks with prompt lookup equals that of 2 ranks without it. (Against one process
    this long text can flip a near-tie: the all-reduce sums the heads in another order.)"""
    prompt = ["--prompt", "In the beginning God created the heaven and the earth. And the earth was without form, "
                          "and void. In the beginning God created"]
    want = generate_ids(tmp_path, gemma3_gguf, prompt=prompt, tokens=40, ranks=2, launch="self")
    out = tmp_path / "spec-ids.txt"
    proc = run([MINFER_BIN, "generate", "-m", gemma3_gguf, *prompt, "-n", 40, "--temperature", "0", "--ids-out", out,
                "-t", "1", "--tensor-parallel-size", 2, "--speculative", "ngram"])
    assert read_ids(out) == want
    m = re.search(r"speculative decoding \(ngram\): (\d+) of (\d+) draft tokens accepted", proc.stderr)
    assert m and int(m.group(1)) > 0, proc.stderr[-2000:]


def test_refuses_what_does_not_split(tiny_models, tmp_path):
    """An impossible split is an error naming the field, on every rank, and the run ends (no hang)."""
    model = tiny_models("tiny-llama", "f32")  # 4 heads, 2 KV heads
    cmd = [*mpirun_args(3), MINFER_BIN, "generate", "-m", model, "--prompt-ids", "1 2 3", "-n", "4",
           "--tensor-parallel-size", "3"]
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "4 attention heads, which do not divide among 3 ranks" in proc.stderr
    cmd = [MINFER_BIN, "generate", "-m", model, "--prompt-ids", "1 2 3", "-n", "4", "--tensor-parallel-size", "2",
           "--enable-expert-parallel"]
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "--enable-expert-parallel needs a mixture-of-experts model" in proc.stderr


def completions(url: str, prompts: List[str], stream: bool) -> List[str]:
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)

    def one(prompt: str) -> str:
        if not stream:
            r = client.completions.create(model="m", prompt=prompt, max_tokens=24, temperature=0)
            return r.choices[0].text
        return "".join(c.choices[0].text for c in
                       client.completions.create(model="m", prompt=prompt, max_tokens=24, temperature=0, stream=True)
                       if c.choices)

    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:  # one batch of concurrent sequences
        return list(pool.map(one, prompts))


def test_serve_answers_the_openai_client(tiny_models):
    """serve --tensor-parallel-size 2 (launching its own ranks) answers concurrent completions, streamed and not,
    and chat, with one process's text."""
    model = tiny_models("tiny-qwen3", "f32")
    prompts = [f"Request {i}: the quick brown fox" + " jumps" * i for i in range(6)]
    common = ["--model", model, "--served-model-name", "m", "-t", "1"]
    with serve(MINFER_BIN, *common) as url:
        want = completions(url, prompts, stream=False)
    with serve(MINFER_BIN, *common, "--tensor-parallel-size", "2") as url:
        assert completions(url, prompts, stream=False) == want
        assert completions(url, prompts, stream=True) == want
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                     max_tokens=8, temperature=0, stream=True))
        assert chunks[-1].choices == [] or chunks[-1].choices[0].finish_reason in ("length", "stop", None)


def test_serve_hybrid_prefix_hits_and_speculation(tiny_models):
    """A hybrid under TP=2 in the server: prompts sharing a 48-token prefix (state snapshots every page restored on
    prefix hits) and n-gram speculation (the state after the last accepted draft kept) on every rank as on rank 0
    (StatePool's slot operations replayed), with one process's text."""
    model = tiny_models("tiny-qwen3.5", "f32")
    shared = " ".join(f"word{i}" for i in range(24))
    prompts = [f"{shared} request {i}" + " again" * i for i in range(6)]
    common = ["--model", model, "--served-model-name", "m", "-t", "1", "--state-snapshot-pages", "1",
              "--speculative", "ngram"]
    with serve(MINFER_BIN, *common) as url:
        completions(url, prompts[:1], stream=False)  # the prefix cached: the others hit it
        want = completions(url, prompts, stream=False)
    with serve(MINFER_BIN, *common, "--tensor-parallel-size", "2") as url:
        completions(url, prompts[:1], stream=False)
        assert completions(url, prompts, stream=False) == want


def rank_pids(rank: int) -> List[int]:
    """The processes mpirun started as `rank` (from their environment)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
            exe = os.readlink(d / "exe")
        except OSError:
            continue
        if exe == str(MINFER_BIN.resolve()) and f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            pids.append(int(d.name))
    return pids


def stream_then(url: str, when_streaming, curl_prefix: List[str] = ()) -> tuple[str, float]:
    """Streams a long completion with curl; calls when_streaming() after the first event; returns the whole stream and
    the seconds from that call to its end."""
    body = json.dumps({"model": "m", "prompt": "once upon a time", "max_tokens": 4000, "ignore_eos": True,
                       "temperature": 0, "stream": True})
    curl = subprocess.Popen([*curl_prefix, "curl", "-sN", "--max-time", "120", "-H", "Content-Type: application/json",
                             "-d", body, url + "/v1/completions"], stdout=subprocess.PIPE, text=True)
    assert curl.stdout is not None
    first = curl.stdout.readline()
    assert first.startswith("data: "), first
    when_streaming()
    t0 = time.monotonic()
    rest = curl.stdout.read()
    curl.wait()
    return first + rest, time.monotonic() - t0


def test_rank_killed_mid_request_ends_the_group(tiny_models):
    """Rank 1 killed while a request streams: mpirun stops the group, rank 0 answers the request with a 503 error
    event (service_unavailable; not a hang, not a dropped connection), and the run exits non-zero."""
    model = tiny_models("tiny-qwen3", "f32")
    cmd = [MINFER_BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--model", model, "--served-model-name", "m",
           "-t", "1", "--max-model-len", "8192", "--tensor-parallel-size", "2", "--distributed-timeout", "20"]
    with started(cmd, new_session=True) as (proc, url):
        def kill_rank_1():
            pids = rank_pids(1)
            assert len(pids) == 1, pids
            os.kill(pids[0], signal.SIGKILL)

        stream, seconds = stream_then(url, kill_rank_1)
        assert '"type":"service_unavailable"' in stream.replace(" ", ""), stream[-2000:]  # a 503 error event
        assert "mpirun ends the group when a rank dies" in stream
        assert '"finish_reason":"length"' not in stream.replace(" ", "")  # the error ends it, not a normal finish
        assert seconds < 15
        code = proc.wait(timeout=60)
        assert code != 0


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextlib.contextmanager
def two_hosts(tmp: Path) -> Iterator[Path]:
    """Network namespaces mfA (10.77.0.1) and mfB (10.77.0.2) joined by a veth pair, and the rsh agent mpirun uses
    to start its daemon on 'host' 10.77.0.2 (inside mfB) as it would over ssh."""
    if not ROOT or not shutil.which("ip"):
        pytest.fail("the two-host test makes network namespaces: run as root with iproute2 installed")
    suffix = uuid.uuid4().hex[:6]
    a, b = f"mfA{suffix}", f"mfB{suffix}"
    agent = tmp / "netns-rsh"
    agent.write_text(f"""#!/bin/sh
# mpirun's rsh agent: "agent [options] host command..." runs the command in that host's namespace.
while [ "${{1#-}}" != "$1" ]; do shift; done
case "$1" in 10.77.0.1) ns={a};; 10.77.0.2) ns={b};; *) echo "unknown host $1" >&2; exit 1;; esac
shift
exec ip netns exec "$ns" /bin/sh -c "$*"
""")
    agent.chmod(0o755)
    ip("netns", "add", a)
    ip("netns", "add", b)
    try:
        ip("link", "add", f"va{suffix}", "type", "veth", "peer", "name", f"vb{suffix}")
        ip("link", "set", f"va{suffix}", "netns", a)
        ip("link", "set", f"vb{suffix}", "netns", b)
        ip("-n", a, "addr", "add", "10.77.0.1/24", "dev", f"va{suffix}")
        ip("-n", b, "addr", "add", "10.77.0.2/24", "dev", f"vb{suffix}")
        for ns, dev in ((a, f"va{suffix}"), (b, f"vb{suffix}")):
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "link", "set", dev, "up")
        yield agent
    finally:
        ip("netns", "del", a)
        ip("netns", "del", b)


def two_host_mpirun(agent: Path) -> List[str]:
    ns_a = agent.read_text().split("ns=")[1].split(";")[0]
    return ["ip", "netns", "exec", ns_a, MPIRUN, "--allow-run-as-root", "--host", "10.77.0.1,10.77.0.2", "-np", "2",
            "--mca", "plm_rsh_agent", str(agent), "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include",
            "10.77.0.0/24", "--mca", "oob_tcp_if_include", "10.77.0.0/24"]


def test_two_hosts_over_tcp(tiny_models, tmp_path):
    """Rank 1 in another network namespace reaches rank 0 only over the veth pair (TCP, as across two machines)."""
    model = tiny_models("tiny-qwen3-moe", "f32")
    want = generate_ids(tmp_path, model)
    with two_hosts(tmp_path) as agent:
        ns_b = agent.read_text().split("ns=")[2].split(";")[0]
        before = subprocess.run(["ip", "-n", ns_b, "-s", "-j", "link"], capture_output=True, text=True).stdout
        for extra in ([], ["--enable-expert-parallel"]):
            out = tmp_path / f"ids-{uuid.uuid4().hex}.txt"
            run([*two_host_mpirun(agent), MINFER_BIN, "generate", "-m", model, "--prompt-ids", PROMPT_IDS, "-n", "32",
                 "--temperature", "0", "--ids-out", out, "-t", "1", "--tensor-parallel-size", "2", *extra])
            assert read_ids(out) == want, extra
        after = subprocess.run(["ip", "-n", ns_b, "-s", "-j", "link"], capture_output=True, text=True).stdout

        def rx_bytes(text: str) -> int:
            return sum(l["stats64"]["rx"]["bytes"] for l in json.loads(text) if l["ifname"].startswith("vb"))

        assert rx_bytes(after) - rx_bytes(before) > 10_000  # the activations crossed the link


def test_link_drop_ends_the_group_within_the_timeout(tiny_models, tmp_path):
    """The veth link goes down while a request streams: rank 0's next collective times out (--distributed-timeout 3),
    the request gets a 503 error event, and the run exits non-zero."""
    model = tiny_models("tiny-qwen3", "f32")
    with two_hosts(tmp_path) as agent:
        ns_a = agent.read_text().split("ns=")[1].split(";")[0]
        ns_b = agent.read_text().split("ns=")[2].split(";")[0]
        dev_b = "vb" + ns_b[3:]
        cmd = [*two_host_mpirun(agent), MINFER_BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--model", model,
               "--served-model-name", "m", "-t", "1", "--max-model-len", "8192", "--tensor-parallel-size", "2",
               "--distributed-timeout", "3"]
        with started(cmd, new_session=True) as (proc, url):
            stream, seconds = stream_then(url, lambda: ip("-n", ns_b, "link", "set", dev_b, "down"),
                                          curl_prefix=["ip", "netns", "exec", ns_a])
            assert '"type":"service_unavailable"' in stream.replace(" ", ""), stream[-2000:]  # a 503 error event
            assert "waited" in stream and "a rank died or a link dropped" in stream
            assert seconds < 20
            ip("-n", ns_b, "link", "set", dev_b, "up")  # lets mpirun reach its other daemon to stop it
            assert proc.wait(timeout=90) != 0
