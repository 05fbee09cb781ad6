// Tar archives as WebDataset shards: the regular-file members of a tar file
// (ustar, with GNU long names and pax path/size records), where each member's
// data starts and how long it is.  Nothing is extracted; a member whose path
// would land outside the archive (absolute, or with a ".." part) and links
// are reported as bad members.
#ifndef STOKER_IO_TAR_FILE_H_
#define STOKER_IO_TAR_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "io/file_reader.h"
#include "stoker/status.h"

namespace stoker {

struct TarMember {
  std::string path;
  uint64_t header_offset = 0;  // of its (first) header block
  uint64_t data_offset = 0;
  uint64_t size = 0;
};

struct TarListing {
  std::vector<TarMember> members;  // regular files, in archive order
  // Bad members (unsafe path, link, bad header) left out with skip_bad, one
  // message each; without skip_bad the first is an error.
  std::vector<std::string> bad;
};

// DataLoss naming the shard, the member and its offset for a damaged or
// unsafe archive (unless skip_bad: then bad members are listed and a damaged
// tail ends the listing).
Result<TarListing> ListTar(const FileReader& file, bool skip_bad);

// Appends one regular-file member (ustar header, data, padding) to `out`;
// InvalidArgument for a path that does not fit ustar (>255 bytes, or no
// split into prefix/name) or that is unsafe.
Status AppendTarMember(std::string* out, const std::string& path, const void* data, uint64_t n);
// The end of an archive: two zero blocks.
void AppendTarEnd(std::string* out);

// WebDataset's grouping: the key is the path up to the first '.' of its last
// component, the extension what follows ("a/b.seg.png" -> "a/b", "seg.png").
void SplitTarKey(const std::string& path, std::string* key, std::string* ext);

}  // namespace stoker

#endif  // STOKER_IO_TAR_FILE_H_
