// node/config_source.h in-process: a ConfigMap-shaped directory (entries NAME -> ..data/NAME,
// ..data swapped by a rename), the node's labels from a function, the clock and the sleeps
// injected. And node/library_gc.h's CollectOnce on a temporary directory.
#include "node/config_source.h"

#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "core/library_gc.h"
#include "node/files.h"
#include "node/interposer_mounts.h"
#include "node/library_gc.h"
#include "tests/deviceplugin/fixtures.h"
#include "tests/node/configmap_dir.h"
#include "tests/node/log_capture.h"

namespace gpushare::node {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

const std::string kLabel = kDefaultConfigNodeLabel;

using testing::ConfigMapDir;

class ConfigSourceTest : public ::testing::Test {
 protected:
  ConfigSourceOptions DirOptions() {
    ConfigSourceOptions o;
    o.flags.config_dir = cm_.path();
    o.node_name = "n1";
    o.labels = [this]() -> Result<NodeLabels> {
      if (api_down_) return Status::Unavailable("connection refused");
      return labels_;
    };
    o.clock = now_;
    o.sleep_ms = [this](int64_t ms) { now_->Advance(ms); };
    return o;
  }
  // A look when it is due, as the watch does.
  ConfigDecision PollNow(ConfigSource& s) {
    now_->Advance(s.NextPollMs() - now_->NowMs());
    return s.Poll(now_->NowMs());
  }
  // What the agent does on a reload: take the snapshot, accept it.
  ConfigSnapshot Load(ConfigSource& s, bool accept = true) {
    Result<ConfigSnapshot> snap = s.Next();
    EXPECT_TRUE(snap.ok()) << snap.status().message();
    s.Outcome(accept);
    return snap.ok() ? *snap : ConfigSnapshot{};
  }

  TempDir tmp_;
  ConfigMapDir cm_{tmp_.Sub("cm")};
  NodeLabels labels_;
  bool api_down_ = false;
  std::shared_ptr<SimulatedClock> now_ = std::make_shared<SimulatedClock>(1000);
};

TEST_F(ConfigSourceTest, TheLabelChoosesAndTheFirstLoadGetsIt) {
  cm_.Publish({{"small", "a: 1\n"}, {"big", "b: 2\n"}});
  labels_[kLabel] = "big";
  auto s = ConfigSource::Open(DirOptions());
  ASSERT_TRUE(s.ok()) << s.status().message();
  ConfigSnapshot snap = Load(**s);
  EXPECT_EQ(snap.name, "big");
  EXPECT_EQ(snap.text, "b: 2\n");
  EXPECT_EQ(snap.path, cm_.path() + "/big");
  EXPECT_EQ(snap.hash, ContentHash64("b: 2\n"));
}

TEST_F(ConfigSourceTest, ASwapOfDataWithNewBytesReloadsAndTheSameBytesDoNot) {
  cm_.Publish({{"small", "a: 1\n"}});
  auto s = ConfigSource::Open(DirOptions());  // no label, one config: that one
  ASSERT_TRUE(s.ok()) << s.status().message();
  Load(**s);
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kNone);
  cm_.Publish({{"small", "a: 1\n"}});  // a new generation, the same bytes
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kNone);
  cm_.Publish({{"small", "a: 2\n"}});
  ConfigDecision d = PollNow(**s);
  EXPECT_EQ(d.action, ConfigAction::kReload);
  EXPECT_EQ(Load(**s).text, "a: 2\n") << "the reload loads the bytes the look saw";
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kNone);
}

TEST_F(ConfigSourceTest, ALabelChangeReloadsTheOtherConfig) {
  cm_.Publish({{"small", "a: 1\n"}, {"big", "b: 2\n"}});
  labels_[kLabel] = "small";
  auto s = ConfigSource::Open(DirOptions());
  ASSERT_TRUE(s.ok());
  Load(**s);
  labels_[kLabel] = "big";
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kReload);
  EXPECT_EQ(Load(**s).name, "big");
}

