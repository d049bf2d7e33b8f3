// What a family file (model/families/<family>.cpp) is written with: its registration (family.h), the readers of
// config.json fields (hf_fields.h) and GGUF metadata (config_gguf.h, gguf_file.h), the GGUF writer its export keys
// go to, the graph pieces (decoder_builder.h) and the test-model config helpers (test_config.h).
#pragma once

#include "formats/gguf_file.h"
#include "formats/gguf_writer.h"
#include "model/config_gguf.h"
#include "model/families/decoder_builder.h"
#include "model/families/family.h"
#include "model/families/test_config.h"
#include "model/hf_fields.h"
