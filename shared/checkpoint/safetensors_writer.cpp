#include "shared/checkpoint/safetensors_writer.h"

#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace k3 {
namespace {
constexpr size_t kBufferBytes = 8u << 20;
}

StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::create(
    const std::string& path, std::vector<Entry> entries,
    const std::map<std::string, std::string>& metadata) {
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
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
    w->sizes_.push_back(n);
    off += n;
  }
  std::string text = header.dump();
  // Pad with spaces so the data region starts 8-byte aligned (as the reference
  // writer does).
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  w->path_ = path;
  w->entries_ = std::move(entries);
  w->data_start_ = 8 + text.size();
  w->data_size_ = off;
  K3_ASSIGN_OR_RETURN(w->file_, File::create(path + ".partial"));
  uint64_t n = text.size();
  K3_RETURN_IF_ERROR(w->file_.pwrite_all(&n, 8, 0));
  K3_RETURN_IF_ERROR(w->file_.pwrite_all(text.data(), text.size(), 8));
  w->file_pos_ = w->data_start_;
  w->current_end_ = w->sizes_.empty() ? 0 : w->sizes_[0];
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

}  // namespace k3
