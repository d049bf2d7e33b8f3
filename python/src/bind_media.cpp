// Image decoding and a model processor's preprocessing (media/), exposed as minfer.decode_image and
// minfer.preprocess_image: what the engine does to a request's image, for users checking their inputs and for the
// tests that compare it with Pillow and Hugging Face's processors.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "bindings.h"
#include "media/image.h"
#include "media/image_processor.h"
#include "minfer/error.h"
#include "model/model_weights.h"
#include "vision/vision_encoder.h"

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
  // The image embeddings a multimodal model's language model receives, [images, tokens_per_image, text_hidden]: the
  // tower and projector of the checkpoint at model_path on each image (decoded and preprocessed as a request's).
  m.def(
      "encode_images",
      [](const std::string& model_path, const std::vector<py::bytes>& images, int64_t max_pixels, int threads,
         const std::string& mmproj, int repeats, bool profile) {
        ModelWeights weights = load_model(model_path);
        if (!mmproj.empty())
          weights.vision =
              std::make_shared<vision::VisionModel>(vision::load_gguf_vision(mmproj, weights.config.hidden_size));
        if (!weights.vision) throw Error(model_path + ": the model has no vision tower; it takes no images");
        const vision::VisionConfig& c = weights.vision->config;
        std::vector<media::PixelValues> pixels;
        for (const py::bytes& data : images) {
          std::string storage;
          pixels.push_back(
              media::preprocess_image(media::decode_image(bytes_of(data, storage), max_pixels), c.processor));
        }
        ThreadPool pool(threads);
        vision::VisionEncoder encoder(weights.vision, pool);
        encoder.set_profiling(profile);
        std::vector<float> out;
        py::list seconds;  // each run's wall time (bench/vision_encode.py), the tower loaded and compiled before
        {
          py::gil_scoped_release nogil;
          for (int r = 0; r < std::max(repeats, 1); ++r) {
            const auto start = std::chrono::steady_clock::now();
            out = encoder.encode(pixels);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            py::gil_scoped_acquire gil;
            seconds.append(s);
          }
        }
        py::array_t<float> arr({static_cast<int64_t>(images.size()), c.tokens_per_image, c.text_hidden});
        std::copy(out.begin(), out.end(), arr.mutable_data());
        if (profile) return py::object(py::make_tuple(arr, seconds, encoder.seconds_by_op()));
        if (repeats > 0) return py::object(py::make_tuple(arr, seconds));
        return py::object(arr);
      },
      py::arg("model_path"), py::arg("images"), py::arg("max_pixels"), py::arg("threads") = 2,
      py::arg("mmproj") = std::string(), py::arg("repeats") = 0, py::arg("profile") = false);
}

}  // namespace minfer::python
