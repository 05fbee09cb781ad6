// Files as samples: field "image" (a file's bytes, variable length) and
// "label" (int64), items (image, label) tuples; errors name the file.  The
// base of ImageFolderDataset (include/stoker/image_dataset.h), which reads
// it one file at a time: SampleBytes then Read of the same index, on one
// thread (a file that changes size between the two is refused).
#ifndef STOKER_VISION_FILE_LIST_H_
#define STOKER_VISION_FILE_LIST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/native_dataset.h"
#include "stoker/status.h"

namespace stoker {

Result<std::shared_ptr<NativeDataset>> FileListDataset(std::vector<std::string> paths, std::vector<int64_t> labels);

}  // namespace stoker

#endif  // STOKER_VISION_FILE_LIST_H_
