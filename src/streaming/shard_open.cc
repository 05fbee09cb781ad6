#include "streaming/shard_open.h"

#include "io/tar_shard_dataset.h"
#include "io/tfrecord_dataset.h"

namespace stoker {

namespace {

bool SameFields(const std::vector<FieldSpec>& a, const std::vector<FieldSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].dtype != b[i].dtype || a[i].shape != b[i].shape || a[i].variable != b[i].variable)
      return false;
  return true;
}

std::string FieldsString(const std::vector<FieldSpec>& f) {
  std::string s;
  for (const FieldSpec& x : f)
    s += (s.empty() ? "" : ", ") + x.name + ": " + DTypeNameOf(x.dtype) + (x.variable ? " (variable)" : ShapeString(x.shape));
  return "{" + s + "}";
}

}  // namespace

Result<std::unique_ptr<NativeDataset>> OpenShardFile(const StreamingOptions& o, const std::vector<TarFieldDecl>& decls,
                                                     FileReader file, const std::string& index_dir, bool verified,
                                                     bool memory, std::vector<TarFieldDecl>* learned) {
  std::vector<FileReader> files;
  files.push_back(std::move(file));
  if (o.format == ShardFormat::kTFRecord) {
    TFRecordOptions to;
    to.index_dir = index_dir;
    to.index_cache = !memory && !index_dir.empty();
    to.on_error = o.on_error;
    to.verify_crc = !verified;
    STOKER_ASSIGN_OR_RETURN(auto t, TFRecordDataset::OpenFiles(std::move(files), o.features, to));
    return std::unique_ptr<NativeDataset>(std::move(t));
  }
  TarShardOptions to;
  to.on_error = o.on_error;
  STOKER_ASSIGN_OR_RETURN(auto t, TarShardDataset::OpenFiles(std::move(files), decls, to));
  if (learned) *learned = t->decls();
  return std::unique_ptr<NativeDataset>(std::move(t));
}

Status CheckShard(const NativeDataset& d, const ShardInfo& info, const std::vector<FieldSpec>& fields,
                  OnError on_error) {
  if (!SameFields(d.fields(), fields))
    return Status::DataLoss("shard " + info.name + " has fields " + FieldsString(d.fields()) +
                            ", the dataset's are " + FieldsString(fields));
  const uint64_t n = d.size();
  if (info.has_samples && n != info.samples && on_error == OnError::kRaise)
    return Status::DataLoss("shard " + info.name + " has " + std::to_string(n) + " samples, the index says " +
                            std::to_string(info.samples) + " (the index is stale: write it again with `stoker index`)");
  return Status::OK();
}

Result<std::vector<FieldSpec>> DeclaredTarFields(const std::vector<TarFieldDecl>& decls, const std::string& what) {
  std::vector<FieldSpec> specs(decls.size());
  bool declared = !decls.empty();
  for (size_t f = 0; declared && f < decls.size(); ++f) {
    STOKER_ASSIGN_OR_RETURN(declared, DeclaredFieldSpec(decls[f], what, &specs[f]));
  }
  if (!declared) specs.clear();
  return specs;
}

}  // namespace stoker
