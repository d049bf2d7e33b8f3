// The registered families (one file each under model/families/). A family's registration is a constant in its own
// file; this list is the one place that names them all, because objects that nothing references are dropped from a
// static library, so self-registering constructors would silently vanish.
#include "base/error.h"
#include "model/families/family.h"

namespace minfer {

extern const Family kLlamaFamily, kMistralFamily, kMixtralFamily, kQwen2Family, kQwen3Family, kQwen3MoeFamily,
    kGemma2Family, kGemma3Family, kPhi3Family, kSmolLM3Family, kOlmo2Family, kGraniteFamily, kGptOssFamily,
    kQwen35Family, kQwen35MoeFamily, kLfm2Family, kGraniteHybridFamily, kQwen3NextFamily, kLfm2MoeFamily,
    kNemotronHFamily;

namespace {

const Family* const kFamilies[] = {&kLlamaFamily,         &kMistralFamily,   &kMixtralFamily,   &kQwen2Family,
                                   &kQwen3Family,         &kQwen3MoeFamily,  &kGemma2Family,    &kGemma3Family,
                                   &kPhi3Family,          &kSmolLM3Family,   &kOlmo2Family,     &kGraniteFamily,
                                   &kGptOssFamily,        &kQwen35Family,    &kQwen35MoeFamily, &kLfm2Family,
                                   &kGraniteHybridFamily, &kQwen3NextFamily, &kLfm2MoeFamily,   &kNemotronHFamily};

}  // namespace

std::span<const Family* const> families() { return kFamilies; }

const Family& family_named(std::string_view name) {
  for (const Family* family : kFamilies)
    if (name == family->name) return *family;
  fail("unknown model family '{}'", name);
}

const Family& family_of(const ModelConfig& config) { return family_named(config.arch); }

}  // namespace minfer
