// The image decoders (media/image_decode*.cpp: PNG, JPEG with its EXIF, WebP, GIF) on arbitrary bytes, with a
// pixel limit low enough that a header claiming a huge image is refused before anything is allocated, then a resize
// of what decodes.
#include "base/error.h"
#include "fuzz_input.h"
#include "media/image.h"
#include "media/image_resize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const minfer::media::RgbImage img = minfer::media::decode_image({data, size}, 4096 * 4096);
    (void)minfer::media::resize_image(img, 7, 5, minfer::media::Resample::kBicubic);
  } catch (const minfer::Error&) {
  }
  return 0;
}
