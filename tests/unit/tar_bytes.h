// Tar archives for the tests: a well-formed one (AppendTarMember) and raw
// ustar headers of any name and type (what AppendTarMember refuses to write).
#ifndef STOKER_TESTS_TAR_BYTES_H_
#define STOKER_TESTS_TAR_BYTES_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "io/tar_file.h"

namespace stoker::testing {

inline std::string TarOf(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string t;
  for (const auto& [p, d] : members) EXPECT_TRUE(AppendTarMember(&t, p, d.data(), d.size()).ok()) << p;
  AppendTarEnd(&t);
  return t;
}

// A raw ustar header with any name and type (what AppendTarMember refuses to write).
inline std::string RawTarHeader(const std::string& name, char type, uint64_t size, const std::string& link = "") {
  std::string h(512, '\0');
  std::memcpy(&h[0], name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(&h[100], 8, "%07o", 0644);
  std::snprintf(&h[124], 12, "%011llo", static_cast<unsigned long long>(size));
  h[156] = type;
  std::memcpy(&h[157], link.data(), std::min<size_t>(link.size(), 100));
  std::memcpy(&h[257], "ustar", 6);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<uint8_t>(c);
  std::snprintf(&h[148], 8, "%06o", sum);
  return h;
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TAR_BYTES_H_
