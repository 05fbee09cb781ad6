// core/host_memory: a balloon that reports free pages, read from a sysfs
// tree the test makes.
#include "core/host_memory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "test_files.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

// Bits 1, 2 and 7, and bit 5 (free page reporting) where `reports`; the form
// sysfs gives: one character per bit, bit 0 first, 64 of them.
std::string Features(bool reports) {
  std::string f(64, '0');
  f[1] = f[2] = f[7] = '1';
  if (reports) f[5] = '1';
  return f + "\n";
}

class HostMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::TempPath("sysfs");
    fs::remove_all(root_);
    fs::create_directories(root_ + "/bus/virtio/drivers/virtio_balloon");
  }
  void TearDown() override { fs::remove_all(root_); }
  // A virtio device: its id, its features, bound to a driver or not.
  void Device(const std::string& name, const std::string& id, const std::string& features, bool bound) {
    const std::string d = root_ + "/bus/virtio/devices/" + name;
    fs::create_directories(d);
    testing::WriteFile(d + "/device", id + "\n");
    testing::WriteFile(d + "/features", features);
    if (bound) fs::create_directory_symlink(root_ + "/bus/virtio/drivers/virtio_balloon", d + "/driver");
  }
  std::string root_;
};

TEST_F(HostMemory, ABoundBalloonThatReportsFreePages) {
  Device("virtio0", "0x0002", Features(false), true);  // a block device
  Device("virtio1", "0x0005", Features(true), true);
  EXPECT_TRUE(HostReclaimsFreeMemory(root_));
}

TEST_F(HostMemory, ABalloonWithoutReporting) {
  Device("virtio0", "0x0005", Features(false), true);
  EXPECT_FALSE(HostReclaimsFreeMemory(root_));
}

TEST_F(HostMemory, ABalloonNoDriverTookIsNotInUse) {
  Device("virtio0", "0x0005", Features(true), false);
  EXPECT_FALSE(HostReclaimsFreeMemory(root_));
}

TEST_F(HostMemory, BitFiveOfAnotherDeviceIsNotReporting) {
  Device("virtio0", "0x0001", Features(true), true);  // a network card's bit 5 means something else
  EXPECT_FALSE(HostReclaimsFreeMemory(root_));
}

TEST_F(HostMemory, NoVirtioOrNoSysfs) {
  EXPECT_FALSE(HostReclaimsFreeMemory(root_));  // no devices directory
  EXPECT_FALSE(HostReclaimsFreeMemory(root_ + "/missing"));
  Device("virtio0", "0x0005", "01\n", true);  // features too short to say
  EXPECT_FALSE(HostReclaimsFreeMemory(root_));
}

TEST(HostMemoryOfThisMachine, ReadOnceFromSys) {
  EXPECT_EQ(HostReclaimsFreeMemory(), HostReclaimsFreeMemory("/sys"));
}

}  // namespace
}  // namespace stoker
