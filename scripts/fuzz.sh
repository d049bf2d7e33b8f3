#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, the `fuzz` preset: fuzz/) and runs each for a bounded time under ASan and
# UBSan, from seed corpora of real inputs: the shared GGUF, llama2.c and vocabulary files, a test model's
# safetensors and tokenizer.json, the chat templates of tests/data, and HTTP requests (fuzz/seeds/http). Then replays
# every regression input (fuzz/regressions/<target>/: each crash found becomes one). Fails on any finding; the input
# that caused it is left in build/fuzz/artifacts/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 30)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
seconds="${1:-30}"
shared="${MINFER_SHARED_DIR:-$here/../shared}"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
bin=build/fuzz/fuzz
corpus=build/fuzz/corpus
artifacts=build/fuzz/artifacts
rm -rf "$corpus"
mkdir -p "$artifacts"
for t in gguf safetensors llama2c tokenizer_json chat_template http_request image; do mkdir -p "$corpus/$t"; done

cp "$shared/models/stories260K/stories260K.gguf" "$corpus/gguf/"  # SentencePiece vocabulary, f32 tensors
cp "$shared/models/stories260K/stories260K.bin" "$shared/models/stories260K/tok512.bin" "$corpus/llama2c/"
cp tests/data/chat_templates/*.jinja "$corpus/chat_template/"
cp fuzz/seeds/http/* "$corpus/http_request/"
# Small images of every format (Pillow, in the project venv), one JPEG with an EXIF orientation.
if [ -x .venv/bin/python ]; then
  .venv/bin/python - "$corpus/image" <<'PY'
import sys
from PIL import Image
out = sys.argv[1]
img = Image.linear_gradient("L").resize((24, 16)).convert("RGB")
exif = Image.Exif()
exif[0x0112] = 6
img.save(f"{out}/a.jpg", quality=80, exif=exif.tobytes())
img.save(f"{out}/a.png")
img.convert("RGBA").save(f"{out}/a.webp", lossless=True)
img.save(f"{out}/b.webp", quality=50)
img.quantize(8).save(f"{out}/a.gif", transparency=2, interlace=True)
PY
fi
# A test model in a real Hugging Face layout (random weights): its safetensors and tokenizer.json.
minfer=build/release/tools/minfer
if [ -x "$minfer" ]; then
  "$minfer" make-test-model --preset tiny-llama --out "$corpus/model" --quiet
  mv "$corpus/model/model.safetensors" "$corpus/safetensors/"
  mv "$corpus/model/tokenizer.json" "$corpus/tokenizer_json/"
  rm -rf "$corpus/model"
  # A small GGUF with a byte-level BPE vocabulary (minfer's own writer, which llama.cpp loads).
  "$minfer" make-test-model --preset tiny-llama --out "$corpus/model" --quiet
  "$minfer" quantize "$corpus/model" "$corpus/gguf/tiny-llama-q8_0.gguf" --type Q8_0 >/dev/null 2>&1
  rm -rf "$corpus/model"
else
  echo "fuzz: no $minfer: the safetensors and tokenizer.json corpora start empty" >&2
fi

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for t in gguf safetensors llama2c tokenizer_json chat_template http_request image; do
  echo "fuzz: $t for $seconds s"
  "$bin/fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=2097152 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t-" "$corpus/$t" 2>&1 | grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==|SUMMARY|Running)" || true
  # libFuzzer's exit status is lost in the pipe: a finding leaves an artifact.
  if compgen -G "$artifacts/$t-*" >/dev/null; then
    echo "fuzz: $t found a crash: $(ls "$artifacts/$t-"*) (replay: $bin/fuzz_$t FILE)" >&2
    exit 1
  fi
  if [ -d "fuzz/regressions/$t" ] && compgen -G "fuzz/regressions/$t/*" >/dev/null; then
    "$bin/fuzz_$t" fuzz/regressions/"$t"/*
  fi
done
echo "fuzz: no findings"
