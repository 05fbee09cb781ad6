// Fuzz inputs become files: one memfd per process, rewritten per input and
// opened by path (/proc/self/fd/N) like any shard.
#ifndef STOKER_TESTS_FUZZ_INPUT_H_
#define STOKER_TESTS_FUZZ_INPUT_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace stoker::fuzz {

inline std::string AsFile(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("stoker-fuzz", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 0) != 0) abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) abort();
    done += static_cast<size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace stoker::fuzz

#endif  // STOKER_TESTS_FUZZ_INPUT_H_
