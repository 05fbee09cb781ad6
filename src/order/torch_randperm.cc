// TorchRandperm (torch_randperm.h).
#include "order/torch_randperm.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace stoker {

TorchMT19937 TorchMT19937::Seeded(uint64_t seed) {
  TorchMT19937 g;
  g.state[0] = static_cast<uint32_t>(seed & 0xffffffffu);
  for (int j = 1; j < kN; ++j) g.state[j] = 1812433253u * (g.state[j - 1] ^ (g.state[j - 1] >> 30)) + static_cast<uint32_t>(j);
  g.left = 1;
  g.next = 0;
  return g;
}

void TorchMT19937::Twist() {
  auto twist = [](uint32_t u, uint32_t v) {
    const uint32_t mixed = (u & 0x80000000u) | (v & 0x7fffffffu);
    return (mixed >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
  };
  left = kN;
  next = 0;
  int k = 0;
  for (; k < kN - kM; ++k) state[k] = state[k + kM] ^ twist(state[k], state[k + 1]);
  for (; k < kN - 1; ++k) state[k] = state[k + kM - kN] ^ twist(state[k], state[k + 1]);
  state[kN - 1] = state[kM - 1] ^ twist(state[kN - 1], state[0]);
}

TorchRandperm::TorchRandperm(uint64_t n, uint64_t count, const TorchMT19937& gen, int extra_perms)
    : n_(n), count_(std::min(count, n)), extra_(extra_perms), gen_(gen) {
  bytes_ = std::max<size_t>(4096, n_ * sizeof(uint32_t));
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) words_ = static_cast<uint32_t*>(p);
}

namespace {
// A log block's entries: (place - floor) << 32 | value.
constexpr uint64_t kLogBlock = 4096;
// random() % m for the forward draw (m < 2^32 / 20 there): the same value as
// torch's 64-bit remainder, by a cheaper 32-bit division.
inline uint64_t Below(uint32_t r, uint64_t m) { return r % static_cast<uint32_t>(m); }
}  // namespace

void TorchRandperm::NotBefore(uint64_t place) {
  if (started_flag_.load()) return;  // (too late: the draw has begun)
  std::lock_guard<std::mutex> g(mu_);
  asked_floor_ = std::max(asked_floor_, place);
}

void TorchRandperm::Start(uint64_t need) {
  std::call_once(started_, [&] {
    started_flag_ = true;
    {
      std::lock_guard<std::mutex> g(mu_);
      const uint64_t steps = n_ > 0 ? n_ - 1 : 0;
      const uint64_t f = std::min(asked_floor_, steps);
      if (words_ && f > 0 && n_ < kTorchRandpermLargeN) {
        // At most f entries, plus a part-filled block per window and span
        // (SkipToFloor).
        log_bytes_ = (f + kLogBlock * ((f >> 16) + ((n_ - f) >> 16) + 4)) * sizeof(uint64_t);
        void* p = mmap(nullptr, log_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {  // (else the plain draw, from step 0)
          log_ = static_cast<uint64_t*>(p);
          if (log_bytes_ >= (size_t{8} << 20)) madvise(log_, log_bytes_, MADV_HUGEPAGE);
          floor_ = f;
        }
      }
    }
    // Huge pages only when the draw must reach far before anything is
    // read (a resumed epoch's first batch, the whole draw wanted): every
    // swap is a TLB miss with 4 KiB pages, and 2 MiB ones drew a resume at
    // 30% of 10^8 in 0.55 s against 0.96 s.  A fresh epoch keeps 4 KiB
    // pages: its draw touches the whole array at random from its first
    // steps, and faulting in (and compacting memory for) every 2 MiB page at
    // once held up its first batches for about a second on this project's
    // VM; 4 KiB faults spread over the draw cost a few hundred ms in all at
    // 10^8 (docs/benchmarks.md).
    if (words_ && bytes_ >= (size_t{8} << 20))
      madvise(words_, bytes_, need >= kAhead ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    thread_pid_ = getpid();
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "stoker-randperm");
      Run();
    });
  });
}

TorchRandperm::~TorchRandperm() {
  Stop();
  if (words_) munmap(words_, bytes_);
  if (log_) munmap(log_, log_bytes_);
}

