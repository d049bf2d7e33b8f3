// EXIF orientation: read with libexif, applied as PIL.ImageOps.exif_transpose does (transformers' load_image calls
// it, so a phone photo stored sideways reaches the model upright).
#include <libexif/exif-data.h>

#include <cstring>
#include <vector>

#include "media/image.h"

namespace minfer::media {

int exif_orientation(std::span<const uint8_t> exif) {
  // libexif takes a JPEG or an APP1 payload ("Exif\0\0" + TIFF); PNG's and WebP's chunks hold the bare TIFF.
  std::vector<uint8_t> block;
  if (exif.size() >= 2 && (std::memcmp(exif.data(), "II", 2) == 0 || std::memcmp(exif.data(), "MM", 2) == 0)) {
    block.assign({'E', 'x', 'i', 'f', 0, 0});
    block.insert(block.end(), exif.begin(), exif.end());
    exif = block;
  }
  ExifData* data = exif_data_new_from_data(exif.data(), static_cast<unsigned int>(exif.size()));
  if (!data) return 1;
  int orientation = 1;
  if (ExifEntry* e = exif_data_get_entry(data, EXIF_TAG_ORIENTATION);
      e && e->format == EXIF_FORMAT_SHORT && e->components >= 1 && e->size >= 2) {
    orientation = exif_get_short(e->data, exif_data_get_byte_order(data));
  }
  exif_data_unref(data);
  return orientation >= 1 && orientation <= 8 ? orientation : 1;
}

RgbImage apply_orientation(RgbImage in, int orientation) {
  if (orientation <= 1 || orientation > 8) return in;
  const int64_t iw = in.width, ih = in.height;
  const bool swaps = orientation >= 5;  // transpose, rotate 270, transverse, rotate 90
  RgbImage out{swaps ? ih : iw, swaps ? iw : ih, std::vector<uint8_t>(in.rgb.size())};
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sx = x, sy = y;  // the source pixel of output (x, y), per PIL's Transpose method
      switch (orientation) {
        case 2: sx = iw - 1 - x; break;                   // FLIP_LEFT_RIGHT
        case 3: sx = iw - 1 - x, sy = ih - 1 - y; break;  // ROTATE_180
        case 4: sy = ih - 1 - y; break;                   // FLIP_TOP_BOTTOM
        case 5: sx = y, sy = x; break;                    // TRANSPOSE
        case 6: sx = y, sy = ih - 1 - x; break;           // ROTATE_270 (clockwise)
        case 7: sx = iw - 1 - y, sy = ih - 1 - x; break;  // TRANSVERSE
        case 8: sx = iw - 1 - y, sy = x; break;           // ROTATE_90 (counter-clockwise)
        default: break;
      }
      std::memcpy(&out.rgb[static_cast<size_t>((y * out.width + x) * 3)],
                  &in.rgb[static_cast<size_t>((sy * iw + sx) * 3)], 3);
    }
  }
  return out;
}

}  // namespace minfer::media
