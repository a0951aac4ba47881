#include "config/csv.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "sim/trace.h"
#include "tests/config/input_files.h"

namespace gpushare::sim {

using config::CsvError;
using config::CsvFile;
using config::CsvRow;
using config::kMaxCsvFileBytes;
namespace {

TEST(CsvTest, QuotesCrlfBomAndBlankLines) {
  auto f = CsvFile::Parse(
      "t.csv", "\xEF\xBB\xBFname,spec\r\n\r\na,\"x,y\"\r\nb,\"say \"\"hi\"\"\"\n  c , d \n");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->header(), (std::vector<std::string>{"name", "spec"}));
  ASSERT_EQ(f->rows().size(), 3u);
  EXPECT_EQ(f->rows()[0].line, 3);
  EXPECT_EQ(f->rows()[0].fields[1].text, "x,y");
  EXPECT_EQ(f->rows()[0].fields[1].column, 3);
  EXPECT_EQ(f->rows()[1].fields[1].text, "say \"hi\"");
  EXPECT_EQ(f->rows()[2].fields[0].text, "c");
  EXPECT_EQ(f->rows()[2].fields[1].column, 6);  // where the raw field starts
}

TEST(CsvTest, MalformedInputNamesFileLineAndColumn) {
  EXPECT_EQ(CsvFile::Parse("e.csv", "").status().message(),
            "e.csv:1:1: empty file (no header line)");
  EXPECT_EQ(CsvFile::Parse("q.csv", "a,b\n1,\"open\n").status().message(),
            "q.csv:2:3: unterminated quoted field");
  EXPECT_EQ(CsvFile::Parse("s.csv", "a,b\n1,x\"y\n").status().message(),
            "s.csv:2:4: stray quote in an unquoted field");
  EXPECT_EQ(CsvFile::Parse("w.csv", "a,b\n1,2,3\n").status().message(),
            "w.csv:2:5: 3 fields, the header has 2");
  EXPECT_EQ(CsvFile::Parse("h.csv", "a,,b\n").status().message(),
            "h.csv:1:3: empty column name in the header");
}

TEST(CsvTest, TypedFieldsReportTheirPosition) {
  auto f = CsvFile::Parse("p.csv", "n,v\nx,12\ny,two\nz,-3\nw,\nv,1000.0\n");
  ASSERT_TRUE(f.ok());
  const auto& rows = f->rows();
  EXPECT_EQ(*f->Int(rows[0], 1, "v", 0, 100), 12);
  EXPECT_EQ(f->Int(rows[1], 1, "v", 0, 100).status().message(),
            "p.csv:3:3: v: expected an integer, got 'two'");
  EXPECT_EQ(f->Int(rows[2], 1, "v", 0, 100).status().message(),
            "p.csv:4:3: v: must be in 0..100, got -3");
  EXPECT_EQ(f->Int(rows[3], 1, "v", 0, 100).status().message(), "p.csv:5:3: v: must not be empty");
  EXPECT_FALSE(f->OptionalInt(rows[3], 1, "v", 0, 100)->has_value());
  EXPECT_EQ(*f->Int(rows[4], 1, "v", 0, 2000), 1000);  // pandas writes integral floats
  EXPECT_EQ(f->Column("missing").status().message(),
            "p.csv:1:1: missing column 'missing' (header: n,v)");
}

// Found by fuzz/fuzz_trace_csv: a float far outside int64 (or inf, nan) was cast to int64, which
// is undefined behaviour (UBSan: "3.2e+123 is outside the range of representable values").
TEST(CsvTest, FloatsOutsideTheIntegersAreRefusedNotCast) {
  auto f = CsvFile::Parse(
      "p.csv", "n,v\na,3.2e123\nb,-1e19\nc,inf\nd,nan\ne,1.5\nf,9223372036854775808.0\n");
  ASSERT_TRUE(f.ok());
  const auto& rows = f->rows();
  EXPECT_EQ(f->Int(rows[0], 1, "v", 0, 100).status().message(),
            "p.csv:2:3: v: must be in 0..100, got 3.2e123");
  EXPECT_EQ(f->Int(rows[1], 1, "v", 0, 100).status().message(),
            "p.csv:3:3: v: must be in 0..100, got -1e19");
  EXPECT_EQ(f->Int(rows[2], 1, "v", 0, 100).status().message(),
            "p.csv:4:3: v: expected an integer, got 'inf'");
  EXPECT_EQ(f->Int(rows[3], 1, "v", 0, 100).status().message(),
            "p.csv:5:3: v: expected an integer, got 'nan'");
  EXPECT_EQ(f->Int(rows[4], 1, "v", 0, 100).status().message(),
            "p.csv:6:3: v: expected an integer, got '1.5'");
  EXPECT_EQ(f->Int(rows[5], 1, "v", INT64_MIN, INT64_MAX).status().message(),
            "p.csv:7:3: v: must be in -9223372036854775808..9223372036854775807, got "
            "9223372036854775808.0");
}

// Trace files follow the rules of every input file (config/file_read.h): a regular file (a
// FIFO is refused without blocking) of at most kMaxCsvFileBytes.
TEST(CsvTest, OnlyRegularFilesWithinTheLimitAreRead) {
  const gpushare::testing::ScratchDir scratch;
  const std::string& dir = scratch.path();
  EXPECT_EQ(CsvFile::Read(dir, "pod list CSV", "pods.csv").status().message(),
            "cannot read pod list CSV " + dir +
                ": it is a directory (name the file inside it, e.g. " + dir + "/pods.csv)");
  EXPECT_EQ(CsvFile::Read("/dev/zero", "pod list CSV").status().message(),
            "cannot read pod list CSV /dev/zero: it is a character device, not a regular file");
  const std::string fifo = scratch.Fifo("fifo.csv");
  ASSERT_FALSE(fifo.empty());
  auto r =
      gpushare::testing::ReadFifoWithin(fifo, [&] { return CsvFile::Read(fifo, "node list CSV"); });
  ASSERT_TRUE(r.has_value()) << "reading a FIFO blocked";
  EXPECT_EQ(r->status().message(), "cannot read node list CSV " + fifo +
                                       ": it is a FIFO (named pipe), not a regular file");
  // A sparse file past the limit: refused from its size, nothing read.
  const std::string big = dir + "/big.csv";
  int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, kMaxCsvFileBytes + 1), 0);
  ::close(fd);
  EXPECT_EQ(LoadPodCsv(big).status().message(),
            "cannot read pod list CSV " + big +
                ": 33554433 bytes (32.0 MiB), more than the limit of 33554432 "
                "bytes (32 MiB)");
}

