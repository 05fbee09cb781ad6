// Scratch files for the unit tests: a path under the test's temp directory
// (unique to the process), whole-file writes and reads, and the bytes of
// float32 0, 1, 2, ... (a record file's contents).
#ifndef STOKER_TESTS_TEST_FILES_H_
#define STOKER_TESTS_TEST_FILES_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

namespace stoker::testing {

inline std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "stoker_test_" + name + "_" + std::to_string(getpid());
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Writes `bytes` to a new scratch file; its path.
inline std::string TempFile(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  WriteFile(path, bytes);
  return path;
}

inline std::string Floats(int n) {
  std::string s(static_cast<size_t>(n) * 4, '\0');
  for (int i = 0; i < n; ++i) {
    const float f = static_cast<float>(i);
    std::memcpy(&s[4 * static_cast<size_t>(i)], &f, 4);
  }
  return s;
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TEST_FILES_H_
