"""Constants and helpers of the Python API tests (kept out of conftest.py so test files can import them without
clashing with tests/e2e/conftest.py when both folders run in one pytest)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[2]
SHARED_DIR = Path(os.environ.get("MINFER_SHARED_DIR") or REPO.parent / "shared")
MINFER_BIN = Path(os.environ.get("MINFER_BIN") or REPO / "build" / "release" / "tools" / "minfer")

# A small KV pool and few threads: the suite runs beside other tests on a 2-core CI machine.
ENGINE_ARGS = dict(device="cpu", num_threads=1, kv_cache_memory="16MiB", max_seq_len=512)


def read_ids(path: Path) -> List[int]:
    return [int(x) for x in path.read_text().split()]

CACHE_DIR = Path(os.environ.get("MINFER_CACHE_DIR") or REPO / ".cache")