TEST_F(ConfigSourceTest, AnUnknownLabelLaterKeepsTheConfigAndIsRejectedOnce) {
  cm_.Publish({{"small", "a: 1\n"}, {"big", "b: 2\n"}});
  labels_[kLabel] = "small";
  auto s = ConfigSource::Open(DirOptions());
  ASSERT_TRUE(s.ok());
  Load(**s);
  labels_[kLabel] = "huge";
  ConfigDecision d = PollNow(**s);
  EXPECT_EQ(d.action, ConfigAction::kReject);
  EXPECT_NE(d.message.find("node label nvidia.com/device-plugin.config=\"huge\""),
            std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("available: big, small"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("keeping config \"small\""), std::string::npos) << d.message;
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kNone);
  // A SIGHUP meanwhile reloads the serving config.
  EXPECT_EQ(Load(**s).name, "small");
}

TEST_F(ConfigSourceTest, ARefusedConfigKeepsTheOldOneForSighup) {
  cm_.Publish({{"small", "a: 1\n"}});
  auto s = ConfigSource::Open(DirOptions());
  ASSERT_TRUE(s.ok());
  Load(**s);
  cm_.Publish({{"small", "bad\n"}});
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kReload);
  Load(**s, /*accept=*/false);                          // the agent refused it
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kNone);  // not asked again for the same bytes
  cm_.Publish({{"small", "a: 3\n"}});
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kReload);
}

TEST_F(ConfigSourceTest, AnApiServerDownAtAPollIsAWarning) {
  cm_.Publish({{"small", "a: 1\n"}});
  auto s = ConfigSource::Open(DirOptions());
  ASSERT_TRUE(s.ok());
  Load(**s);
  api_down_ = true;
  ConfigDecision d = PollNow(**s);
  EXPECT_EQ(d.action, ConfigAction::kWarn);
  EXPECT_NE(d.message.find("connection refused"), std::string::npos);
  api_down_ = false;
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kNone);
}

TEST_F(ConfigSourceTest, AtTheStartAnApiServerDownIsRetriedThenTheDefault) {
  cm_.Publish({{"small", "a: 1\n"}, {"big", "b: 2\n"}});
  api_down_ = true;
  ConfigSourceOptions o = DirOptions();
  o.flags.default_config = "small";
  const int64_t started = now_->NowMs();
  auto s = ConfigSource::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(now_->NowMs() - started, 30000) << "retried for the whole budget";
  EXPECT_EQ(Load(**s).name, "small");
}

TEST_F(ConfigSourceTest, AtTheStartAnApiServerDownWithoutDefaultFails) {
  cm_.Publish({{"small", "a: 1\n"}, {"big", "b: 2\n"}});
  api_down_ = true;
  auto s = ConfigSource::Open(DirOptions());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("no --default-config"), std::string::npos)
      << s.status().message();
}

TEST_F(ConfigSourceTest, AtTheStartTheApiServerComingBackIsUsed) {
  cm_.Publish({{"small", "a: 1\n"}, {"big", "b: 2\n"}});
  labels_[kLabel] = "big";
  int calls = 0;
  ConfigSourceOptions o = DirOptions();
  o.labels = [&]() -> Result<NodeLabels> {
    if (++calls < 3) return Status::Unavailable("connection refused");
    return labels_;
  };
  auto s = ConfigSource::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(Load(**s).name, "big");
}

TEST_F(ConfigSourceTest, StartErrorsNameWhatIsWrong) {
  cm_.Publish({{"small", "a: 1\n"}, {"big", "b: 2\n"}});
  {
    labels_[kLabel] = "huge";
    auto s = ConfigSource::Open(DirOptions());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("\"huge\""), std::string::npos) << s.status().message();
    labels_.clear();
  }
  {
    auto s = ConfigSource::Open(DirOptions());  // no label, no default, two configs
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("available: big, small"), std::string::npos)
        << s.status().message();
  }
  {
    ConfigSourceOptions o = DirOptions();
    o.node_name.clear();
    auto s = ConfigSource::Open(o);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("--node-name"), std::string::npos) << s.status().message();
  }
  {
    ConfigSourceOptions o = DirOptions();
    o.config_file = "/etc/c.yaml";
    o.config_file_origin = "CONFIG_FILE";
    auto s = ConfigSource::Open(o);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find(
                  "--config-dir (CONFIG_DIR) and --config (CONFIG_FILE) are mutually exclusive"),
              std::string::npos)
        << s.status().message();
  }
  {
    ConfigSourceOptions o = DirOptions();
    o.flags.config_dir = tmp_.Sub("missing");
    auto s = ConfigSource::Open(o);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("cannot list"), std::string::npos) << s.status().message();
  }
}

