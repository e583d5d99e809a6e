#include "shared/checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <fstream>
#include <sstream>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/safetensors_writer.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// Every file of the hand-made corpus is refused with exactly its expected
// message ("*" stands for the JSON library's own explanation).
TEST(SafetensorsBadCorpus, EachFileRefusedWithExpectedMessage) {
  const std::string dir = testing::source_dir() + "/tests/data/bad_safetensors";
  std::ifstream expected(dir + "/EXPECTED");
  ASSERT_TRUE(expected.good());
  std::string line;
  int cases = 0;
  while (std::getline(expected, line)) {
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    const std::string path = dir + "/" + line.substr(0, tab);
    const std::string want = replace_all(line.substr(tab + 1), "{file}", path);
    auto h = checkpoint::read_safetensors_header(path);
    ASSERT_FALSE(h.ok()) << path << " was accepted";
    const std::string got(h.status().message());
    const size_t star = want.find('*');
    if (star == std::string::npos) {
      EXPECT_EQ(got, want) << path;
    } else {
      EXPECT_EQ(got.substr(0, star), want.substr(0, star)) << path;
      EXPECT_TRUE(got.size() > want.size() - 1 &&
                  got.compare(got.size() - (want.size() - star - 1), std::string::npos,
                              want.substr(star + 1)) == 0)
          << got;
    }
    // The in-memory parser (the fuzz target's entry) agrees with the file reader.
    auto img = checkpoint::parse_safetensors_image(testing::read_file(path), path);
    ASSERT_FALSE(img.ok());
    EXPECT_EQ(img.status().message(), h.status().message()) << path;
    ++cases;
  }
  EXPECT_GE(cases, 20);
}

TEST(Safetensors, WriterOutputParsesBack) {
  TempDir tmp;
  const std::string path = tmp.file("a.safetensors");
  auto w = checkpoint::SafetensorsWriter::create(path,
                                                 {{"x", checkpoint::DType::kF32, {2, 3}},
                                                  {"empty", checkpoint::DType::kBF16, {0, 4}},
                                                  {"y", checkpoint::DType::kU8, {5}}},
                                                 {{"format", "pt"}});
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE((*w)->write(x.data(), 8).ok());  // a piece smaller than the tensor
  ASSERT_TRUE((*w)->write(x.data() + 2, 16).ok());
  EXPECT_FALSE((*w)->write("abcdefg", 7).ok()) << "overran tensor y";
  ASSERT_TRUE((*w)->write("abcde", 5).ok());
  ASSERT_TRUE((*w)->finish().ok());
  auto h = checkpoint::read_safetensors_header(path);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->tensors.size(), 3u);
  EXPECT_EQ(h->metadata.at("format"), "pt");
  EXPECT_EQ(h->data_start % 8, 0u);
  const checkpoint::TensorInfo* xi = nullptr;
  for (const auto& t : h->tensors)
    if (t.name == "x") xi = &t;
  ASSERT_NE(xi, nullptr);
  EXPECT_EQ(xi->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(xi->rows(), 2);
  EXPECT_EQ(xi->cols(), 3);
  std::string bytes = testing::read_file(path);
  float back[6];
  std::memcpy(back, bytes.data() + xi->offset, 24);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(back[i], x[i]);
}

TEST(Safetensors, UnfinishedWriterLeavesNoFile) {
  TempDir tmp;
  const std::string path = tmp.file("b.safetensors");
  {
    auto w = checkpoint::SafetensorsWriter::create(path, {{"x", checkpoint::DType::kF32, {4}}});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->write("abcd", 4).ok());
    EXPECT_FALSE((*w)->finish().ok()) << "finish with 12 bytes missing";
  }
  EXPECT_TRUE(testing::dir_snapshot(tmp.path()).empty());
}

// A torn PATH.partial of the same table keeps its complete tensors; one of
// another table is started over.
TEST(Safetensors, ResumeKeepsTheCompleteTensorsOfATornFile) {
  TempDir tmp;
  const std::string path = tmp.file("r.safetensors");
  const std::vector<checkpoint::SafetensorsWriter::Entry> table = {
      {"a", checkpoint::DType::kU8, {4}},
      {"b", checkpoint::DType::kU8, {0}},
      {"c", checkpoint::DType::kU8, {3}},
      {"d", checkpoint::DType::kU8, {5}}};
  // What a writer killed 2 bytes into "c" leaves: header, "a", half of "c".
  std::string full;
  {
    auto w = checkpoint::SafetensorsWriter::create(path, table);
    ASSERT_TRUE((*w)->write("AAAA", 4).ok() && (*w)->write("CCC", 3).ok() &&
                (*w)->write("DDDDD", 5).ok() && (*w)->finish().ok());
    full = testing::read_file(path);
  }
  testing::write_file(path + ".partial", full.substr(0, full.size() - 8 + 2));
  fs::remove(path);
  {
    auto w = checkpoint::SafetensorsWriter::resume(path, table);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ((*w)->resumed_bytes(), 4u);
    EXPECT_EQ((*w)->current(), 2u);  // "c": the empty "b" is complete too
    ASSERT_TRUE((*w)->write("CCC", 3).ok() && (*w)->write("DDDDD", 5).ok());
    ASSERT_TRUE((*w)->finish().ok());
  }
  EXPECT_EQ(testing::read_file(path), full);
  // Another table: nothing kept.
  testing::write_file(path + ".partial", full.substr(0, full.size() - 3));
  auto other = checkpoint::SafetensorsWriter::resume(path, {{"a", checkpoint::DType::kU8, {5}}});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->resumed_bytes(), 0u);
  EXPECT_EQ((*other)->current(), 0u);
}

TEST(Safetensors, ZeroSizedTensorsMayShareAnOffset) {
  std::string header =
      R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  auto h =
      checkpoint::parse_safetensors_header(header, 8 + header.size(), 8 + header.size() + 4, "mem");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->tensors.size(), 2u);
}

}  // namespace
}  // namespace k3
