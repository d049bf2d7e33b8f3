#include "media/image_decode_gif.h"

#include <gif_lib.h>

#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"

namespace minfer::media {
namespace {

struct Reader {
  std::span<const uint8_t> bytes;
  size_t at = 0;
};

int read_bytes(GifFileType* gif, GifByteType* out, int n) {
  auto* r = static_cast<Reader*>(gif->UserData);
  const size_t take = std::min(static_cast<size_t>(n), r->bytes.size() - r->at);
  std::memcpy(out, r->bytes.data() + r->at, take);
  r->at += take;
  return static_cast<int>(take);
}

void close_gif(GifFileType* gif) {
  int error = 0;
  DGifCloseFile(gif, &error);
}

[[noreturn]] void gif_error(GifFileType* gif) {
  fail("image: bad GIF: {}", GifErrorString(gif->Error) ? GifErrorString(gif->Error) : "unreadable");
}

// Rows of the frame in file order, de-interlaced (GIF's four passes: every 8th row from 0, from 4, every 4th from
// 2, every 2nd from 1).
std::vector<int64_t> row_order(int64_t height, bool interlaced) {
  std::vector<int64_t> rows;
  if (!interlaced) {
    for (int64_t y = 0; y < height; ++y) rows.push_back(y);
    return rows;
  }
  constexpr int64_t kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
  for (int pass = 0; pass < 4; ++pass)
    for (int64_t y = kStart[pass]; y < height; y += kStep[pass]) rows.push_back(y);
  return rows;
}

}  // namespace

RgbImage decode_gif(std::span<const uint8_t> bytes, int64_t max_pixels) {
  Reader reader{bytes};
  int error = 0;
  std::unique_ptr<GifFileType, void (*)(GifFileType*)> gif(DGifOpen(&reader, read_bytes, &error), close_gif);
  if (!gif) fail("image: bad GIF: {}", GifErrorString(error) ? GifErrorString(error) : "unreadable");
  const int64_t w = gif->SWidth, h = gif->SHeight;
  if (w <= 0 || h <= 0 || w * h > max_pixels) {
    fail("image: the GIF is {}x{} pixels; at most {} are taken (--max-image-pixels), and at least one", w, h,
         max_pixels);
  }
  int transparent = -1;
  for (;;) {
    GifRecordType record;
    if (DGifGetRecordType(gif.get(), &record) == GIF_ERROR) gif_error(gif.get());
    if (record == TERMINATE_RECORD_TYPE) fail("image: bad GIF: it has no image");
    if (record == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif.get(), &code, &ext) == GIF_ERROR) gif_error(gif.get());
      if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4) {
        GraphicsControlBlock gcb;
        DGifExtensionToGCB(ext[0], ext + 1, &gcb);
        transparent = gcb.TransparentColor;
      }
      while (ext) {
        if (DGifGetExtensionNext(gif.get(), &ext) == GIF_ERROR) gif_error(gif.get());
      }
      continue;
    }
    if (record != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif.get()) == GIF_ERROR) gif_error(gif.get());
    const GifImageDesc& d = gif->Image;
    if (d.Left < 0 || d.Top < 0 || d.Width <= 0 || d.Height <= 0 || d.Left + d.Width > w || d.Top + d.Height > h) {
      fail("image: bad GIF: the first frame ({}x{} at {},{}) lies outside the {}x{} screen", d.Width, d.Height, d.Left,
           d.Top, w, h);
    }
    const ColorMapObject* colors = d.ColorMap ? d.ColorMap : gif->SColorMap;
    if (!colors) fail("image: bad GIF: the first frame has no colour table");
    // The frame on a transparent screen, then composited over white as convert_to_rgb does.
    std::vector<uint8_t> rgba(static_cast<size_t>(w * h * 4), 0);
    std::vector<GifPixelType> line(static_cast<size_t>(d.Width));
    for (int64_t y : row_order(d.Height, d.Interlace)) {
      if (DGifGetLine(gif.get(), line.data(), d.Width) == GIF_ERROR) gif_error(gif.get());
      uint8_t* px = rgba.data() + ((d.Top + y) * w + d.Left) * 4;
      for (int64_t x = 0; x < d.Width; ++x, px += 4) {
        const int index = line[static_cast<size_t>(x)];
        if (index == transparent || index >= colors->ColorCount) continue;
        const GifColorType& c = colors->Colors[index];
        px[0] = c.Red, px[1] = c.Green, px[2] = c.Blue, px[3] = 255;
      }
    }
    return rgba_over_white(rgba.data(), w, h);
  }
}

}  // namespace minfer::media