TEST_F(ConfigSourceTest, APlainFileIsWatchedByItsBytes) {
  const std::string file = tmp_.Sub("c.yaml");
  std::ofstream(file) << "a: 1\n";
  ConfigSourceOptions o;
  o.config_file = file;
  o.config_file_origin = "--config";
  o.clock = now_;
  auto s = ConfigSource::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE((*s)->watching());
  Load(**s);
  std::ofstream(file) << "a: 1\n";  // rewritten, same bytes
  EXPECT_EQ(PollNow(**s).action, ConfigAction::kNone);
  std::ofstream(file) << "a: 2\n";
  EXPECT_EQ(PollNow(**s), (ConfigDecision{ConfigAction::kReload, "the config file changed"}));
  fs::remove(file);
  ConfigDecision gone = PollNow(**s);
  EXPECT_EQ(gone.action, ConfigAction::kReject);
  EXPECT_NE(gone.message.find("--config: "), std::string::npos) << gone.message;
}

TEST_F(ConfigSourceTest, NoFileNoWatch) {
  auto s = ConfigSource::Open(ConfigSourceOptions{});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)->watching());
  EXPECT_EQ(Load(**s).path, "");
  EXPECT_EQ(StartConfigWatch(*s, [] {}), nullptr);
}

// ---- the watch: inotify first, the poll as the fallback ----------------------------------
//
// StartConfigWatch on a SimulatedClock: its poll comes only when the test advances the clock, so
// a reload asked for while the clock stands still was asked for by an inotify event. Waits are
// liveness bounds (kWait of real time) for the watch thread; Idle gives it real time to do what
// it must not.

constexpr auto kWait = std::chrono::seconds(10);

class ConfigWatchTest : public ::testing::Test {
 protected:
  void TearDown() override { watch_.reset(); }

  ConfigSourceOptions DirOptions() {
    ConfigSourceOptions o;
    o.flags.config_dir = cm_.path();
    o.node_name = "n1";
    o.labels = [this]() -> Result<NodeLabels> {
      std::lock_guard<std::mutex> lock(mu_);
      return labels_;
    };
    o.clock = clock_;
    return o;
  }
  ConfigSourceOptions FileOptions(const std::string& file) {
    ConfigSourceOptions o;
    o.config_file = file;
    o.config_file_origin = "--config";
    o.clock = clock_;
    return o;
  }
  void SetLabel(const std::string& value) {
    std::lock_guard<std::mutex> lock(mu_);
    labels_[kLabel] = value;
  }

