#include "core/trace.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "stoker/trace.h"

namespace stoker {
namespace {

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string TempPath(const char* name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(getpid()) + ".json";
}

TEST(Trace, OffByDefaultAndEventsOutsideATraceAreNotRecorded) {
  EXPECT_FALSE(TraceRecording());
  EXPECT_FALSE(TraceOn());
  { StageScope s(Stage::kRead); }
  TraceFlow(true, 7);
  EXPECT_FALSE(StopTrace().ok());  // none running
}

TEST(Trace, SlicesFlowsCountersAndTracksOfThreadsAndAForkedProcess) {
  const std::string path = TempPath("trace");
  int samples = 0;
  const int source = AddTraceCounterSource([&] {
    ++samples;
    TraceCounter("queue", {{"ready", 3}, {"held", 1}});
  });
  ASSERT_TRUE(StartTrace(path, "the \"test\"").ok());
  EXPECT_TRUE(TraceOn());
  EXPECT_FALSE(StartTrace(path).ok());  // one at a time
  {
    StageScope w(Stage::kWaitBatch);
    TraceFlow(false, 0xabc);
  }
  TraceInstant("autotune", "{\"knob\":\"num_workers\",\"old\":2,\"new\":3}");
  std::thread([] {
    TraceNameThread("reader 0");
    StageScope r(Stage::kRead);
    StageScope d(Stage::kDecode);
  }).join();
  const pid_t child = fork();
  if (child == 0) {  // a worker: its own track, its events in its part file
    TraceNameProcess("worker 0");
    {
      StageScope p(Stage::kPublish);
      TraceFlow(true, 0xabc);
    }
    TraceFlushThread(/*now=*/true);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // (a few counter samples)
  Result<std::string> written = StopTrace();
  RemoveTraceCounterSource(source);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written.value(), path);
  EXPECT_FALSE(TraceOn());
  const std::string text = Read(path);
  EXPECT_EQ(text.rfind("{\"traceEvents\":[", 0), 0u);
  EXPECT_NE(text.find("\"otherData\":{\"producer\":\"stoker\""), std::string::npos);
  EXPECT_NE(text.find("\"name\":\"wait\",\"cat\":\"stoker\",\"pid\":" + std::to_string(getpid())), std::string::npos);
  EXPECT_NE(text.find("\"args\":{\"for\":\"batch\"}"), std::string::npos);
  EXPECT_NE(text.find("\"name\":\"the \\\"test\\\"\""), std::string::npos);  // (escaped)
  EXPECT_NE(text.find("{\"name\":\"reader 0\"}"), std::string::npos);
  EXPECT_EQ(Count(text, "\"name\":\"decode\""), 1u);
  EXPECT_EQ(Count(text, "\"name\":\"read\""), 1u);
  EXPECT_NE(text.find("\"name\":\"publish\",\"cat\":\"stoker\",\"pid\":" + std::to_string(child)), std::string::npos);
  EXPECT_NE(text.find("{\"name\":\"worker 0\"}"), std::string::npos);
  EXPECT_EQ(Count(text, "\"id\":\"0xabc\""), 2u);  // out of the publish, into the wait
  EXPECT_NE(text.find("\"ph\":\"i\",\"name\":\"autotune\""), std::string::npos);
  EXPECT_NE(text.find("\"args\":{\"knob\":\"num_workers\",\"old\":2,\"new\":3}}"), std::string::npos);
  EXPECT_GE(samples, 2);
  EXPECT_GE(Count(text, "\"name\":\"queue\""), 2u);
  EXPECT_NE(text.find("\"args\":{\"ready\":3,\"held\":1}"), std::string::npos);
  // nothing left beside it, and a second trace starts afresh
  EXPECT_NE(access((path + ".parts." + std::to_string(getpid())).c_str(), F_OK), 0);
  ASSERT_TRUE(StartTrace(path).ok());
  Result<std::string> again = StopTrace();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Count(Read(path), "\"name\":\"decode\""), 0u);
  std::remove(path.c_str());
}

TEST(Trace, AnUnwritableDirectoryIsAClearError) {
  Status st = StartTrace("/nonexistent/dir/run.json");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/dir/run.json"), std::string::npos);
  EXPECT_FALSE(TraceRecording());
}

}  // namespace
}  // namespace stoker
