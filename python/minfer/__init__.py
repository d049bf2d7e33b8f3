"""minfer: a CPU-first LLM inference engine (continuous batching, paged KV cache, fused operators, int8).

    from minfer import Engine, QuantConfig, SamplingParams

    engine = Engine(model_path="../shared/models/stories260K/stories260K.bin", device="cpu")
    print(engine.generate("Once upon a time", max_new_tokens=50, temperature=0).text)

Errors: an unknown keyword or a value of the wrong type raises TypeError; a bad value raises ValueError naming
the field -- minfer.MinferError (a ValueError) when the engine finds it, minfer.ModelLoadError when a checkpoint
cannot be read.
"""

from ._minfer_loader import _minfer
from .config import QuantConfig
from .engine import LLM, Engine, GenerationStream, Tokenizer
from .media import decode_image, preprocess_image
from .outputs import ChatResult, GenerationChunk, GenerationResult
from .sampling import SamplingParams, StructuredOutputsParams

MinferError = _minfer.MinferError
ModelLoadError = _minfer.ModelLoadError

__all__ = ["Engine", "LLM", "QuantConfig", "SamplingParams", "StructuredOutputsParams", "GenerationResult", "ChatResult", "GenerationChunk", "GenerationStream",
           "Tokenizer", "MinferError", "ModelLoadError", "decode_image", "preprocess_image"]
