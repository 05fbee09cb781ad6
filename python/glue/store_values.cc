#include "glue/store_values.h"

#include <algorithm>
#include <iterator>

#include "glue/errors.h"

namespace py = pybind11;

namespace stoker::glue {

py::tuple ShardTuple(const ShardInfo& s) {
  return py::make_tuple(s.name, s.size, s.has_crc ? py::cast(s.crc32c) : py::none(),
                        s.has_samples ? py::cast(s.samples) : py::none());
}

ShardInfo ShardFromTuple(const py::handle& t) {
  py::tuple tt = py::reinterpret_borrow<py::tuple>(t);
  if (tt.size() < 2 || tt.size() > 4)
    Throw(Status::InvalidArgument("a shard is (name, size[, crc32c[, samples]]), got a tuple of " +
                                  std::to_string(tt.size())));
  ShardInfo s;
  s.name = tt[0].cast<std::string>();
  s.size = tt[1].cast<uint64_t>();
  if (tt.size() > 2 && !tt[2].is_none()) s.crc32c = tt[2].cast<uint32_t>(), s.has_crc = true;
  if (tt.size() > 3 && !tt[3].is_none()) s.samples = tt[3].cast<uint64_t>(), s.has_samples = true;
  return s;
}

// An s3:// store's options, by boto3's names: the one list of them.
S3Options S3FromMap(const std::map<std::string, std::string>& m) {
  static const std::pair<const char*, std::string S3Options::*> kKeys[] = {
      {"endpoint_url", &S3Options::endpoint},           {"region_name", &S3Options::region},
      {"profile_name", &S3Options::profile},            {"aws_access_key_id", &S3Options::access_key_id},
      {"aws_secret_access_key", &S3Options::secret_access_key}, {"aws_session_token", &S3Options::session_token}};
  S3Options o;
  for (const auto& [k, v] : m) {
    const auto* key = std::find_if(std::begin(kKeys), std::end(kKeys), [&](const auto& e) { return k == e.first; });
    if (key == std::end(kKeys)) {
      std::string names;
      for (const auto& e : kKeys) names += std::string(names.empty() ? "" : ", ") + e.first;
      Throw(Status::InvalidArgument("storage_options has no key '" + k + "'; the keys are " + names));
    }
    o.*(key->second) = v;
  }
  return o;
}

}  // namespace stoker::glue
