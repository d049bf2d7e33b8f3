#!/usr/bin/env python3
"""Reference SentencePiece tokenization for minfer's tokenizer tests.

Usage: spm_reference.py MODEL STRINGS_JSON
Reads a JSON list of strings, encodes each with the SentencePiece model (no BOS/EOS), and prints
{"ids": [[...], ...], "decoded": [...]} as JSON on stdout, decoded being sp.decode(ids) of each.
Exits with status 3 when the sentencepiece module is missing (the test then skips).
Run it with Debian's /usr/bin/python3, which has python3-sentencepiece.
"""
import json
import sys


def main() -> int:
    try:
        import sentencepiece as spm
    except ImportError:
        print("python module 'sentencepiece' is not installed (apt install python3-sentencepiece)", file=sys.stderr)
        return 3
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        texts = json.load(f)
    ids = [sp.encode(t) for t in texts]
    json.dump({"ids": ids, "decoded": [sp.decode(i) for i in ids]}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
