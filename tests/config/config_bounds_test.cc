// Hostile and mistaken inputs to the config loader: what is not a regular file, files past the
// size limit, documents with too many YAML values, problem lists that would grow with the input
// (overlapping sharing entries were reported pair by pair: 1,000 entries gave 499,500 lines),
// control bytes in messages, and the empty file. Every case must end with a clear message in
// bounded time and memory; none may block (a FIFO) or be taken for "all defaults" (a directory).
// Two text-only cases (the overlap naming the first entry that takes every device, and NULs
// written as escapes) are data: tests/testdata/config/bounds.txt (docs/testing.md).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strings.h"
#include "config/file_read.h"
#include "config/node_config_loader.h"
#include "config/yaml_reader.h"
#include "tests/config/input_files.h"

namespace gpushare {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class ConfigBounds : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    return scratch_.Write(name, text);
  }

  testing::ScratchDir scratch_;
  const std::string dir_ = scratch_.path();
};

std::string OverlappingEntries(int n) {
  std::string s = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n";
  for (int i = 0; i < n; ++i) s += "    - name: nvidia.com/gpu\n      replicas: 2\n";
  return s;
}

std::vector<std::string> ProblemLines(const Result<LoadedNodeConfig>& r) {
  if (r.ok()) return {};
  return SplitLines(r.status().message());
}

// The case: 1,000 entries of nvidia.com/gpu, each taking every GPU. Every entry after
// the first overlaps; one line per overlapping entry, at most 20 listed, the rest counted.
TEST_F(ConfigBounds, OverlappingEntriesAreListedOncePerEntryAndCapped) {
  auto r = ValidateConfigFile(Write("overlap.yaml", OverlappingEntries(1000)));
  ASSERT_FALSE(r.ok());
  std::vector<std::string> lines = ProblemLines(r);
  std::cout << "1000 overlapping entries: " << lines.size() << " lines, "
            << r.status().message().size() << " bytes of message\n";
  ASSERT_EQ(lines.size(), 21u) << "20 problems and a count of the rest";
  EXPECT_EQ(lines[0],
            "sharing.timeSlicing.resources[1].devices: overlaps sharing.timeSlicing.resources[0], "
            "which shares "
            "the same resource nvidia.com/gpu (one of them selects all devices); give both "
            "explicit devices lists");
  EXPECT_THAT(lines[2], HasSubstr("sharing.timeSlicing.resources[3].devices: overlaps "
                                  "sharing.timeSlicing.resources[0] (and 2 more entries)"));
  EXPECT_EQ(lines[20], "... and 979 more problems (999 in all)");
}

TEST_F(ConfigBounds, EveryProblemIsCountedButOnlyTwentyAreListedInFileOrder) {
  std::string s = "flags:\n";
  for (int i = 0; i < 500; ++i) s += "  unknown" + std::to_string(i) + ": 1\n";
  auto r = ValidateConfigFile(Write("unknown.yaml", s));
  std::vector<std::string> lines = ProblemLines(r);
  ASSERT_EQ(lines.size(), 21u);
  for (int i = 0; i < 20; ++i)
    EXPECT_THAT(lines[i], StartsWith("flags.unknown" + std::to_string(i) + ": unknown key"));
  EXPECT_EQ(lines[20], "... and 480 more problems (500 in all)");
}

TEST_F(ConfigBounds, DirectoryIsRefusedNotTakenForDefaults) {
  auto r = ValidateConfigFile(dir_);
  ASSERT_FALSE(r.ok()) << "a directory was accepted as a config with every default";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr(dir_), HasSubstr("is a directory")));
  NodeConfigFlags flags;
  flags.config_file = dir_;
  EXPECT_FALSE(LoadNodeConfigWithNotes(flags, {}).ok());
  EXPECT_FALSE(LoadNodeConfigWithNotes({}, {{"CONFIG_FILE", dir_}}).ok());
}

TEST_F(ConfigBounds, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = scratch_.Fifo("fifo.yaml");
  ASSERT_FALSE(fifo.empty());
  auto r = testing::ReadFifoWithin(fifo, [&] { return ValidateConfigFile(fifo); });
  ASSERT_TRUE(r.has_value()) << "reading a FIFO blocked";
  ASSERT_FALSE(r->ok());
  EXPECT_THAT(r->status().message(), AllOf(HasSubstr(fifo), HasSubstr("FIFO")));
}

TEST_F(ConfigBounds, DeviceIsRefused) {
  auto r = ValidateConfigFile("/dev/null");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("/dev/null"), HasSubstr("character device")));
}

