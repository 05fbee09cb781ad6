// HostReclaimsFreeMemory (host_memory.h).
#include "core/host_memory.h"

#include <dirent.h>
#include <sys/stat.h>

#include <fstream>

namespace stoker {

namespace {

constexpr const char* kBalloonDevice = "0x0005";  // virtio device id of a memory balloon
constexpr size_t kFreePageReportingBit = 5;       // VIRTIO_BALLOON_F_REPORTING

std::string FirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace

bool HostReclaimsFreeMemory(const std::string& sysfs) {
  const std::string dir = sysfs + "/bus/virtio/devices";
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool reclaims = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string dev = dir + "/" + e->d_name;
    if (FirstLine(dev + "/device") != kBalloonDevice) continue;
    struct stat st {};
    if (stat((dev + "/driver").c_str(), &st) != 0) continue;  // no driver: the guest does not use it
    // The features the driver and device agreed on: one '0' or '1' per bit, bit 0 first.
    const std::string features = FirstLine(dev + "/features");
    if (features.size() > kFreePageReportingBit && features[kFreePageReportingBit] == '1') reclaims = true;
  }
  closedir(d);
  return reclaims;
}

bool HostReclaimsFreeMemory() {
  static const bool reclaims = HostReclaimsFreeMemory("/sys");
  return reclaims;
}

}  // namespace stoker
