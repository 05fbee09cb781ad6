#include "core/trace.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/trace_buffer.h"
#include "stoker/trace.h"

namespace stoker {
namespace {

constexpr size_t kFlushBytes = 1 << 20;      // a buffer this large is written out
constexpr int64_t kFlushEveryNs = 100'000'000;  // a thread's events are written within this
constexpr auto kSampleEvery = std::chrono::milliseconds(50);  // counters at 20 Hz

// Shared by the process that started the trace and the workers forked from
// it: made when the library loads (before any fork).
struct TracePage {
  std::atomic<uint32_t> on;
  std::atomic<uint32_t> generation;  // one per trace: a buffer of an older one is dropped
  int64_t anchor_ns;                 // CLOCK_MONOTONIC at the start: ts 0
  char dir[1024];                    // where each process writes <pid>.part
};

TracePage* MakePage();
TracePage* Page() {
  static TracePage* const page = MakePage();
  return page;
}

// An event as a buffer holds it (binary: formatting waits for the stop, in
// the process that merges): a head, then text_len bytes of text.
enum RecordType : uint8_t {
  kSliceRec = 'X',    // stage, ts, arg: duration
  kFlowOutRec = 's',  // ts, arg: flow id
  kFlowInRec = 'f',
  kCounterRec = 'C',  // ts, text: name '\0' args (a JSON object)
  kInstantRec = 'i',  // ts, text: name '\0' args
  kThreadRec = 'T',   // text: the thread's name
  kProcessRec = 'P',  // text: the process's name
};
struct RecordHead {
  uint8_t type;
  uint8_t stage;
  uint16_t text_len;
  int32_t tid;
  int64_t ts;
  int64_t arg;
};
static_assert(sizeof(RecordHead) == 24);

struct Buffer {
  std::mutex mu;
  std::string text;          // records (RecordHead + text)
  uint32_t generation = 0;   // of the trace the text belongs to
  int tid = 0;
  int64_t flushed_ns = 0;
  std::string name;          // the thread's track name
};

// This process's buffers and counter sources.  Never destroyed (threads may
// outlive static destruction); a forked child starts from an empty one.
struct Process {
  std::mutex mu;
  std::vector<Buffer*> buffers;
  // The process's track name: read by any thread as it appends (under its
  // buffer's lock, never this mu), so swapped whole.
  std::atomic<std::shared_ptr<const std::string>> name{std::make_shared<const std::string>()};
  const int pid = static_cast<int>(getpid());  // (a forked child's Process is made in the child)
  std::mutex sources_mu;  // (a source appends to the sampler's buffer, which takes mu)
  std::map<int, std::function<void()>> sources;
  int next_source = 1;
  // The process that started the trace:
  std::string output;
  std::thread* sampler = nullptr;
  bool sampler_stop = false;
  std::condition_variable sampler_cv;
  std::mutex sampler_mu;
};

Process* g_process = new Process();

struct BufferHolder {
  Buffer* b = nullptr;
  ~BufferHolder();
};
thread_local BufferHolder t_buffer;

void AtForkChild() {
  // Only the forking thread lives on: the parent's other buffers (and their
  // locks, maybe held) are left behind, and this thread's is emptied.
  g_process = new Process();  // (the old one is left: its locks may be held)
  if (t_buffer.b) {
    Buffer* b = new Buffer();
    b->name = t_buffer.b->name;
    b->tid = static_cast<int>(gettid());
    t_buffer.b = b;
    g_process->buffers.push_back(b);
  }
}

TracePage* MakePage() {
  void* p = mmap(nullptr, sizeof(TracePage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  static TracePage private_page;  // (no shared page: the trace stays in this process)
  TracePage* page = p == MAP_FAILED ? &private_page : new (p) TracePage();
  pthread_atfork(nullptr, nullptr, AtForkChild);
  return page;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string DefaultThreadName() {
  char name[32] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0 || !name[0]) return "thread";
  return name;
}

void AppendRecord(Buffer* b, RecordType type, uint8_t stage, int64_t ts, int64_t arg,
                  std::string_view text = {}) {
  const RecordHead h{type, stage, static_cast<uint16_t>(std::min<size_t>(text.size(), 65535)), b->tid, ts, arg};
  b->text.append(reinterpret_cast<const char*>(&h), sizeof h);
  b->text.append(text.data(), h.text_len);
}

void AppendMetadata(Buffer* b) {
  AppendRecord(b, kThreadRec, 0, 0, 0, b->name);
  const std::shared_ptr<const std::string> name = g_process->name.load();
  if (!name->empty()) AppendRecord(b, kProcessRec, 0, 0, 0, *name);
}

Buffer* ThreadBuffer() {
  if (t_buffer.b) return t_buffer.b;
  auto* b = new Buffer();
  b->tid = static_cast<int>(gettid());
  b->name = DefaultThreadName();
  std::lock_guard<std::mutex> g(g_process->mu);
  g_process->buffers.push_back(b);
  t_buffer.b = b;
  return b;
}

// Writes b's text to its process's part file; b->mu held.
void FlushLocked(Buffer* b) {
  if (b->text.empty()) return;
  if (b->generation == Page()->generation.load(std::memory_order_acquire) && Page()->dir[0]) {
    const std::string path = std::string(Page()->dir) + "/" + std::to_string(g_process->pid) + ".part";
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      size_t off = 0;
      while (off < b->text.size()) {
        const ssize_t n = write(fd, b->text.data() + off, b->text.size() - off);
        if (n <= 0 && errno != EINTR) break;
        if (n > 0) off += static_cast<size_t>(n);
      }
      close(fd);
    }
  }
  b->text.clear();
  b->flushed_ns = StageClockNanos();
}

BufferHolder::~BufferHolder() {
  if (!b) return;
  {
    std::lock_guard<std::mutex> g(b->mu);
    FlushLocked(b);
  }
  std::lock_guard<std::mutex> g(g_process->mu);
  auto& v = g_process->buffers;
  v.erase(std::remove(v.begin(), v.end(), b), v.end());
  delete b;
  b = nullptr;
}

// Appends one event line to this thread's buffer (a trace running).
template <typename F>
void Append(F&& write_event) {
  Buffer* b = ThreadBuffer();
  std::lock_guard<std::mutex> g(b->mu);
  const uint32_t gen = Page()->generation.load(std::memory_order_acquire);
  if (b->generation != gen) {
    b->text.clear();
    b->generation = gen;
    b->flushed_ns = StageClockNanos();
    AppendMetadata(b);
  }
  write_event(b);
  if (b->text.size() >= kFlushBytes) FlushLocked(b);
}

void RunSampler(Process* p) {
  pthread_setname_np(pthread_self(), "stoker-trace");
  auto sample = [p] {
    std::lock_guard<std::mutex> g(p->sources_mu);
    for (auto& [id, source] : p->sources) source();
  };
  std::unique_lock<std::mutex> l(p->sampler_mu);
  while (!p->sampler_stop) {
    l.unlock();
    sample();
    l.lock();
    p->sampler_cv.wait_for(l, kSampleEvery, [p] { return p->sampler_stop; });
  }
  l.unlock();
  sample();  // (the counters as the trace stops)
}

void StopSampler(Process* p) {
  if (!p->sampler) return;
  {
    std::lock_guard<std::mutex> g(p->sampler_mu);
    p->sampler_stop = true;
  }
  p->sampler_cv.notify_all();
  p->sampler->join();
  delete p->sampler;
  p->sampler = nullptr;
}

// The parts' total size, -1 when the directory cannot be read.
int64_t PartsBytes(const std::string& dir, std::vector<std::string>* files) {
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  int64_t total = 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".part") != 0) continue;
    struct stat st;
    const std::string path = dir + "/" + name;
    if (stat(path.c_str(), &st) == 0) total += st.st_size;
    if (files) files->push_back(path);
  }
  closedir(d);
  return total;
}

