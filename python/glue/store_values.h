// Python values of the store and cache types the bindings share: a shard
// as the tuple (name, size, crc32c or None, samples or None), and an s3://
// store's options from a dict of boto3's names.
#ifndef STOKER_PY_GLUE_STORE_VALUES_H_
#define STOKER_PY_GLUE_STORE_VALUES_H_

#include <map>
#include <string>

#include <pybind11/pybind11.h>

#include "stoker/shard_index.h"
#include "stoker/store.h"

namespace stoker::glue {

pybind11::tuple ShardTuple(const ShardInfo& s);
ShardInfo ShardFromTuple(const pybind11::handle& t);
S3Options S3FromMap(const std::map<std::string, std::string>& m);

}  // namespace stoker::glue

#endif  // STOKER_PY_GLUE_STORE_VALUES_H_
