// Image decoding and a model processor's preprocessing (media/), exposed as minfer.decode_image and
// minfer.preprocess_image: what the engine does to a request's image, for users checking their inputs and for the
// tests that compare it with Pillow and Hugging Face's processors.
#include <pybind11/numpy.h>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "media/image.h"
#include "media/image_processor.h"

namespace minfer::python {
namespace {

std::span<const uint8_t> bytes_of(const py::bytes& data, std::string& storage) {
  storage = data;
  return {reinterpret_cast<const uint8_t*>(storage.data()), storage.size()};
}

}  // namespace

void bind_media(py::module_& m) {
  m.def(
      "decode_image",
      [](const py::bytes& data, int64_t max_pixels) {
        std::string storage;
        const media::RgbImage img = media::decode_image(bytes_of(data, storage), max_pixels);
        py::array_t<uint8_t> out({img.height, img.width, int64_t{3}});
        std::copy(img.rgb.begin(), img.rgb.end(), out.mutable_data());
        return out;
      },
      py::arg("data"), py::arg("max_pixels"));
  m.def(
      "preprocess_image",
      [](const py::bytes& data, const std::string& processor_json, int64_t max_pixels) {
        std::string storage;
        const media::RgbImage img = media::decode_image(bytes_of(data, storage), max_pixels);
        const auto config = media::ImageProcessorConfig::from_json(nlohmann::json::parse(processor_json));
        const media::PixelValues px = media::preprocess_image(img, config);
        py::array_t<float> out({int64_t{3}, px.height, px.width});
        std::copy(px.data.begin(), px.data.end(), out.mutable_data());
        return out;
      },
      py::arg("data"), py::arg("processor_json"), py::arg("max_pixels"));
}

}  // namespace minfer::python