void TorchRandperm::Stop() {
  if (thread_.joinable() && getpid() != thread_pid_) {  // a forked copy: the drawing thread does not exist here
    thread_.detach();
    return;
  }
  stop_ = true;
  {
    std::lock_guard<std::mutex> g(mu_);
    cv_.notify_all();  // (a drawer waiting in Pace)
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> g(mu_);
  finished_ = true;
  cv_.notify_all();
}

void TorchRandperm::Publish(uint64_t done) {
  // (seq_cst with the waiter's pair: one of the two sees the other)
  done_.store(done, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> g(mu_);
    cv_.notify_all();
  }
}

void TorchRandperm::Pace(uint64_t done) {
  if (all_wanted_.load(std::memory_order_acquire) || done < wanted_.load(std::memory_order_seq_cst) + kAhead) return;
  std::unique_lock<std::mutex> l(mu_);
  pacing_.store(true, std::memory_order_seq_cst);
  cv_.wait(l, [&] {
    return stop_.load() || all_wanted_.load() || done < wanted_.load(std::memory_order_seq_cst) + kAhead;
  });
  pacing_.store(false);
}

namespace {
// Logs of moves, one per span of places, in blocks of one arena: appended
// in step order, read back in it.  A log read back gives its blocks to the
// others.
class SpanLogs {
 public:
  SpanLogs(uint64_t* arena, size_t spans) : arena_(arena), blocks_(spans), cur_(spans), end_(spans) {}
  void Put(size_t s, uint64_t e) {
    if (cur_[s] == end_[s]) Grow(s);
    *cur_[s]++ = e;
  }
  // Calls f(entry) for span s's entries in order, then empties it.
  template <typename F>
  void Drain(size_t s, F&& f) {
    for (size_t b = 0; b < blocks_[s].size(); ++b) {
      const uint64_t* e = arena_ + uint64_t{blocks_[s][b]} * kLogBlock;
      const uint64_t* stop = b + 1 == blocks_[s].size() ? cur_[s] : e + kLogBlock;
      for (; e < stop; ++e) f(*e);
      free_.push_back(blocks_[s][b]);
    }
    blocks_[s].clear();
    cur_[s] = end_[s] = nullptr;
  }

 private:
  void Grow(size_t s) {
    uint32_t id = next_;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      ++next_;
    }
    blocks_[s].push_back(id);
    cur_[s] = arena_ + uint64_t{id} * kLogBlock;
    end_[s] = cur_[s] + kLogBlock;
  }
  uint64_t* arena_;
  std::vector<std::vector<uint32_t>> blocks_;
  std::vector<uint64_t*> cur_, end_;
  std::vector<uint32_t> free_;
  uint32_t next_ = 0;
};
}  // namespace

bool TorchRandperm::SkipToFloor(uint64_t* ring) {
  constexpr uint64_t look = kLook;
  const uint64_t f = floor_, steps = n_ - 1;
  // Below f: windows of 2^16 places (256 KiB of words, in the cache), the
  // cursor's window dense, the moves to later windows logged.  At and past
  // f: spans of at least 2^16 places, at most ~512 of them, each log
  // written out at the end while its span is in the cache.
  constexpr int kWindowShift = 16;
  constexpr uint64_t kWindow = uint64_t{1} << kWindowShift;
  int shift = kWindowShift;
  while (((n_ - f) >> shift) > 512) ++shift;
  const size_t windows = static_cast<size_t>((f >> kWindowShift) + 1);
  const size_t spans = static_cast<size_t>(((n_ - f) >> shift) + 1);
  SpanLogs logs(log_, windows + spans);  // windows first, then spans
  std::vector<uint32_t> win(kWindow);    // the cursor's window: value + 1, 0 for "its own place"
  for (uint64_t lo = 0; lo < f; lo += kWindow) {
    const uint64_t hi = std::min(lo + kWindow, f);
    std::fill(win.begin(), win.end(), 0u);
    logs.Drain(static_cast<size_t>(lo >> kWindowShift),
               [&](uint64_t e) { win[e >> 32] = static_cast<uint32_t>(e) + 1; });
    for (uint64_t i = lo; i < hi; ++i) {
      const uint64_t z = ring[i % look];
      if (i + look < steps) ring[i % look] = Below(gen_(), n_ - i - look);
      const uint32_t w = win[i - lo];
      const uint32_t a = w ? w - 1 : static_cast<uint32_t>(i);  // what position i holds before its step
      const uint64_t t = i + z;
      if (t < hi) {
        win[t - lo] = a + 1;
      } else if (t < f) {
        logs.Put(static_cast<size_t>(t >> kWindowShift), ((t & (kWindow - 1)) << 32) | a);
      } else {
        logs.Put(windows + static_cast<size_t>((t - f) >> shift), ((t - f) << 32) | a);
      }
    }
    if (stop_.load(std::memory_order_relaxed)) return false;
  }
  for (size_t s = 0; s < spans; ++s)  // in step order within a span: the last move to a place holds
    logs.Drain(windows + s, [&](uint64_t e) { Set(f + (e >> 32), static_cast<uint32_t>(e)); });
  munmap(log_, log_bytes_);
  log_ = nullptr;
  for (uint64_t k = f; k < std::min(f + look, steps); ++k) __builtin_prefetch(words_ + k + ring[k % look], 1);
  return true;
}