  // Opens the source, takes its first config as the agent's start does, starts the watch.
  void Start(ConfigSourceOptions o, bool inotify = true) {
    auto s = ConfigSource::Open(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().message();
    source_ = *s;
    ASSERT_TRUE(source_->Next().ok());
    source_->Outcome(true);
    ConfigWatchOptions w;
    w.clock = clock_;
    w.use_inotify = inotify;
    watch_ = StartConfigWatch(
        source_, [this] { reloads_++; }, w);
    ASSERT_NE(watch_, nullptr);
    // The watch is set once the thread logged that it started.
    ASSERT_TRUE(WaitFor([&] { return log_.Count("event=config_watch_started") == 1; }));
  }

  static bool WaitFor(const std::function<bool()>& done) {
    const auto give_up = std::chrono::steady_clock::now() + kWait;
    while (!done()) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  bool WaitForReloads(int n) {
    return WaitFor([&] { return reloads_.load() >= n; });
  }
  void Idle() { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }

  // What the agent does on the reload: takes the snapshot and accepts it.
  ConfigSnapshot Load() {
    Result<ConfigSnapshot> snap = source_->Next();
    EXPECT_TRUE(snap.ok()) << snap.status().message();
    source_->Outcome(true);
    return snap.ok() ? *snap : ConfigSnapshot{};
  }

  testing::LogCapture log_;  // before the watch's thread
  TempDir tmp_;
  ConfigMapDir cm_{tmp_.Sub("cm")};
  std::shared_ptr<SimulatedClock> clock_ = std::make_shared<SimulatedClock>();
  std::mutex mu_;
  NodeLabels labels_;
  std::atomic<int> reloads_{0};
  std::shared_ptr<ConfigSource> source_;
  std::unique_ptr<Companion> watch_;
};

TEST_F(ConfigWatchTest, AConfigMapSwapIsSeenAtOnceNotAtThePoll) {
  cm_.Publish({{"small", "a: 1\n"}, {"big", "a: 2\n"}});
  SetLabel("small");
  Start(DirOptions());
  cm_.Publish({{"small", "a: 3\n"}, {"big", "a: 2\n"}});  // ..data swapped by a rename
  ASSERT_TRUE(WaitForReloads(1)) << log_.Text();
  EXPECT_EQ(Load().text, "a: 3\n");
  EXPECT_EQ(log_.Count("trigger=changed"), 1u) << log_.Text();
  cm_.Publish({{"small", "a: 4\n"}, {"big", "a: 2\n"}});
  ASSERT_TRUE(WaitForReloads(2));
  EXPECT_EQ(Load().text, "a: 4\n");
}

TEST_F(ConfigWatchTest, APlainFileIsLookedAtWhenItsWriterClosesIt) {
  const std::string file = tmp_.Sub("c.yaml");
  std::ofstream(file) << "a: 1\n";
  Start(FileOptions(file));
  std::ofstream(tmp_.Sub("other.yaml")) << "b: 1\n";  // not the config: ignored
  {
    std::ofstream out(file);  // edited in place: looked at on IN_CLOSE_WRITE, not mid-write
    out << "a: 2\n";
    out.flush();
    Idle();
    EXPECT_EQ(reloads_.load(), 0) << "a file still open is not looked at";
    out << "b: 2\n";
  }
  ASSERT_TRUE(WaitForReloads(1));
  EXPECT_EQ(Load().text, "a: 2\nb: 2\n");
  fs::remove(file);  // replaced by a new file: looked at once it is written
  {
    std::ofstream out(file);
    out.flush();
    Idle();
    EXPECT_EQ(reloads_.load(), 1) << "a file just created is not looked at before it is written";
    out << "a: 5\n";
  }
  ASSERT_TRUE(WaitForReloads(2));
  EXPECT_EQ(Load().text, "a: 5\n");
}

// Which events make the watch look at once (issue 30: on a loaded machine the watch read the
// IN_DELETE of a file removed and made again only after the new file existed, empty and still
// open, and reloaded that: a config of defaults).
TEST(ConfigEventNeedsLook, AFileMadeAgainIsLookedAtOnceWritten) {
  EXPECT_FALSE(ConfigEventNeedsLook(IN_CREATE, true)) << "just created: IN_CLOSE_WRITE follows";
  EXPECT_FALSE(ConfigEventNeedsLook(IN_DELETE, true))
      << "removed and made again: IN_CLOSE_WRITE follows";
  EXPECT_TRUE(ConfigEventNeedsLook(IN_DELETE, false)) << "gone: the source decides";
  EXPECT_TRUE(ConfigEventNeedsLook(IN_CREATE, false)) << "a link made (a ConfigMap's)";
  EXPECT_TRUE(ConfigEventNeedsLook(IN_CLOSE_WRITE, true));
  EXPECT_TRUE(ConfigEventNeedsLook(IN_MOVED_TO, true)) << "a file renamed into place is whole";
  EXPECT_TRUE(ConfigEventNeedsLook(IN_MOVED_TO, false));
}

TEST_F(ConfigWatchTest, ALabelChangeIsSeenAtThePoll) {
  cm_.Publish({{"small", "a: 1\n"}, {"big", "a: 2\n"}});
  SetLabel("small");
  Start(DirOptions());
  SetLabel("big");  // the node is not watched: only the poll sees it
  Idle();
  EXPECT_EQ(reloads_.load(), 0);
  clock_->Advance(source_->interval_ms());
  ASSERT_TRUE(WaitForReloads(1));
  EXPECT_EQ(Load().name, "big");
  EXPECT_EQ(log_.Count("trigger=poll"), 1u) << log_.Text();
}

TEST_F(ConfigWatchTest, WithoutInotifyThePollFindsTheChange) {
  cm_.Publish({{"small", "a: 1\n"}});
  Start(DirOptions(), /*inotify=*/false);
  EXPECT_EQ(log_.Count("event=config_watch_unavailable"), 1u) << log_.Text();
  cm_.Publish({{"small", "a: 2\n"}});
  clock_->Advance(source_->interval_ms() - 1);
  Idle();
  EXPECT_EQ(reloads_.load(), 0) << "nothing before the poll is due";
  clock_->Advance(1);
  ASSERT_TRUE(WaitForReloads(1));
  EXPECT_EQ(Load().text, "a: 2\n");
}

TEST_F(ConfigWatchTest, ADirectoryThatGoesIsWatchedAgainFromThePoll) {
  const std::string dir = tmp_.Sub("etc");
  fs::create_directories(dir);
  const std::string file = dir + "/c.yaml";
  std::ofstream(file) << "a: 1\n";
  Start(FileOptions(file));
  fs::remove_all(dir);  // the watch goes with it: logged, never fatal
  ASSERT_TRUE(WaitFor([&] { return log_.Count("event=config_watch_failed") == 1; })) << log_.Text();
  fs::create_directories(dir);
  std::ofstream(file) << "a: 2\n";
  Idle();
  EXPECT_EQ(reloads_.load(), 0) << "no watch: the poll finds it";
  clock_->Advance(source_->interval_ms());
  ASSERT_TRUE(WaitForReloads(1));
  EXPECT_EQ(Load().text, "a: 2\n");
  EXPECT_EQ(log_.Count("event=config_watch_restored"), 1u) << log_.Text();
  std::ofstream(file) << "a: 3\n";  // watched again: at once
  ASSERT_TRUE(WaitForReloads(2));
  EXPECT_EQ(Load().text, "a: 3\n");
}

// ---- the collection on a real directory ----------------------------------------------------

class LibraryGcFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = tmp_.Sub("lib");
    state_ = tmp_.Sub("containers");
    fs::create_directories(host_);
    fs::create_directories(state_);
  }
  std::string Version(const std::string& name) {
    fs::create_directories(host_ + "/" + name);
    std::ofstream(host_ + "/" + name + "/libgpushare-cuda.so") << "x";
    return host_ + "/" + name;
  }
  // A state directory as Allocate leaves it (marker, then ld.so.preload).
  std::string State(const std::string& id, const std::string& library, const std::string& device,
                    bool marker = true, bool preload = true) {
    const std::string d = state_ + "/" + id;
    fs::create_directories(d + "/shared");
    std::ofstream(d + "/shared/region") << "r";
    if (marker)
      std::ofstream(d + "/allocation")
          << EncodeAllocationMarker({library, "nvidia.com/gpu", {device}});
    if (preload)
      std::ofstream(d + "/ld.so.preload") << "/usr/local/gpushare/lib/libgpushare-cuda.so\n";
    return d;
  }
  InterposerPaths::View View(const std::string& current) {
    InterposerPaths p;
    p.Loaded(state_, host_, current);
    return p.Get();
  }
  static LiveDeviceLister Live(std::set<LiveDevice> live) {
    return [live]() -> Result<std::set<LiveDevice>> { return live; };
  }
  static int64_t Later() { return static_cast<int64_t>(time(nullptr)) + 3600; }  // past the grace

