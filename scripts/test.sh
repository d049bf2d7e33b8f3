#!/usr/bin/env bash
# Sets up (Debian packages, fetched test assets), builds the release preset with warnings as errors, and
# runs the whole test suite: unit tests and the end-to-end / oracle tests. This is the README's test command.
#   scripts/test.sh [--no-deps] [extra ctest arguments...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

if [ "${1:-}" = "--no-deps" ]; then
  shift
else
  bash scripts/install-deps.sh
fi

jobs="$(nproc)"
cmake --preset release -DMINFER_WERROR=ON
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs" "$@"
