// Batch::Impl: a delivered batch's fields, parsed from its bytes (the slot,
// or private memory when it was spilled or copied out), and the slot lease.
#ifndef STOKER_API_BATCH_IMPL_H_
#define STOKER_API_BATCH_IMPL_H_

#include <memory>
#include <string>

#include "loader/engine.h"
#include "stoker/batch.h"

namespace stoker {

struct Batch::Impl {
  std::shared_ptr<Engine> engine;  // set while the slot is held
  uint32_t slot = 0;
  std::shared_ptr<const std::string> bytes;  // private copy (spilled / copied out)
  uint64_t id = 0, size = 0, nbytes = 0;
  std::vector<BatchField> fields;
  ~Impl() {
    if (engine) engine->Release(slot);
  }
};

// Parses the batch bytes at [data, data+used) (src/shm/batch_format.h) into
// impl->fields.  Internal error for bytes that are not a native batch.  A
// dataset of tuples (SampleStructure::kTuple) has its fields by position:
// they are named from `fields`.
Status ParseNativeBatch(const uint8_t* data, uint64_t used, Batch::Impl* impl,
                        const std::vector<FieldSpec>* fields = nullptr);

}  // namespace stoker

#endif  // STOKER_API_BATCH_IMPL_H_
