// What every unit test may share: the stories260K paths, and the assertion that a loader refuses a file with a
// LoadError naming it.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "minfer/error.h"

namespace minfer::testing {

inline const std::string kStoriesDir = std::string(MINFER_SHARED_DIR) + "/models/stories260K/";
inline const std::string kStoriesBin = kStoriesDir + "stories260K.bin";

// Asserts that `f` throws LoadError whose message names `file` and contains `phrase`.
template <typename F>
void expect_load_error(F f, const std::string& file, const std::string& phrase) {
  try {
    f();
    FAIL() << "no LoadError; expected one containing '" << phrase << "'";
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a LoadError containing '" << phrase << "', got: " << e.what();
  }
}

}  // namespace minfer::testing