TEST_F(ConfigBounds, FileOverTheLimitIsRefusedWithSizeAndLimit) {
  std::string big(kMaxConfigFileBytes + 1, '#');
  big[big.size() - 1] = '\n';
  const std::string path = Write("big.yaml", big);
  auto r = ValidateConfigFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(SplitLines(r.status().message()),
            (std::vector<std::string>{"cannot read config file " + path +
                                      ": 1048577 bytes (1.0 MiB), more than " +
                                      "the limit of 1048576 bytes (1 MiB)"}));
  // Exactly at the limit is read (all comments: a warning, see below).
  big.resize(kMaxConfigFileBytes);
  big.back() = '\n';
  EXPECT_TRUE(ValidateConfigFile(Write("limit.yaml", big)).ok());
}

TEST_F(ConfigBounds, HugeSparseFileIsRefusedWithoutReadingIt) {
  const std::string path = dir_ + "/sparse.yaml";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  if (::ftruncate(fd, int64_t{16} << 30) != 0) {
    ::close(fd);
    GTEST_SKIP() << "the file system does not take a 16 GiB sparse file";
  }
  ::close(fd);
  auto r = ValidateConfigFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("17179869184 bytes (16.0 GiB), more than the limit"));
}

TEST_F(ConfigBounds, DocumentWithTooManyValuesIsRefusedBeforeTheTreeIsBuilt) {
  std::string s =
      "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n      "
      "devices: [0";
  for (int i = 0; i < 200000; ++i) s += ",0";
  s += "]\n";
  const std::string path = Write("values.yaml", s);
  auto r = ValidateConfigFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(SplitLines(r.status().message()),
            (std::vector<std::string>{
                path + ": more than " + std::to_string(yaml::kMaxYamlValues) +
                " YAML values (scalars, lists and mappings); refused before it is read "
                "into memory"}));
}

TEST_F(ConfigBounds, RawControlByteIsAProblemWithItsPosition) {
  const std::string path = Write("raw.yaml", std::string("flags:\n  mig\0Strategy: none\n", 27));
  auto r = ValidateConfigFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(SplitLines(r.status().message()),
            (std::vector<std::string>{
                path + ":2:6: control byte \\0 is not allowed in YAML (write it as an escape "
                       "in a double-quoted string)"}));
  r = ValidateConfigFile(Write("esc.yaml", "flags:\n  migStrategy: \x1b[31mnone\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(":2:16: control byte \\x1b is not allowed"));
}

TEST_F(ConfigBounds, EmptyFileIsValidWithAWarning) {
  for (const std::string text : {"", "\n\n", "# nothing here\n"}) {
    const std::string path = Write("empty.yaml", text);
    auto r = ValidateConfigFile(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_THAT(r->warnings,
                Contains(path + " has no settings (empty or only comments): every setting takes "
                                "its default, and nothing is shared"))
        << "text: " << text;
  }
  // A file with settings has no such warning.
  auto r = ValidateConfigFile(Write("v1.yaml", "version: v1\n"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->warnings.empty());
}

TEST_F(ConfigBounds, TextLoaderHasTheSameLimits) {
  auto r = LoadNodeConfigFromText({}, {}, std::string(kMaxConfigFileBytes + 1, '#'), "big.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("more than the limit of 1048576 bytes (1 MiB)"));
}

TEST_F(ConfigBounds, ReadInputFileNamesWhatAndWhy) {
  const InputFileRules rules{"test file", 3, "file.txt"};
  EXPECT_EQ(*ReadInputFile(Write("a", "abc"), rules), "abc");
  auto r = ReadInputFile(Write("b", "abcd"), rules);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "cannot read test file " + dir_ +
                "/b: 4 bytes (0.0 MiB), more than the limit of 3 bytes (0.0 MiB)");
  r = ReadInputFile(dir_ + "/missing", rules);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(),
            "cannot read test file " + dir_ + "/missing: No such file or directory");
  EXPECT_EQ(ReadInputFile(dir_, rules).status().message(),
            "cannot read test file " + dir_ +
                ": it is a directory (name the file inside it, e.g. " + dir_ + "/file.txt)");
  // A symbolic link to a regular file is followed (ConfigMap volumes are links into ..data/).
  ASSERT_EQ(::symlink((dir_ + "/a").c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_EQ(*ReadInputFile(dir_ + "/link", rules), "abc");
  EXPECT_EQ(DescribeBytes(13680051), "13680051 bytes (13.0 MiB)");
  EXPECT_EQ(DescribeBytes(int64_t{3} << 20), "3145728 bytes (3 MiB)");
}

}  // namespace
}  // namespace gpushare