// The JSON of a part file's records (a torn record at its end, from a
// process killed mid-write, is left out).
void FormatRecords(const std::string& bytes, int pid, int64_t anchor_ns, std::string* out, bool* first) {
  size_t at = 0;
  char line[256];
  while (at + sizeof(RecordHead) <= bytes.size()) {
    RecordHead h;
    std::memcpy(&h, bytes.data() + at, sizeof h);
    if (at + sizeof h + h.text_len > bytes.size()) break;
    const std::string_view text(bytes.data() + at + sizeof h, h.text_len);
    at += sizeof h + h.text_len;
    const double us = static_cast<double>(h.ts - anchor_ns) / 1000.0;
    const size_t nul = text.find('\0');
    const std::string name(text.substr(0, nul));
    const std::string_view args = nul == std::string_view::npos ? std::string_view("{}") : text.substr(nul + 1);
    int n = 0;
    std::string extra;
    switch (h.type) {
      case kSliceRec: {
        const Stage st = static_cast<Stage>(h.stage < kStageCount ? h.stage : 0);
        const char* detail = StageDetail(st);
        n = std::snprintf(line, sizeof line,
                          "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"stoker\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
                          "\"dur\":%.3f%s%s%s}",
                          StageName(st), pid, h.tid, us, static_cast<double>(h.arg) / 1000.0,
                          detail[0] ? ",\"args\":{\"for\":\"" : "", detail, detail[0] ? "\"}" : "");
        break;
      }
      case kFlowOutRec:
      case kFlowInRec:
        n = std::snprintf(line, sizeof line,
                          "{\"ph\":\"%c\",\"name\":\"batch\",\"cat\":\"batch\",\"id\":\"0x%llx\",\"pid\":%d,"
                          "\"tid\":%d,\"ts\":%.3f%s}",
                          h.type, static_cast<unsigned long long>(h.arg), pid, h.tid, us,
                          h.type == kFlowInRec ? ",\"bp\":\"e\"" : "");
        break;
      case kCounterRec:
      case kInstantRec:
        extra = "{\"ph\":\"" + std::string(1, static_cast<char>(h.type)) + "\",\"name\":" + JsonString(name) +
                ",\"pid\":" + std::to_string(pid);
        if (h.type == kInstantRec) extra += ",\"tid\":" + std::to_string(h.tid) + ",\"s\":\"t\",\"cat\":\"stoker\"";
        std::snprintf(line, sizeof line, ",\"ts\":%.3f,\"args\":", us);
        extra += line;
        extra.append(args.data(), args.size());
        extra += '}';
        break;
      case kThreadRec:
      case kProcessRec:
        extra = std::string("{\"ph\":\"M\",\"name\":\"") + (h.type == kThreadRec ? "thread_name" : "process_name") +
                "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(h.type == kThreadRec ? h.tid : 0) +
                ",\"args\":{\"name\":" + JsonString(name) + "}}";
        break;
      default:
        continue;
    }
    if (!*first) *out += ",\n";
    *first = false;
    if (n > 0)
      out->append(line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
    else
      *out += extra;
  }
}

// Made when the library loads, before any worker is forked.
[[maybe_unused]] TracePage* const g_page_made = Page();

}  // namespace