void TorchRandperm::Run() {
  if (!words_) {  // (no memory: Read says so; final_state must not wait)
    std::lock_guard<std::mutex> g(mu_);
    finished_ = true;
    cv_.notify_all();
    return;
  }
  constexpr uint64_t kPublishEvery = 1024;
  uint64_t ring[kLook];  // the places of the next kLook steps
  if (n_ < kTorchRandpermLargeN) {
    // Forward Fisher-Yates: position i is final after step i.
    const uint64_t steps = n_ > 0 ? n_ - 1 : 0;
    for (uint64_t k = 0; k < std::min(kLook, steps); ++k) {
      ring[k] = Below(gen_(), n_ - k);
      __builtin_prefetch(words_ + k + ring[k], 1);
    }
    uint64_t first = 0;
    if (floor_ > 0) {
      if (!SkipToFloor(ring)) return;
      first = floor_;
      Publish(first);
    }
    for (uint64_t i = first; i < steps; ++i) {
      const uint64_t z = ring[i % kLook];
      if (i + kLook < steps) {
        const uint64_t next = Below(gen_(), n_ - i - kLook);
        ring[i % kLook] = next;
        __builtin_prefetch(words_ + i + kLook + next, 1);
      }
      const uint32_t a = At(i), b = At(i + z);
      Set(i, b);
      Set(i + z, a);
      if ((i & (kPublishEvery - 1)) == 0) {
        if (stop_.load(std::memory_order_relaxed)) return;
        Publish(i + 1);
        Pace(i + 1);
      }
    }
  } else {
    // Inside-out: nothing is final before the end.
    for (uint64_t k = 0; k < std::min(kLook, n_); ++k) {
      ring[k] = gen_.Random64() % (k + 1);
      __builtin_prefetch(words_ + ring[k], 1);
    }
    for (uint64_t i = 0; i < n_; ++i) {
      const uint64_t z = ring[i % kLook];
      if (i + kLook < n_) {
        const uint64_t next = gen_.Random64() % (i + kLook + 1);
        ring[i % kLook] = next;
        __builtin_prefetch(words_ + next, 1);
      }
      Set(i, At(z));
      Set(z, i);
      if ((i & 0xfffff) == 0 && stop_.load(std::memory_order_relaxed)) return;
    }
  }
  Publish(n_);
  {
    std::lock_guard<std::mutex> g(mu_);
    after_order_ = gen_;
  }
  for (int e = 0; e < extra_ && !stop_.load(); ++e) {  // drawn, thrown away
    if (n_ < kTorchRandpermLargeN) {
      for (uint64_t i = 0; i + 1 < n_; ++i) (void)gen_();
    } else {
      for (uint64_t i = 0; i < n_; ++i) (void)gen_.Random64();
    }
  }
  std::lock_guard<std::mutex> g(mu_);
  finished_ = true;
  cv_.notify_all();
}

Status TorchRandperm::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > count_) return Status::InvalidArgument("order positions past its end");
  if (!words_) return Status::ResourceExhausted("no memory for a permutation of " + std::to_string(n_) + " samples");
  const uint64_t need = pos + n;
  Start(need);
  if (n > 0 && pos < floor_)
    return Status::InvalidArgument("place " + std::to_string(pos) + " of the permutation is before " +
                                   std::to_string(floor_) + ", where its reader promised to start (NotBefore)");
  uint64_t w = wanted_.load();
  while (need > w && !wanted_.compare_exchange_weak(w, need)) {
  }
  if (need > w && pacing_.load(std::memory_order_seq_cst)) {  // the drawer waits for reads to move on
    std::lock_guard<std::mutex> g(mu_);
    cv_.notify_all();
  }
  if (done_.load(std::memory_order_acquire) < need) {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_.load(std::memory_order_seq_cst) >= need || finished_; });
    waiters_.fetch_sub(1);
    if (done_.load() < need) return Status::Cancelled("the permutation was stopped");
  }
  for (uint64_t k = 0; k < n; ++k) out[k] = At(pos + k);
  return Status::OK();
}

TorchMT19937 TorchRandperm::final_state(bool with_extra) {
  all_wanted_.store(true);
  Start(n_);
  {
    std::lock_guard<std::mutex> g(mu_);
    cv_.notify_all();
  }
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return finished_; });
  return with_extra ? gen_ : after_order_;
}

}  // namespace stoker
