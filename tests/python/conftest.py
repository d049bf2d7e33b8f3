"""Fixtures of the Python API tests. Run with Debian's python3 against a built package:

    PYTHONPATH=build/release/python /usr/bin/python3 -m pytest tests/python

(ctest runs them as the `python_api` test with these variables set.) Environment:
  PYTHONPATH         must hold <build>/python (the minfer package and its compiled _minfer extension)
  MINFER_BIN         the `minfer` binary, for the comparisons with the CLI and the server example
                     (default: <repo>/build/release/tools/minfer; those tests are skipped when it is missing)
  MINFER_SHARED_DIR  the shared read-only assets (default: <repo>/../shared)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pyapi_support import ENGINE_ARGS, MINFER_BIN, SHARED_DIR


@pytest.fixture(scope="session")
def stories_dir() -> Path:
    d = SHARED_DIR / "models" / "stories260K"
    if not (d / "stories260K.bin").exists():
        pytest.fail(f"missing test asset {d / 'stories260K.bin'} (MINFER_SHARED_DIR={SHARED_DIR})")
    return d


@pytest.fixture(scope="session")
def stories_model(stories_dir) -> str:
    return str(stories_dir / "stories260K.bin")


@pytest.fixture(scope="session")
def engine(stories_model):
    """One engine over stories260K shared by the tests that only generate (none of them closes it)."""
    import minfer

    with minfer.Engine(model_path=stories_model, **ENGINE_ARGS) as e:
        yield e


@pytest.fixture(scope="session")
def minfer_bin() -> Path:
    if not MINFER_BIN.exists():
        pytest.skip(f"the minfer binary is not built: {MINFER_BIN} does not exist (set MINFER_BIN)")
    return MINFER_BIN