namespace trace_internal {

const std::atomic<uint32_t>* OnWord() { return &Page()->on; }

void Slice(Stage s, int64_t t0, int64_t t1) {
  Append([&](Buffer* b) { AppendRecord(b, kSliceRec, static_cast<uint8_t>(s), t0, t1 - t0); });
}

void Flow(bool out, uint64_t id) {
  if (!Recording()) return;
  Append([&](Buffer* b) {
    AppendRecord(b, out ? kFlowOutRec : kFlowInRec, 0, StageClockNanos(), static_cast<int64_t>(id));
  });
}

void Counter(const char* name, const std::pair<const char*, double>* values, size_t n) {
  if (!Recording() || n == 0) return;
  std::string text = name;
  text += '\0';
  text += '{';
  for (size_t i = 0; i < n; ++i) {
    char v[48];
    std::snprintf(v, sizeof v, ":%.17g", values[i].second);
    if (i) text += ',';
    text += JsonString(values[i].first);
    text += v;
  }
  text += '}';
  Append([&](Buffer* b) { AppendRecord(b, kCounterRec, 0, StageClockNanos(), 0, text); });
}

void Instant(const char* name, const char* args_json) {
  if (!Recording()) return;
  std::string text = name;
  text += '\0';
  text += args_json;
  Append([&](Buffer* b) { AppendRecord(b, kInstantRec, 0, StageClockNanos(), 0, text); });
}

void NameThread(const char* name) {
  Buffer* b = ThreadBuffer();
  std::lock_guard<std::mutex> g(b->mu);
  b->name = name;
  if (b->generation == Page()->generation.load(std::memory_order_acquire) && Recording()) AppendMetadata(b);
}

int64_t FlushThread(bool now) {
  Buffer* b = t_buffer.b;
  if (!b) return -1;
  std::lock_guard<std::mutex> g(b->mu);
  if (b->text.empty()) return -1;
  const int64_t since = StageClockNanos() - b->flushed_ns;
  if (!now && since < kFlushEveryNs) return kFlushEveryNs - since;
  FlushLocked(b);
  return -1;
}

int AddSource(std::function<void()> sample) {
  std::lock_guard<std::mutex> g(g_process->sources_mu);
  const int id = g_process->next_source++;
  g_process->sources.emplace(id, std::move(sample));
  return id;
}

void RemoveSource(int id) {
  std::lock_guard<std::mutex> g(g_process->sources_mu);
  g_process->sources.erase(id);
}

}  // namespace trace_internal

