// A shard file opened as a dataset, and the checks every opened shard
// passes: what the streaming dataset's readers (streaming_epoch.cc) and a
// worker process's StreamReader (stream_reader.h) both do with a shard.
#ifndef STOKER_STREAMING_SHARD_OPEN_H_
#define STOKER_STREAMING_SHARD_OPEN_H_

#include <memory>
#include <string>
#include <vector>

#include "io/file_reader.h"
#include "stoker/native_dataset.h"
#include "stoker/shard_index.h"
#include "stoker/streaming.h"
#include "stoker/tar_fields.h"

namespace stoker {

// `file` as a TFRecord (o.features) or tar (`decls`; empty: all inferred)
// shard.  `index_dir`: where TFRecord record indexes are kept ("" none);
// `verified`: the file matched the index's CRC-32C (no second check of its
// records' own); `memory`: a stream buffer (its index is not kept).  A tar
// shard's decls as opened go to *learned (where not null).
Result<std::unique_ptr<NativeDataset>> OpenShardFile(const StreamingOptions& o, const std::vector<TarFieldDecl>& decls,
                                                     FileReader file, const std::string& index_dir, bool verified,
                                                     bool memory, std::vector<TarFieldDecl>* learned);

// The shard `info` opened as `d` has the dataset's `fields`, and (reading
// every bad record as an error) the index's sample count.
Status CheckShard(const NativeDataset& d, const ShardInfo& info, const std::vector<FieldSpec>& fields,
                  OnError on_error);

// A tar dataset's fields, where every declaration says its dtype and shape
// (else empty: the first shard tells them).
Result<std::vector<FieldSpec>> DeclaredTarFields(const std::vector<TarFieldDecl>& decls, const std::string& what);

}  // namespace stoker

#endif  // STOKER_STREAMING_SHARD_OPEN_H_
