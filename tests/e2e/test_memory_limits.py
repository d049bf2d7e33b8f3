"""A KV budget against the memory a container really has (issue 42): a server started inside a memory cgroup with a
1 GiB limit refuses --kv-cache-memory 40GiB at start (the numbers and the knobs in the error, no server that the
kernel would kill once traffic fills the pool), and without a budget takes its default fraction of the cgroup's
room, not of the host's RAM. A real cgroup (v1 or v2) where this machine lets the test make one; otherwise a
simulated limit (MINFER_CGROUP_MEMORY_DIR), which the test prints."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

LIMIT = 1 << 30


def make_cgroup() -> Path | None:
    """A fresh memory cgroup limited to LIMIT, or None where this machine does not allow one."""
    name = f"minfer-test-{uuid.uuid4().hex[:8]}"
    for root, limit_file in ((Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
                             (Path("/sys/fs/cgroup"), "memory.max")):
        if not (root / "cgroup.procs").exists():
            continue
        try:
            (root / name).mkdir()
        except OSError:
            continue
        try:
            (root / name / limit_file).write_text(str(LIMIT))
            return root / name
        except OSError:
            (root / name).rmdir()
    return None


@pytest.fixture
def limited(tmp_path):
    """(env, preexec) that run a command under a 1 GiB limit, real or simulated; the cgroup is removed after."""
    group = make_cgroup()

    def enter():
        (group / "cgroup.procs").write_text(str(os.getpid()))

    if group is not None:  # a process must be able to join it (a container may allow mkdir but not that)
        try:
            subprocess.run(["true"], preexec_fn=enter, check=True)
        except (subprocess.SubprocessError, OSError):
            group.rmdir()
            group = None
    if group is None:
        sim = tmp_path / "cgroup"
        sim.mkdir()
        (sim / "memory.max").write_text(f"{LIMIT}\n")
        (sim / "memory.current").write_text("0\n")
        print("no memory cgroup can be made here: a simulated 1 GiB limit (MINFER_CGROUP_MEMORY_DIR)")
        yield {**os.environ, "MINFER_CGROUP_MEMORY_DIR": str(sim)}, None
        return
    print(f"a real memory cgroup: {group}")
    yield dict(os.environ), enter
    for pid in (group / "cgroup.procs").read_text().split():
        subprocess.run(["kill", "-9", pid], check=False)
    group.rmdir()


def test_a_budget_beyond_the_limit_is_refused_at_start(minfer, stories_dir, limited):
    env, enter = limited
    proc = subprocess.run([str(minfer.binary), "serve", "-m", stories_dir / "stories260K.bin", "--port", "0",
                           "--kv-cache-memory", "40GiB"], capture_output=True, text=True, timeout=120, env=env,
                          preexec_fn=enter, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert "listening on" not in proc.stdout
    assert re.search(r"KV budget .* of 40960 MiB", proc.stderr), proc.stderr[-2000:]
    assert re.search(r"cgroup limit 1024 MiB with \d+ MiB left", proc.stderr), proc.stderr[-2000:]
    assert "--kv-cache-memory-fraction" in proc.stderr


def test_the_default_budget_is_a_fraction_of_the_cgroup(minfer, stories_dir, limited):
    env, enter = limited
    proc = subprocess.Popen([str(minfer.binary), "serve", "-m", stories_dir / "stories260K.bin", "--port", "0",
                             "--max-num-seqs", "4096"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=enter, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "listening on" in line:
                break
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    m = re.search(r"KV budget (\d+) MiB: 50% of (\d+) MiB available .*cgroup limit 1024 MiB", err)
    assert m, err[-2000:]
    assert int(m.group(2)) <= 1024 and int(m.group(1)) <= 512
    pool = re.search(r"KV pool: \d+ pages of \d+ tokens \(\d+ tokens, (\d+) MiB", err)
    assert pool and int(pool.group(1)) <= 512, err[-2000:]
