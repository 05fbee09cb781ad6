// Whether the hypervisor under this machine takes its free memory back:
// a virtio balloon that reports free pages (VIRTIO_BALLOON_F_REPORTING, as
// Firecracker and QEMU offer it).  The guest kernel hands free blocks of
// 2 MiB and up to the host, which unmaps them.  A transparent huge page is
// such a block, so on that guest a fresh huge page costs the host's faults
// on its 512 small pages: first touch at 0.5-1.1 GB/s where small pages,
// which come mostly from memory the host still backs, fault in at 3-4 GB/s
// (docs/benchmarks.md, "Stream buffers on a guest whose host takes free
// memory back").  The stream buffers take small pages there.
//
// Read from sysfs: <sysfs>/bus/virtio/devices/*/ with device 0x0005 (a
// balloon), bound to a driver, feature bit 5 set.  A /sys that cannot be
// read (a container that hides it) reads as false.  Other balloons with
// free page reporting (Hyper-V's hv_balloon) are not recognised.
#ifndef STOKER_CORE_HOST_MEMORY_H_
#define STOKER_CORE_HOST_MEMORY_H_

#include <string>

namespace stoker {

// `sysfs`: the sysfs root (tests give a tree of their own).
bool HostReclaimsFreeMemory(const std::string& sysfs);

// The same for /sys, read on first use: the same for the process's life.
bool HostReclaimsFreeMemory();

}  // namespace stoker

#endif  // STOKER_CORE_HOST_MEMORY_H_
