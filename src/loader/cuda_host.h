// CudaHost: the slot pool as CUDA pinned memory, without linking CUDA.
//
// pin_memory=True makes the pool itself the pinned staging memory: each slot's
// region is registered with cudaHostRegister while it belongs to a slot, so
// a batch's `.cuda(non_blocking=True)` is a DMA straight out of its slot.
// Only regions are registered, never free space: the driver pins the pages
// it registers, and a range the pool gives back (a hole punched, or
// MADV_DONTNEED) would leave the registration on the old pages while new
// ones appear at the same addresses; copies would read stale bytes, and the
// old pages would stay allocated outside max_memory.
//
// A non-blocking copy runs later, on the GPU's stream, while the training
// loop has long dropped the CPU tensor: a slot freed the moment its last
// view goes could be refilled by a worker while the copy still reads it.
// PyTorch's own pinned memory avoids this by recording an event on the
// copy's stream; stoker cannot see the copy, so it fences instead: each
// time the training loop asks for a batch an event is recorded on its
// current stream, and a held slot whose last view was dropped stays out of
// the free list until an event recorded after that moment has completed
// (every copy out of it was queued before the drop, so before that event).
//
// The runtime's entry points come from the libcudart that torch loaded (as
// plain addresses), so one build of stoker works with and without CUDA and
// with any CUDA version.  A fake set of entry points tests the logic on a
// machine with no GPU (tests/unit/cuda_host_test.cc).
//
// A call that returns an error (an event not ready included) also leaves it
// as the thread's "last error", which torch's next kernel launch would report
// as its own: each one is cleared (cudaGetLastError) right after it.
//
// Main process only; not thread-safe (the Engine's lock guards it).
#ifndef STOKER_LOADER_CUDA_HOST_H_
#define STOKER_LOADER_CUDA_HOST_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace stoker {

// cudaError_t values this code relies on.
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaErrorNotReady = 600;

// The CUDA runtime functions used, with C types (cudaEvent_t and cudaStream_t
// are pointers; cudaError_t is an int).
struct CudaRuntimeApi {
  int (*host_register)(void* ptr, size_t bytes, unsigned flags) = nullptr;
  int (*host_unregister)(void* ptr) = nullptr;
  int (*event_create_with_flags)(void** event, unsigned flags) = nullptr;
  int (*event_record)(void* event, void* stream) = nullptr;
  int (*event_query)(void* event) = nullptr;
  int (*event_synchronize)(void* event) = nullptr;
  int (*event_destroy)(void* event) = nullptr;
  int (*get_last_error)() = nullptr;

  bool complete() const {
    return host_register && host_unregister && event_create_with_flags && event_record && event_query &&
           event_synchronize && event_destroy && get_last_error;
  }
};

class CudaHost {
 public:
  explicit CudaHost(const CudaRuntimeApi& api) : api_(api) {}
  // Waits for every recorded fence (a DMA may still read the memory),
  // destroys the events and unregisters every range.
  ~CudaHost();
  CudaHost(const CudaHost&) = delete;
  CudaHost& operator=(const CudaHost&) = delete;

  // Registers [p, p + bytes) (cudaHostRegisterPortable; it backs the pages
  // if they are not yet).  Returns the runtime's error; after one, nothing
  // more is registered and pin_error() keeps it.
  int Register(void* p, uint64_t bytes);
  // Unregisters a range Register took; nothing for any other pointer.
  void Unregister(void* p);
  int pin_error() const { return pin_error_; }
  size_t registered() const { return ranges_.size(); }

  // Records fence number recorded()+1 on `stream`.  Returns the runtime's error.
  int Record(void* stream);
  uint64_t recorded() const { return seq_; }
  // The highest fence number known complete (queries the oldest pending
  // ones).  A fence whose query fails with an error other than "not ready"
  // counts as complete: the work it waits for will never run.
  uint64_t Completed();
  // Records one more fence on the last stream seen, waits for all of them,
  // and returns the highest number complete (all recorded ones).
  uint64_t Drain();

 private:
  void Retire();  // destroys every event
  int Clear(int err);  // returns err, after clearing it as the last error

  CudaRuntimeApi api_;
  std::map<void*, uint64_t> ranges_;  // registered: pointer -> bytes
  int pin_error_ = kCudaSuccess;
  struct Fence {
    void* event;
    uint64_t seq;
  };
  std::deque<Fence> pending_;   // recorded, not known complete, oldest first
  std::vector<void*> spare_;    // completed events, reused
  uint64_t seq_ = 0;            // fences recorded
  uint64_t completed_ = 0;      // highest fence known complete
  void* last_stream_ = nullptr;
  bool have_stream_ = false;
};

}  // namespace stoker

#endif  // STOKER_LOADER_CUDA_HOST_H_