  TempDir tmp_;
  std::string host_, state_;
};

TEST_F(LibraryGcFsTest, RemovesWhatNoContainerUsesAndKeepsTheRest) {
  const std::string v1 = Version("0.1.0-00000000000000aa"), v2 = Version("0.2.0-00000000000000bb");
  const std::string v3 = Version("0.3.0-00000000000000cc");
  fs::create_directories(host_ + "/.install-1-0");  // an install in progress: not a version
  fs::create_directories(host_ + "/other");         // not ours
  const std::string used = State("c-1", v1, "GPU-1::0");
  const std::string gone = State("c-2", v2, "GPU-1::1");
  const std::string half = State("c-3", v2, "GPU-1::2", true, false);
  GcPlan p = CollectOnce(View(v3), Live({{"nvidia.com/gpu", "GPU-1::0"}}), Later());
  EXPECT_TRUE(fs::exists(used));
  EXPECT_FALSE(fs::exists(gone));
  EXPECT_FALSE(fs::exists(half));
  EXPECT_TRUE(fs::exists(v1)) << "a container still uses it";
  EXPECT_FALSE(fs::exists(v2));
  EXPECT_TRUE(fs::exists(v3)) << "the installed version";
  EXPECT_TRUE(fs::exists(host_ + "/.install-1-0"));
  EXPECT_TRUE(fs::exists(host_ + "/other"));
  EXPECT_EQ(p.state_dirs.size(), 2u);
  EXPECT_EQ(p.library_dirs.size(), 1u);
}

