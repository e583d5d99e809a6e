// The gateway's client of engined's control service (EngineService).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "k3serve/v1/engine.grpc.pb.h"
#include "shared/status.h"

namespace k3::gateway {

// One Generate call in flight. A reader thread moves the events into a queue,
// so the caller can wait with a timeout (and check on its own client) while
// engined prefills. Thread-safe: next() from one thread, cancel() from any.
class GenerateStream {
 public:
  ~GenerateStream();  // cancels the call if it is still running
  // The next event (true), or false on timeout or at the end of the call:
  // then `*finished` says which, and `*status` holds the call's status.
  bool next(k3serve::v1::GenerateEvent* out, int timeout_ms, bool* finished, Status* status);
  void cancel();

 private:
  friend class EngineClient;
  GenerateStream() = default;
  void read_all(std::unique_ptr<grpc::ClientReader<k3serve::v1::GenerateEvent>> reader);

  grpc::ClientContext ctx_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<k3serve::v1::GenerateEvent> events_;
  bool done_ = false;
  Status status_;
  std::thread reader_;
};

// Thread-safe (gRPC stubs are).
class EngineClient {
 public:
  explicit EngineClient(const std::string& address);
  const std::string& address() const { return address_; }

  StatusOr<k3serve::v1::EngineDescribeResponse> describe(int timeout_ms = 2000);
  StatusOr<k3serve::v1::EngineStatsResponse> stats(int timeout_ms = 2000);
  // engined's acknowledged placement version through `*acked` (may be null).
  Status set_placement(const k3serve::v1::Placement& placement, int timeout_ms = 30000,
                       uint64_t* acked = nullptr);
  StatusOr<std::unique_ptr<GenerateStream>> generate(
      const k3serve::v1::GenerateRequest& request, std::chrono::system_clock::time_point deadline);

 private:
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<k3serve::v1::EngineService::Stub> stub_;
};

// grpc::Status -> Status (same code numbers). An UNAVAILABLE gRPC made up
// (the daemon unreachable) reads "WHAT is unavailable: ..."; one the daemon
// answered itself (`answered`: its rpc::kAnsweredByKey trailer, e.g. a storage
// host down) keeps the daemon's message, which names the host.
Status from_grpc(const grpc::Status& s, std::string_view what, bool answered = false);

}  // namespace k3::gateway