TEST(CsvTest, ControlBytesAreEscapedInMessages) {
  auto f = CsvFile::Parse("p.csv", std::string("n,v\nx,t\0o\x1b\n", 11));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->Int(f->rows()[0], 1, "v", 0, 100).status().message(),
            "p.csv:2:3: v: expected an integer, got 't\\0o\\x1b'");
  EXPECT_EQ(CsvFile::Parse("h.csv", std::string("a,\0\n", 4))->header()[1], std::string(1, '\0'));
  EXPECT_EQ(
      ParsePodCsv(
          "p.csv",
          std::string(
              "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na\x07,1,1,1,100\na\x07,1,1,1,100\n",
              70))
          .status()
          .message(),
      "p.csv:3:1: name: duplicate pod 'a\\x07' (first on line 2)");
}

const char kNodes[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "n1,96000,393216,8,G2\n"
    "n2,32000,131072,0,\n";

TEST(TraceCsvTest, NodesAndPodsParse) {
  auto nodes = ParseNodeCsv("nodes.csv", kNodes);
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].gpu_capacity, std::vector<int64_t>(8, 1000));
  EXPECT_TRUE((*nodes)[1].gpu_model.empty());
  auto pods = ParsePodCsv(
      "pods.csv",
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "p1,3150,100,1,810,,LS,Running,0,100,0\n"
      "p2,88000,0,8,1000,V100M16|V100M32,BE,Pending,5,,\n"
      "p3,12500,0,0,0,,LS,Failed,7,9,\n");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 3u);
  EXPECT_EQ((*pods)[0].gpu_demand(), 810);
  EXPECT_EQ((*pods)[1].gpu_demand(), 8000);
  EXPECT_TRUE((*pods)[1].request.gpus[0].whole);
  EXPECT_EQ((*pods)[1].request.gpu_models.size(), 2u);
  EXPECT_FALSE((*pods)[1].deletion_time.has_value());
  EXPECT_EQ(*(*pods)[2].creation_time, 7);
  EXPECT_EQ((*pods)[2].line, 4);
  // The five-column multigpu files parse too.
  EXPECT_TRUE(
      ParsePodCsv("m.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,1,1000\n").ok());
}

TEST(TraceCsvTest, MalformedRowsAreErrorsNeverDropped) {
  const std::string h = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  auto msg = [&](const std::string& body) {
    return ParsePodCsv("pods.csv", h + body).status().message();
  };
  EXPECT_EQ(msg("a,1,1,2,500\n"),
            "pods.csv:2:9: gpu_milli: a share below 1000 needs num_gpu = 1, got 2 GPUs x 500");
  EXPECT_EQ(msg("a,1,1,0,500\n"), "pods.csv:2:9: gpu_milli: must be 0 when num_gpu is 0, got 500");
  EXPECT_EQ(msg("a,1,1,1,0\n"), "pods.csv:2:9: gpu_milli: must be > 0 when num_gpu is 1");
  EXPECT_EQ(msg("a,1,1,1,1200\n"), "pods.csv:2:9: gpu_milli: must be in 0..1000, got 1200");
  EXPECT_EQ(msg("a,1,1,1,100\nb,x,1,1,100\n"),
            "pods.csv:3:3: cpu_milli: expected an integer, got 'x'");
  EXPECT_EQ(msg("a,1,1,1,100\na,1,1,1,100\n"),
            "pods.csv:3:1: name: duplicate pod 'a' (first on line 2)");
  EXPECT_EQ(msg(",1,1,1,100\n"), "pods.csv:2:1: name: must not be empty");
  EXPECT_EQ(msg(""), "pods.csv: no pods");
  EXPECT_EQ(ParsePodCsv("pods.csv", "name,cpu\n").status().message(),
            "pods.csv:1:1: missing column 'cpu_milli' (header: name,cpu)");
  const std::string nh = "sn,cpu_milli,memory_mib,gpu,model\n";
  EXPECT_EQ(ParseNodeCsv("nodes.csv", nh + "n,1,1,2,\n").status().message(),
            "nodes.csv:2:9: model: a node with GPUs needs a GPU model");
  EXPECT_EQ(ParseNodeCsv("nodes.csv", nh + "n,1,1,17,G2\n").status().message(),
            "nodes.csv:2:7: gpu: must be in 0..16, got 17");
  EXPECT_EQ(ParseNodeCsv("nodes.csv", nh + "n,1,1,1,G2\nn,1,1,1,G2\n").status().message(),
            "nodes.csv:3:1: sn: duplicate node 'n' (first on line 2)");
  EXPECT_EQ(LoadNodeCsv("/nonexistent/nodes.csv").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpushare::sim
