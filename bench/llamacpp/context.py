"""A llama.cpp context through llama-cpp-python's C API, as the bench scripts beside this file use it: the model
loaded quietly, one sequence, KV type KV for K and V (-ctk/-ctv), flash attention on (which quantized V needs, and
which llama.cpp's CPU backend uses by default), and a decode of token lists in batches of 512."""

import llama_cpp
import numpy as np

GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "bf16": 30}


class Context:
    def __init__(self, path: str, threads: int, kv: str, n_ctx: int):
        llama_cpp.llama_backend_init()
        self._quiet = llama_cpp.llama_log_callback(lambda *a: None)  # kept: the C side holds the pointer
        llama_cpp.llama_log_set(self._quiet, None)
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), llama_cpp.llama_model_default_params())
        self.vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model))
        p = llama_cpp.llama_context_default_params()
        p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = n_ctx, 512, 512, 1
        p.n_threads = p.n_threads_batch = threads
        p.type_k = p.type_v = GGML_TYPES[kv]
        p.flash_attn_type = 1  # enabled
        self.ctx = llama_cpp.llama_init_from_model(self.model, p)
        self.batch = llama_cpp.llama_batch_init(512, 0, 1)

    def decode(self, tokens, pos0: int, want_last: bool = True):
        """Runs tokens at positions pos0...; the logits of the last one (want_last) or None."""
        row = None
        for start in range(0, len(tokens), 512):
            chunk = tokens[start:start + 512]
            self.batch.n_tokens = len(chunk)
            for i, t in enumerate(chunk):
                last = want_last and start + i == len(tokens) - 1
                (self.batch.token[i], self.batch.pos[i], self.batch.n_seq_id[i], self.batch.seq_id[i][0],
                 self.batch.logits[i]) = (t, pos0 + start + i, 1, 0, last)
            assert llama_cpp.llama_decode(self.ctx, self.batch) == 0, "llama_decode failed"
            if want_last and start + len(chunk) == len(tokens):
                row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, len(chunk) - 1),
                                            shape=(self.vocab,))
        return row

    def close(self):
        llama_cpp.llama_batch_free(self.batch)
        llama_cpp.llama_free(self.ctx)
        llama_cpp.llama_model_free(self.model)