TEST_F(LibraryGcFsTest, NothingYoungNothingWithoutKubelet) {
  const std::string v1 = Version("0.1.0-00000000000000aa"), v2 = Version("0.2.0-00000000000000bb");
  const std::string s = State("c-1", v1, "GPU-1::0");
  CollectOnce(View(v2), Live({}), static_cast<int64_t>(time(nullptr)));  // everything just made
  EXPECT_TRUE(fs::exists(s));
  EXPECT_TRUE(fs::exists(v1));
  CollectOnce(
      View(v2), [] { return Result<std::set<LiveDevice>>(Status::Unavailable("no kubelet")); },
      Later());
  EXPECT_TRUE(fs::exists(s));
  EXPECT_TRUE(fs::exists(v1));
}

TEST_F(LibraryGcFsTest, AnUnmarkedStateDirKeepsEveryVersion) {
  const std::string v1 = Version("0.1.0-00000000000000aa"), v2 = Version("0.2.0-00000000000000bb");
  const std::string legacy = State("c-1", "", "", /*marker=*/false);
  CollectOnce(View(v2), Live({}), Later());
  EXPECT_TRUE(fs::exists(legacy));
  EXPECT_TRUE(fs::exists(v1));
}

TEST_F(LibraryGcFsTest, AllocateWritesTheMarkerTheCollectionReads) {
  const std::string v1 = Version("0.1.0-00000000000000aa");
  InterposerMountOptions o{v1, state_};
  Result<InterposerSetup> setup = PrepareInterposer(
      {{"GPU-1", 1024, 0}}, o, AllocationMarker{"", "nvidia.com/gpu", {"GPU-1::3"}});
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  std::vector<fs::path> dirs(fs::directory_iterator(state_), fs::directory_iterator{});
  ASSERT_EQ(dirs.size(), 1u);
  std::ifstream in(dirs[0] / "allocation");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "library=" + v1 + "\nresource=nvidia.com/gpu\ndevice=GPU-1::3\n");
  // In use: kept; freed: collected.
  CollectOnce(View(v1), Live({{"nvidia.com/gpu", "GPU-1::3"}}), Later());
  EXPECT_TRUE(fs::exists(dirs[0]));
  CollectOnce(View(v1), Live({}), Later());
  EXPECT_FALSE(fs::exists(dirs[0]));
  EXPECT_TRUE(fs::exists(v1));
}

}  // namespace
}  // namespace gpushare::node
