// Streaming safetensors writer: the tensor table is fixed up front, the header
// written first, then each tensor's bytes in table order, in pieces of any
// size, so files of tens of GB never sit in RAM. The file is written as
// PATH.partial and renamed to PATH by finish().
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shared/base/file.h"
#include "shared/checkpoint/dtype.h"
#include "shared/status.h"

namespace k3::checkpoint {

// Not thread-safe.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
  };

  static StatusOr<std::unique_ptr<SafetensorsWriter>> create(
      const std::string& path, std::vector<Entry> entries,
      const std::map<std::string, std::string>& metadata = {});
  // Like create(), but keeps what an interrupted writer of the same table left
  // in PATH.partial: when its header is byte-identical, the complete tensors
  // it holds are kept (a torn tensor is written again) and current() says
  // where to continue. Anything else there is overwritten. The caller's bytes
  // must be deterministic (the same source gives the same file).
  static StatusOr<std::unique_ptr<SafetensorsWriter>> resume(
      const std::string& path, std::vector<Entry> entries,
      const std::map<std::string, std::string>& metadata = {});
  // The size of the file create() writes for this table: the 8-byte length,
  // the header (compact JSON in table order, "__metadata__" first when given,
  // padded with spaces to 8 bytes, as the reference writer does) and the data.
  // Refuses a duplicate name.
  static StatusOr<uint64_t> file_size_of(const std::vector<Entry>& entries,
                                         const std::map<std::string, std::string>& metadata = {});
  // Data bytes kept from an interrupted run by resume().
  uint64_t resumed_bytes() const { return resumed_; }
  ~SafetensorsWriter();

  // Appends bytes of the current tensor (tensors in table order; a piece may
  // not cross into the next tensor).
  Status write(const void* data, size_t n);
  // Index of the tensor the next write() goes to, and bytes it still needs.
  size_t current() const { return current_; }
  uint64_t remaining_in_current() const;
  // Hands the buffered bytes to the file (no fsync): a writer killed later
  // leaves them in PATH.partial for resume().
  Status flush();
  // Flushes, checks that every tensor got all its bytes, renames into place.
  Status finish();
  uint64_t file_size() const { return data_start_ + data_size_; }

 private:
  SafetensorsWriter() = default;
  static StatusOr<std::unique_ptr<SafetensorsWriter>> open(
      const std::string& path, std::vector<Entry> entries,
      const std::map<std::string, std::string>& metadata, bool resume);
  void advance();
  // The padded header text for `entries`, and each tensor's byte size.
  static StatusOr<std::string> header_text(const std::vector<Entry>& entries,
                                           const std::map<std::string, std::string>& metadata,
                                           std::vector<uint64_t>* sizes);

  std::string path_;
  base::File file_;
  std::vector<Entry> entries_;
  std::vector<uint64_t> sizes_;
  uint64_t data_start_ = 0;
  uint64_t data_size_ = 0;
  uint64_t written_ = 0;      // data bytes accepted so far
  uint64_t file_pos_ = 0;     // next file offset to write the buffer at
  uint64_t current_end_ = 0;  // data offset where the current tensor ends
  size_t current_ = 0;
  std::vector<char> buf_;
  uint64_t resumed_ = 0;
  bool finished_ = false;
};

}  // namespace k3::checkpoint
