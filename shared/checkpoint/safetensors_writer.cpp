#include "shared/checkpoint/safetensors_writer.h"

#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace k3::checkpoint {
namespace {
constexpr size_t kBufferBytes = 8u << 20;
}

StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::create(
    const std::string& path, std::vector<Entry> entries,
    const std::map<std::string, std::string>& metadata) {
  return open(path, std::move(entries), metadata, /*resume=*/false);
}

StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::resume(
    const std::string& path, std::vector<Entry> entries,
    const std::map<std::string, std::string>& metadata) {
  return open(path, std::move(entries), metadata, /*resume=*/true);
}

StatusOr<std::string> SafetensorsWriter::header_text(
    const std::vector<Entry>& entries, const std::map<std::string, std::string>& metadata,
    std::vector<uint64_t>* sizes) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const Entry& e : entries) {
    uint64_t n = dtype_size(e.dtype);
    for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
    if (header.contains(e.name))
      return absl::InvalidArgumentError(cat("duplicate tensor name ", e.name));
    header[e.name] = {{"dtype", std::string(dtype_name(e.dtype))},
                      {"shape", e.shape},
                      {"data_offsets", {off, off + n}}};
    sizes->push_back(n);
    off += n;
  }
  std::string text = header.dump();
  // Pad with spaces so the data region starts 8-byte aligned (as the reference
  // writer does).
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  return text;
}

StatusOr<uint64_t> SafetensorsWriter::file_size_of(
    const std::vector<Entry>& entries, const std::map<std::string, std::string>& metadata) {
  std::vector<uint64_t> sizes;
  K3_ASSIGN_OR_RETURN(std::string text, header_text(entries, metadata, &sizes));
  uint64_t n = 8 + text.size();
  for (uint64_t s : sizes) n += s;
  return n;
}

StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::open(
    const std::string& path, std::vector<Entry> entries,
    const std::map<std::string, std::string>& metadata, bool resume) {
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  K3_ASSIGN_OR_RETURN(std::string text, header_text(entries, metadata, &w->sizes_));
  uint64_t off = 0;
  for (uint64_t n : w->sizes_) off += n;
  w->path_ = path;
  w->entries_ = std::move(entries);
  w->data_start_ = 8 + text.size();
  w->data_size_ = off;
  uint64_t n = text.size();
  std::string head(8 + text.size(), '\0');
  std::memcpy(head.data(), &n, 8);
  std::memcpy(head.data() + 8, text.data(), text.size());
  // Data bytes of complete tensors an interrupted writer left behind.
  uint64_t keep = 0;
  if (resume) {
    auto old = base::File::open_read(path + ".partial");
    if (old.ok() && old->size() >= head.size()) {
      std::string got(head.size(), '\0');
      if (old->pread_exact(got.data(), got.size(), 0).ok() && got == head) {
        const uint64_t have = old->size() - head.size();
        for (uint64_t sz : w->sizes_) {
          if (keep + sz > have) break;
          keep += sz;
        }
      }
    }
  }
  if (keep > 0) {
    K3_ASSIGN_OR_RETURN(w->file_, base::File::open_write(path + ".partial"));
    K3_RETURN_IF_ERROR(w->file_.truncate(head.size() + keep));
  } else {
    ::unlink((path + ".partial").c_str());  // an older run's, not resumable
    K3_ASSIGN_OR_RETURN(w->file_, base::File::create(path + ".partial"));
    K3_RETURN_IF_ERROR(w->file_.pwrite_all(head.data(), head.size(), 0));
  }
  w->resumed_ = keep;
  w->written_ = keep;
  w->file_pos_ = w->data_start_ + keep;
  // Skip the kept tensors (keep is a sum of whole tensors), then any empty ones.
  w->current_end_ = w->sizes_.empty() ? 0 : w->sizes_[0];
  while (w->current_ < w->sizes_.size() && w->current_end_ < keep) {
    ++w->current_;
    w->current_end_ += w->sizes_[w->current_];
  }
  w->buf_.reserve(kBufferBytes);
  w->advance();
  return w;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (!finished_ && !path_.empty()) ::unlink((path_ + ".partial").c_str());
}

void SafetensorsWriter::advance() {
  // Moves past every tensor that is complete (empty ones included).
  while (current_ < sizes_.size() && written_ == current_end_) {
    ++current_;
    if (current_ < sizes_.size()) current_end_ += sizes_[current_];
  }
}

uint64_t SafetensorsWriter::remaining_in_current() const {
  return current_end_ - written_;
}

Status SafetensorsWriter::flush() {
  if (buf_.empty()) return absl::OkStatus();
  K3_RETURN_IF_ERROR(file_.pwrite_all(buf_.data(), buf_.size(), file_pos_));
  file_pos_ += buf_.size();
  buf_.clear();
  return absl::OkStatus();
}

Status SafetensorsWriter::write(const void* data, size_t n) {
  if (current_ >= entries_.size() || n > current_end_ - written_)
    return absl::FailedPreconditionError(
        cat(path_, ": write of ", n, " bytes overruns tensor ",
            current_ < entries_.size() ? entries_[current_].name : std::string("<end>")));
  const char* p = static_cast<const char*>(data);
  if (n >= kBufferBytes) {
    K3_RETURN_IF_ERROR(flush());
    K3_RETURN_IF_ERROR(file_.pwrite_all(p, n, file_pos_));
    file_pos_ += n;
  } else {
    if (buf_.size() + n > kBufferBytes) K3_RETURN_IF_ERROR(flush());
    buf_.insert(buf_.end(), p, p + n);
  }
  written_ += n;
  advance();
  return absl::OkStatus();
}

Status SafetensorsWriter::finish() {
  if (written_ != data_size_)
    return absl::FailedPreconditionError(
        cat(path_, ": only ", written_, " of ", data_size_, " data bytes were written"));
  K3_RETURN_IF_ERROR(flush());
  if (::fsync(file_.fd()) != 0)
    return absl::InternalError(cat(path_, ": fsync failed: ", std::strerror(errno)));
  K3_RETURN_IF_ERROR(file_.close());
  if (::rename((path_ + ".partial").c_str(), path_.c_str()) != 0)
    return absl::InternalError(cat(path_, ": rename failed: ", std::strerror(errno)));
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace k3::checkpoint
