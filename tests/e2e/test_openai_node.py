"""The official `openai` and `@anthropic-ai/sdk` npm clients against a real `minfer serve`: runs tests/e2e/node (node's
test runner).

The npm dependencies (tests/e2e/node/package-lock.json, both clients pinned) are installed by scripts/install-deps.sh;
when node_modules is missing this test runs `npm ci` itself, which needs the npm registry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import MINFER_BIN

NODE_DIR = Path(__file__).resolve().parent / "node"


def pinned_versions() -> dict:
    return json.loads((NODE_DIR / "package.json").read_text())["dependencies"]


def installed_version(name: str) -> str | None:
    package = NODE_DIR / "node_modules" / name / "package.json"
    return json.loads(package.read_text())["version"] if package.exists() else None


def run_node_test(minfer, test_file: str) -> None:
    node = shutil.which("node")
    npm = shutil.which("npm")
    if not node or not npm:
        pytest.fail("node and npm are needed (scripts/install-deps.sh installs them)")
    if any(installed_version(name) != version for name, version in pinned_versions().items()):
        proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, f"npm ci failed in {NODE_DIR}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    env = dict(os.environ, MINFER_BIN=str(MINFER_BIN.resolve()))
    proc = subprocess.run([node, "--test", "--test-reporter=spec", test_file], cwd=NODE_DIR, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"node --test failed\n{proc.stdout[-8000:]}\n{proc.stderr[-4000:]}"


def test_openai_npm_client(minfer):
    run_node_test(minfer, "openai_client.test.mjs")


def test_anthropic_npm_client(minfer):
    run_node_test(minfer, "anthropic_client.test.mjs")
