// Turning a finished slot into Python objects for the training loop.
//
// This is the one place that converts slot memory to tensors and arrays.
// Every tensor (DLPack, via torch._C._from_dlpack) and array (buffer
// protocol, via numpy.asarray) is a view of the slot region and holds a
// reference on the slot's SlotLease; the slot goes back to the free list
// when the last view is gone, from whatever thread drops it (no GIL needed).
// With copy_out, leaves are copied to private memory and the slot is freed
// at once (used when the training loop holds too much of the pool).
#ifndef STOKER_PY_DECODE_H_
#define STOKER_PY_DECODE_H_

#include <Python.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "loader/engine.h"

namespace stoker::glue {

// A reference count on one slot, shared by all views of it.
class SlotLease {
 public:
  SlotLease(std::shared_ptr<Engine> e, uint32_t slot) : engine_(std::move(e)), slot_(slot) {}
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      engine_->Release(slot_);
      delete this;
    }
  }

 private:
  std::shared_ptr<Engine> engine_;
  uint32_t slot_;
  std::atomic<int64_t> refs_{1};
};

// Decodes READY slot `slot` (marking it HELD).  Returns a new reference, or
// nullptr with a Python error set (the slot is released in that case).
PyObject* DecodeSlot(const std::shared_ptr<Engine>& engine, uint32_t slot, bool numpy_mode, bool copy_out);

// Decodes a batch held in private memory (a batch moved out of its slot, or
// one that had no room in the pool) into copies.  The bytes may go afterwards.
PyObject* DecodeCopy(const uint8_t* data, uint64_t used, bool numpy_mode);

// Registers the HostBuffer type; call once at module init.
bool InitHostBufferType(PyObject* module);

}  // namespace stoker::glue

#endif  // STOKER_PY_DECODE_H_