void TraceFlow(bool out, uint64_t id) { ActiveStageRuntime()->flow(out, id); }

void TraceCounter(const char* name, std::initializer_list<std::pair<const char*, double>> values) {
  ActiveStageRuntime()->counter(name, values.begin(), values.size());
}

void TraceCounterValues(const char* name, const std::pair<const char*, double>* values, size_t n) {
  ActiveStageRuntime()->counter(name, values, n);
}

void TraceInstant(const char* name, const std::string& args_json) {
  ActiveStageRuntime()->instant(name, args_json.c_str());
}

void TraceNameThread(const std::string& name) { ActiveStageRuntime()->name_thread(name.c_str()); }

int64_t TraceFlushThread(bool now) { return ActiveStageRuntime()->flush_thread(now); }

void TraceNameProcess(const std::string& name) {
  g_process->name.store(std::make_shared<const std::string>(name));
  if (!trace_internal::Recording()) return;
  Buffer* b = ThreadBuffer();
  std::lock_guard<std::mutex> g(b->mu);
  if (b->generation == Page()->generation.load(std::memory_order_acquire)) AppendMetadata(b);
}

int AddTraceCounterSource(std::function<void()> sample) {
  return ActiveStageRuntime()->add_source(std::move(sample));
}

void RemoveTraceCounterSource(int id) { ActiveStageRuntime()->remove_source(id); }

