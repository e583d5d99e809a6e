#include "shared/shm/segment.h"

#include <cctype>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

namespace k3::shm {

namespace bip = boost::interprocess;

struct Segment::Impl {
  bip::shared_memory_object shm;
  bip::mapped_region region;
};

Segment::Segment() = default;
Segment::~Segment() = default;
Segment::Segment(Segment&&) noexcept = default;
Segment& Segment::operator=(Segment&&) noexcept = default;

bool valid_segment_name(const std::string& name) {
  if (name.empty() || name.size() > 200) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

StatusOr<Segment> Segment::create(const std::string& name, uint64_t bytes) {
  if (!valid_segment_name(name))
    return absl::InvalidArgumentError(cat("invalid shared-memory segment name '", name, "'"));
  Segment s;
  s.name_ = name;
  try {
    auto impl = std::make_unique<Impl>();
    impl->shm = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write);
    impl->shm.truncate(static_cast<bip::offset_t>(bytes));
    impl->region = bip::mapped_region(impl->shm, bip::read_write);
    s.impl_ = std::move(impl);
  } catch (const bip::interprocess_exception& e) {
    return absl::UnavailableError(cat("cannot create shared-memory segment /dev/shm/", name, " of ",
                                      bytes, " bytes: ", e.what()));
  }
  return s;
}

StatusOr<Segment> Segment::open(const std::string& name) {
  if (!valid_segment_name(name))
    return absl::InvalidArgumentError(cat("invalid shared-memory segment name '", name, "'"));
  Segment s;
  s.name_ = name;
  try {
    auto impl = std::make_unique<Impl>();
    impl->shm = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_write);
    impl->region = bip::mapped_region(impl->shm, bip::read_write);
    s.impl_ = std::move(impl);
  } catch (const bip::interprocess_exception& e) {
    return absl::UnavailableError(
        cat("cannot open shared-memory segment /dev/shm/", name, ": ", e.what()));
  }
  return s;
}

bool Segment::remove(const std::string& name) {
  return valid_segment_name(name) && bip::shared_memory_object::remove(name.c_str());
}

bool Segment::exists(const std::string& name) {
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_only);
    return true;
  } catch (const bip::interprocess_exception&) {
    return false;
  }
}

void* Segment::base() const {
  return impl_ ? impl_->region.get_address() : nullptr;
}
uint64_t Segment::size() const {
  return impl_ ? impl_->region.get_size() : 0;
}

}  // namespace k3::shm
