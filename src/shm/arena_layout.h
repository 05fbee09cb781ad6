// Shared-memory layout of one loader's arena: the structs every process maps.
//
// Process safety and invariants:
//  * Everything here is a plain struct of fixed-size integers and atomics,
//    addressed by offsets from the arena base, never by pointers, so each
//    process may map the arena at a different address.
//  * Every shared word is at most 64 bits, so a process killed mid-write
//    leaves either the old or the new value.
//  * Ownership of a slot moves with its `state`: the main process owns FREE,
//    READY and HELD slots and may write their plain fields; the worker named
//    in `worker` owns DISPATCHED, FILLING and NEED_SPACE slots.  Plain fields
//    are published by the ring push (release) that hands the slot over and
//    read after the matching pop (acquire).
//  * Rings carry slot ids (task entries also carry control messages, see
//    TaskEntry).  Only the main process allocates arena bytes; workers never
//    change the arena's size.
#ifndef STOKER_SHM_ARENA_LAYOUT_H_
#define STOKER_SHM_ARENA_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/stage.h"
#include "sync/doorbell.h"
#include "sync/spsc_ring.h"

namespace stoker {

inline constexpr uint64_t kArenaMagic = 0x314B524F4B4F5453ull;  // "STOKORK1"
inline constexpr uint32_t kArenaVersion = 5;
inline constexpr uint64_t kPageSize = 4096;

struct ControlBlock {
  uint64_t magic;
  uint32_t version;
  uint32_t num_workers;
  uint32_t max_slots;
  uint32_t reserved0;
  uint64_t reserve_bytes;    // length every process maps
  uint64_t workers_offset;   // WorkerBlock[num_workers]
  uint64_t slots_offset;     // SlotHeader[max_slots]
  uint64_t data_offset;      // first byte of the region heap
  uint64_t max_memory;       // budget: resident bytes of the whole file never exceed it
  std::atomic<uint64_t> committed_bytes;  // current memfd size (main writes); holes are not memory
  alignas(64) DoorbellLayout done_bell;   // main process waits here
  alignas(64) std::atomic<uint32_t> shutdown;  // 1: every worker should exit
  std::atomic<int64_t> epoch;                  // set_epoch(); -1 until set
  std::atomic<uint64_t> shared_seed;           // the iteration's seed every worker shares (a datapipe's shuffle)
  uint64_t loader_id;                          // random: the trace's flow ids (BatchFlowId)
};

// What a worker is doing, for stats and crash reports.
enum class WorkerState : uint32_t { kStarting = 0, kIdle = 1, kBusy = 2, kExited = 3 };

struct WorkerBlock {
  RingLayout tasks;        // main -> worker: TaskEntry values
  RingLayout done;         // worker -> main: slot ids
  alignas(64) DoorbellLayout task_bell;  // the worker waits here
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> state;           // WorkerState
  std::atomic<uint64_t> batches;         // batches published
  std::atomic<uint64_t> busy_ns;         // time spent producing batches
  std::atomic<uint64_t> current_slot;    // slot being filled + 1, 0 if none
  std::atomic<uint64_t> stage_ns[kStageCount];  // busy_ns by stage (core/stage.h), added at each publish
};

enum class SlotState : uint32_t {
  kFree = 0,        // main: unused, may hold a warm region
  kDispatched = 1,  // worker: task queued
  kFilling = 2,     // worker: producing the batch
  kNeedSpace = 3,   // worker: waiting for main to enlarge the region
  kReady = 4,       // main: batch complete, waiting to be handed out
  kHeld = 5,        // main: handed to the training loop
};

enum class SlotResult : uint32_t {
  kOk = 0,           // region holds a batch (batch_format.h)
  kError = 1,        // region holds a pickled exception report
  kStopIteration = 2,// iterable dataset exhausted in this worker
  kCancelled = 3,    // the main process took the task back (no memory now); it is dispatched again
  kNativeError = 4,  // region holds u8 Status::Code + UTF-8 message (a C++ worker thread failed)
};

// Answers to a kNeedSpace request, in needed_bytes (else: the region fits).
inline constexpr uint64_t kSpaceNever = 0;            // bigger than the whole budget: report an error
inline constexpr uint64_t kSpaceRetry = ~uint64_t{0};  // not now: publish kCancelled, untouched

enum class TaskKind : uint32_t {
  kIndices = 0,      // payload: int64[n] sample indices, collated as a batch
  kPickledIndex = 1, // payload: pickle of the sampler's output (any object)
  kIterBatch = 2,    // payload: uint64 count; next `count` items of the worker's iterator
  kIterItem = 3,     // no payload: next item of the worker's iterator, not batched
  kIndex = 4,        // payload: one int64 index, not batched
};

struct alignas(64) SlotHeader {
  std::atomic<uint32_t> state;   // SlotState
  uint32_t worker;
  DoorbellLayout bell;           // a worker in kNeedSpace waits here
  uint32_t result;               // SlotResult
  uint32_t task_kind;            // TaskKind
  uint64_t batch_id;
  uint64_t generation;           // epoch generation the task belongs to
  uint64_t region_offset;        // from arena base
  uint64_t region_capacity;
  uint64_t task_bytes;           // payload at the start of the region
  uint64_t used_bytes;           // written by the worker on publish
  uint64_t needed_bytes;         // written by the worker in kNeedSpace
  uint32_t region_backed;        // 1: the region has its memory; 0: its writer backs it first
};
static_assert(sizeof(SlotHeader) == 128);

// Task ring entries: the high 8 bits are the message kind, the rest a value.
enum class TaskMsg : uint64_t {
  kFill = 1,     // value: slot id
  kResume = 2,   // value: generation; iterable datasets restart their iterator
};
inline uint64_t MakeTaskEntry(TaskMsg m, uint64_t value) {
  return (static_cast<uint64_t>(m) << 56) | (value & ((1ull << 56) - 1));
}
inline TaskMsg TaskEntryMsg(uint64_t e) { return static_cast<TaskMsg>(e >> 56); }
inline uint64_t TaskEntryValue(uint64_t e) { return e & ((1ull << 56) - 1); }

}  // namespace stoker

#endif  // STOKER_SHM_ARENA_LAYOUT_H_