Status StartTrace(const std::string& path, const std::string& process_name) {
  Process* p = g_process;
  if (Page()->on.load() != 0 || !p->output.empty())
    return Status::InvalidArgument("a trace is already being recorded (to " +
                                   (p->output.empty() ? std::string("another process's file") : p->output) +
                                   "): stop it first");
  if (path.empty()) return Status::InvalidArgument("the trace's path is empty");
  const std::string dir = path + ".parts." + std::to_string(getpid());
  if (dir.size() >= sizeof Page()->dir) return Status::InvalidArgument("the trace's path is too long: " + path);
  std::vector<std::string> stale;
  if (PartsBytes(dir, &stale) >= 0)
    for (const std::string& f : stale) unlink(f.c_str());
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::IOError("cannot make the directory for the trace's parts, " + dir + " (beside " + path + ")",
                           errno);
  {
    std::lock_guard<std::mutex> g(p->mu);
    p->name.store(std::make_shared<const std::string>(process_name));
    p->output = path;
  }
  std::memcpy(Page()->dir, dir.c_str(), dir.size() + 1);
  Page()->anchor_ns = StageClockNanos();
  Page()->generation.fetch_add(1, std::memory_order_acq_rel);
  Page()->on.store(1, std::memory_order_release);
  p->sampler_stop = false;
  p->sampler = new std::thread(RunSampler, p);
  return Status::OK();
}

bool TraceRecording() { return Page()->on.load(std::memory_order_relaxed) != 0; }

Result<std::string> StopTrace() {
  Process* p = g_process;
  if (p->output.empty()) return Status::InvalidArgument("no trace is being recorded in this process");
  StopSampler(p);
  Page()->on.store(0, std::memory_order_release);
  {
    std::lock_guard<std::mutex> g(p->mu);
    for (Buffer* b : p->buffers) {
      std::lock_guard<std::mutex> bg(b->mu);
      FlushLocked(b);
    }
  }
  // Workers write what they hold when they next go idle: wait until the
  // parts stop growing (0.2 s, 1.2 s at most).
  const std::string dir = Page()->dir;
  int64_t last = PartsBytes(dir, nullptr);
  for (int stable = 0, i = 0; stable < 4 && i < 24; ++i) {  // (workers write within 0.1 s)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int64_t now = PartsBytes(dir, nullptr);
    stable = now == last ? stable + 1 : 0;
    last = now;
  }
  std::vector<std::string> parts;
  PartsBytes(dir, &parts);
  std::sort(parts.begin(), parts.end());
  const std::string path = p->output;
  {
    std::lock_guard<std::mutex> g(p->mu);
    p->output.clear();
  }
  // Part by part into the file (a busy loader's trace is hundreds of MB: it
  // is never held whole in memory).
  Result<AtomicFile> file = AtomicFile::Create(path);
  Status written = file.status();
  if (written.ok()) written = file.value().Append(std::string_view("{\"traceEvents\":[\n"));
  std::string out;
  bool first = true;
  for (const std::string& f : parts) {
    const size_t slash = f.rfind('/');
    const int pid = std::atoi(f.c_str() + slash + 1);
    std::string bytes;
    if (FILE* in = std::fopen(f.c_str(), "rb")) {
      char chunk[1 << 16];
      size_t n;
      while ((n = std::fread(chunk, 1, sizeof chunk, in)) > 0) bytes.append(chunk, n);
      std::fclose(in);
    }
    unlink(f.c_str());
    FormatRecords(bytes, pid, Page()->anchor_ns, &out, &first);
    if (written.ok()) written = file.value().Append(out);
    out.clear();
  }
  rmdir(dir.c_str());
  STOKER_RETURN_IF_ERROR(written);
  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  const int64_t realtime = static_cast<int64_t>(rt.tv_sec) * 1'000'000'000 + rt.tv_nsec;
  const int64_t mono = StageClockNanos();
  char other[256];
  // The realtime clock at ts 0 (this machine's), for aligning ranks' files.
  std::snprintf(other, sizeof other,
                "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"stoker\",\"pid\":%d,"
                "\"anchor_realtime_ns\":%lld}}\n",
                p->pid, static_cast<long long>(realtime - (mono - Page()->anchor_ns)));
  STOKER_RETURN_IF_ERROR(file.value().Append(std::string_view(other)));
  STOKER_RETURN_IF_ERROR(file.value().Commit(/*sync=*/false));
  return path;
}

}  // namespace stoker
