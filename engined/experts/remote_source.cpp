#include "engined/experts/remote_source.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/base/cpu_features.h"
#include "shared/base/hash.h"
#include "shared/base/host_port.h"
#include "shared/base/log.h"
#include "shared/experts/remote_protocol.h"
#include "shared/experts/verified_read.h"

namespace k3::engined {

namespace pb = k3serve::v1;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kMaxMessageBytes = 512 << 20;

uint64_t wire_bytes(const google::protobuf::Message& m) {
  return m.ByteSizeLong() + 5;  // gRPC's length prefix
}

}  // namespace

uint64_t expert_macs_per_row(const experts::ExpertShape& shape) {
  return 3 * static_cast<uint64_t>(std::max<int64_t>(shape.latent, 0)) *
         static_cast<uint64_t>(std::max<int64_t>(shape.intermediate, 0));
}

std::chrono::milliseconds remote_step_allowance(const RemoteSourceOptions& opt,
                                                const experts::ExpertShape& shape, size_t experts,
                                                size_t computed_rows) {
  const double rate = std::max(opt.min_mbps, 1e-3) * 1e6;  // bytes per second
  const double rows = static_cast<double>(computed_rows);
  const double moved =
      static_cast<double>(experts) * static_cast<double>(shape.bytes) +
      rows * 2.0 * static_cast<double>(std::max<int64_t>(shape.latent, 0)) * sizeof(float);
  const double macs = rows * static_cast<double>(expert_macs_per_row(shape));
  const double ms =
      opt.deadline_ms + 1e3 * moved / rate + 1e3 * macs / (kRemoteMinComputeGmacs * 1e9);
  return std::chrono::milliseconds(static_cast<int64_t>(std::min(ms, 86400e3)));
}

StatusOr<std::pair<std::string, std::string>> parse_remote_expertd(const std::string& value) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0)
    return absl::InvalidArgumentError(cat("--remote-expertd '", value, "' is not NAME=HOST:PORT"));
  const std::string address = value.substr(eq + 1);
  if (Status s = base::parse_host_port(address, /*min_port=*/1).status(); !s.ok())
    return absl::InvalidArgumentError(cat("--remote-expertd '", value, "': ", msg(s)));
  return std::make_pair(value.substr(0, eq), address);
}

struct RemoteExpertSource::Impl {
  RemoteSourceOptions opt;
  experts::ExpertShape shape;
  std::string fingerprint;  // hex, as Describe sends it
  std::shared_ptr<grpc::ChannelCredentials> creds;
  std::shared_ptr<spdlog::logger> log = base::logger("engined");

  // The connection (caller's thread only, except where noted).
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::RemoteExpertService::Stub> stub;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderWriter<pb::ExpertStreamRequest, pb::ExpertStreamReply>> stream;
  std::thread reader, writer;
  bool connected = false;
  std::vector<std::vector<uint8_t>> owned;  // per layer: Describe's bitmap
  Clock::time_point last_attempt{};
  Status last_error = absl::UnavailableError("not connected yet");

  // Shared with the reader and writer threads.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<pb::ExpertStreamReply> inbox;
  std::deque<pb::ExpertStreamRequest> outbox;
  bool read_done = false;  // the stream ended (reader saw it)
  bool closing = false;    // the writer must stop
  // Set by the reader when the host broke the protocol (it then ends the
  // stream): the error the step in flight fails with.
  std::string protocol_error;
  // The reader's view of what may arrive (set by submit() before the step
  // goes out): the demand step in flight and the reply bytes it may take.
  // A reply to a step never asked (0, or above it) or beyond its budget ends
  // the stream; a replaced step's late replies are dropped as they come. So
  // what a host can make engined hold is bounded by what engined asked.
  std::atomic<uint64_t> accept_step{0}, step_budget{0};
  std::atomic<bool> alive{false};
  std::atomic<uint64_t> bytes_sent{0}, bytes_received{0}, messages{0};

  // The demand request in flight.
  experts::ExpertRequest req;
  uint64_t step = 0;
  size_t left = 0;
  experts::RemoteStepReplies replies;
  std::vector<uint8_t> held;        // bytes the caller holds until its next call
  Clock::time_point step_sent;      // when the demand step in flight went out
  Clock::time_point step_deadline;  // step_sent + its allowance (step_allowance)
  std::chrono::milliseconds step_allowance{0};
  size_t step_rows = 0;  // the rows the host computes (0 in bytes mode)
  experts::ExpertSourceStats st;
  // Demand steps sent and failed, and their round trips.
  uint64_t steps = 0, failures = 0;
  std::vector<uint64_t> latency = std::vector<uint64_t>(experts::kRemoteLatencyBuckets, 0);
  double latency_sum = 0;
  uint64_t latency_count = 0;

  void observe_round_trip() {
    const double s = std::chrono::duration<double>(Clock::now() - step_sent).count();
    size_t b = 0;
    while (b + 1 < experts::kRemoteLatencyBuckets && s > experts::kRemoteLatencyBounds[b]) ++b;
    ++latency[b];
    latency_sum += s;
    ++latency_count;
  }

  std::string label() const { return cat(opt.name, " (", opt.address, ")"); }

  void add_token(grpc::ClientContext* c) const {
    if (!opt.token.empty()) c->AddMetadata(rpc::kAuthMetadataKey, rpc::bearer(opt.token));
  }

  // Ends the stream (cancelled unless it already ended) and returns how it
  // ended.
  grpc::Status disconnect() {
    grpc::Status s = grpc::Status::OK;
    if (stream) {
      {
        std::lock_guard<std::mutex> lk(mu);
        // A stream the host ended keeps the host's status (a cancel now
        // would replace it with CANCELLED).
        if (!read_done) ctx->TryCancel();
        closing = true;
      }
      cv.notify_all();
      if (writer.joinable()) writer.join();
      if (reader.joinable()) reader.join();
      s = stream->Finish();
      stream.reset();
    }
    ctx.reset();
    stub.reset();
    channel.reset();
    connected = false;
    alive = false;
    left = 0;
    std::lock_guard<std::mutex> lk(mu);
    inbox.clear();
    outbox.clear();
    read_done = false;
    closing = false;
    protocol_error.clear();
    accept_step = 0;
    return s;
  }

  Status connect() {
    disconnect();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    // A host coming back is reconnected to promptly.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // The stream is long-lived and often idle: keepalive pings find a dead
    // link between steps.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, std::max(1000, opt.deadline_ms));
    channel = grpc::CreateCustomChannel(opt.address, creds, args);
    stub = pb::RemoteExpertService::NewStub(channel);
    grpc::ClientContext dctx;
    dctx.set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(opt.deadline_ms));
    add_token(&dctx);
    pb::DescribeResponse d;
    const grpc::Status gs = stub->Describe(&dctx, pb::DescribeRequest(), &d);
    if (!gs.ok()) {
      const auto code = gs.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                                gs.error_code() == grpc::StatusCode::PERMISSION_DENIED
                            ? static_cast<absl::StatusCode>(gs.error_code())
                            : absl::StatusCode::kUnavailable;
      return absl::Status(code,
                          cat("remote expertd ", label(), " is unavailable: ", gs.error_message()));
    }
    K3_ASSIGN_OR_RETURN(owned, experts::check_describe(d, shape, fingerprint, label()));
    if (d.insecure_remote()) log->warn("remote expertd {}: {}", label(), d.warning());
    ctx = std::make_unique<grpc::ClientContext>();
    add_token(ctx.get());
    stream = stub->Experts(ctx.get());
    connected = true;
    alive = true;
    reader = std::thread([this] { read_loop(); });
    writer = std::thread([this] { write_loop(); });
    log->info("remote expertd {}: connected ({} layers served, kernels {})", label(),
              d.layers_size(), d.kernel_isa());
    return absl::OkStatus();
  }

  void read_loop() {
    pb::ExpertStreamReply r;
    uint64_t counted_step = 0, step_bytes = 0;
    std::string violation;
    while (stream->Read(&r)) {
      const uint64_t n = wire_bytes(r);
      bytes_received += n;
      const uint64_t want = accept_step.load();
      if (r.step() != 0 && r.step() < want) continue;  // a replaced step's: dropped
      if (r.step() == 0 || r.step() > want) {
        violation = cat("sent a reply to step ", r.step(), ", which was never asked (", n,
                        " bytes; the step in flight is ", want, ")");
        break;
      }
      if (counted_step != want) counted_step = want, step_bytes = 0;
      step_bytes += n;
      if (step_bytes > step_budget.load()) {
        violation = cat("sent ", step_bytes, " bytes of replies to step ", want,
                        ", more than the step asks (at most ", step_budget.load(), ")");
        break;
      }
      std::lock_guard<std::mutex> lk(mu);
      inbox.push_back(std::move(r));
      cv.notify_all();
    }
    if (!violation.empty()) ctx->TryCancel();
    alive = false;
    std::lock_guard<std::mutex> lk(mu);
    if (!violation.empty()) protocol_error = "protocol error: " + violation;
    read_done = true;
    cv.notify_all();
  }

  void write_loop() {
    for (;;) {
      pb::ExpertStreamRequest m;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return closing || !outbox.empty(); });
        if (closing) return;
        m = std::move(outbox.front());
        outbox.pop_front();
      }
      const uint64_t n = wire_bytes(m);
      if (!stream->Write(m)) return;  // the stream ended: the reader reports it
      bytes_sent += n;
      ++messages;
    }
  }

  void send(pb::ExpertStreamRequest m) {
    {
      std::lock_guard<std::mutex> lk(mu);
      outbox.push_back(std::move(m));
    }
    cv.notify_all();
  }

  // The request in flight fails: the stream is torn down (the next prepare()
  // reconnects) and the error names the host.
  Status fail(const std::string& why) {
    std::string detail = why;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!protocol_error.empty()) detail = protocol_error;
    }
    const grpc::Status s = disconnect();
    absl::StatusCode code = absl::StatusCode::kUnavailable;
    if (detail.empty()) {
      detail = s.ok() ? "the stream ended" : s.error_message();
      // What the host refused stays what it is (a kernel variant, a model);
      // a lost connection is UNAVAILABLE.
      if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
          s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
          s.error_code() == grpc::StatusCode::NOT_FOUND ||
          s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
          s.error_code() == grpc::StatusCode::DATA_LOSS)
        code = static_cast<absl::StatusCode>(s.error_code());
    }
    last_error = absl::Status(code, cat("remote expertd ", label(), ": ", detail));
    last_attempt = Clock::now();
    ++failures;
    log->error("{}", msg(last_error));
    return last_error;
  }

  // Handles one reply of the step in flight (checked by shared/experts/remote_protocol.h); a
  // completion when an expert is complete.
  StatusOr<std::optional<experts::ExpertCompletion>> take(const pb::ExpertStreamReply& r) {
    K3_ASSIGN_OR_RETURN(std::optional<experts::RemoteResult> res, replies.take(r));
    if (!res) return std::optional<experts::ExpertCompletion>();  // a chunk of an incomplete expert
    left = replies.left();
    if (left == 0) observe_round_trip();
    experts::ExpertCompletion c;
    c.index = res->index;
    if (!mode_bytes) {
      c.rows = std::move(res->rows);
      return std::optional<experts::ExpertCompletion>(std::move(c));
    }
    ++st.reads;
    st.bytes_read += shape.bytes;
    const experts::ExpertWork& w = req.work[res->index];
    const experts::ReadVerdict v = experts::verify_expert_bytes(
        shape.layout, shape.bytes, cat("from remote expertd ", label()), opt.manifest.get(),
        req.layer, w.expert, res->bytes.data());
    st.corrupt_experts += v.nan_scales;
    st.manifest_mismatches += v.mismatch;
    st.verified_reads += v.verified;
    st.verify_seconds += v.verify_seconds;
    if (!v.status.ok()) return v.status;
    bool keep = false;
    c = experts::complete_locally(shape, req, res->index, res->bytes.data(), &st, &keep);
    if (keep) {
      held = std::move(res->bytes);
      c.bytes = held.data();
    }
    return std::optional<experts::ExpertCompletion>(std::move(c));
  }

  bool bytes_for(const experts::ExpertRequest& r) {
    if (opt.bytes_mode) return true;
    if (std::any_of(r.work.begin(), r.work.end(),
                    [](const experts::ExpertWork& w) { return !w.compute; }))
      return true;
    // A host receives a compute step of at most kMaxChunkTokens tokens
    // (max_remote_message_bytes: its receive cap). A pass of more, several
    // prompts' pieces batched, fetches the experts' bytes instead: the same
    // output bits (compute_expert_rows either way), more bytes on the link.
    const int64_t tokens = experts::step_request_tokens(r);
    if (tokens <= experts::kMaxChunkTokens) return false;
    if (!warned_tokens)
      log->warn(
          "remote expertd {}: a layer step of {} tokens, over the {} a host receives, "
          "fetches its experts' bytes instead (reported once)",
          label(), tokens, experts::kMaxChunkTokens);
    warned_tokens = true;
    return true;
  }
  bool mode_bytes = false;
  bool warned_tokens = false;  // bytes_for has said why a compute step went as bytes
};

RemoteExpertSource::RemoteExpertSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RemoteExpertSource::~RemoteExpertSource() {
  impl_->disconnect();
}

std::string RemoteExpertSource::label() const {
  return impl_->label();
}

StatusOr<std::unique_ptr<RemoteExpertSource>> RemoteExpertSource::create(
    const RemoteSourceOptions& opt, const experts::ExpertShape& shape) {
  if (opt.address.empty()) return absl::InvalidArgumentError("--remote-expertd: no address");
  if (opt.deadline_ms < 1) return absl::InvalidArgumentError("remote deadline must be >= 1 ms");
  if (!(opt.min_mbps > 0)) return absl::InvalidArgumentError("--remote-min-mbps must be above 0");
  auto impl = std::make_unique<Impl>();
  impl->opt = opt;
  impl->shape = shape;
  impl->fingerprint = base::hex64(opt.fingerprint);
  if (opt.insecure) {
    impl->creds = grpc::InsecureChannelCredentials();
  } else {
    K3_ASSIGN_OR_RETURN(impl->creds, rpc::client_tls_credentials(opt.tls));
  }
  std::unique_ptr<RemoteExpertSource> src(new RemoteExpertSource(std::move(impl)));
  if (Status s = src->prepare(); !s.ok()) src->impl_->log->warn("{} (tried again on use)", msg(s));
  return src;
}

Status RemoteExpertSource::prepare() {
  Impl& m = *impl_;
  if (m.connected && m.alive) return absl::OkStatus();
  if (m.connected) {
    m.fail("the stream ended").IgnoreError();  // logged; reconnecting below
    m.last_attempt = {};                       // reconnect at once
  }
  const auto now = Clock::now();
  if (m.last_attempt != Clock::time_point{} &&
      now - m.last_attempt < std::chrono::milliseconds(m.opt.retry_ms))
    return m.last_error;
  m.last_attempt = now;
  Status s = m.connect();
  if (!s.ok()) {
    m.disconnect();
    if (s.code() != m.last_error.code() || msg(s) != msg(m.last_error)) m.log->error("{}", msg(s));
    m.last_error = s;
    return s;
  }
  m.last_error = absl::OkStatus();
  return s;
}

bool RemoteExpertSource::owns(int64_t layer, int64_t expert) const {
  const Impl& m = *impl_;
  if (!m.connected || !m.alive || layer < 0 || expert < 0 ||
      layer >= static_cast<int64_t>(m.owned.size()))
    return false;
  const auto& bits = m.owned[static_cast<size_t>(layer)];
  const size_t b = static_cast<size_t>(expert / 8);
  return b < bits.size() && (bits[b] >> (expert % 8)) & 1;
}

size_t RemoteExpertSource::outstanding() const {
  return impl_->left;
}

experts::ExpertSourceStats RemoteExpertSource::stats() const {
  experts::ExpertSourceStats s = impl_->st;
  s.network_bytes = impl_->bytes_sent.load() + impl_->bytes_received.load();
  s.remote_messages = impl_->messages.load();
  return s;
}

void RemoteExpertSource::remote_host_stats(std::vector<experts::RemoteHostStats>* out) const {
  const Impl& m = *impl_;
  experts::RemoteHostStats h;
  h.name = m.opt.name;
  h.address = m.opt.address;
  h.up = m.connected && m.alive;
  if (!h.up) h.error = msg(m.last_error);
  h.requests = m.st.requests;
  h.steps = m.steps;
  h.bytes_sent = m.bytes_sent.load();
  h.bytes_received = m.bytes_received.load();
  h.failures = m.failures;
  h.latency_buckets = m.latency;
  h.latency_sum = m.latency_sum;
  h.latency_count = m.latency_count;
  out->push_back(std::move(h));
}

Status RemoteExpertSource::submit(const experts::ExpertRequest& r) {
  Impl& m = *impl_;
  m.held.clear();
  K3_RETURN_IF_ERROR(experts::check_request(r, m.shape.num_experts));
  if (r.priority == experts::ExpertPriority::kSpeculative) {
    if (!m.connected || !m.alive || r.work.empty()) return absl::OkStatus();  // a guess
    pb::ExpertStreamRequest p;
    p.set_step(0);
    p.set_model_fingerprint(m.fingerprint);
    p.set_layer(static_cast<uint32_t>(r.layer));
    p.set_mode(pb::EXPERT_MODE_PREFETCH);
    for (const experts::ExpertWork& w : r.work) {
      if (!owns(r.layer, w.expert)) continue;
      p.add_work()->set_expert(static_cast<uint32_t>(w.expert));
      ++m.st.speculative;
    }
    if (p.work_size() > 0) m.send(std::move(p));
    return absl::OkStatus();
  }
  // A new demand request replaces the one in flight: its replies are
  // dropped by step number.
  m.req = r;
  m.left = 0;
  if (r.work.empty()) return absl::OkStatus();
  K3_RETURN_IF_ERROR(prepare());
  for (const experts::ExpertWork& w : r.work)
    if (!owns(r.layer, w.expert))
      return absl::NotFoundError(cat("remote expertd ", m.label(), " does not serve expert ",
                                     w.expert, " of layer ", r.layer));
  m.mode_bytes = m.bytes_for(r);
  const std::string isa(base::kernel_isa_name(base::kernel_isa()));
  pb::ExpertStreamRequest p =
      experts::encode_step_request(m.shape, r, ++m.step, m.fingerprint, m.mode_bytes, isa);
  m.replies.start(m.shape, r.work, m.mode_bytes);
  // What the replies may hold: each expert's bytes (bytes mode) or its rows
  // (latent floats each), twice over for framing, and 64 KiB per expert.
  uint64_t budget = 0;
  for (const experts::ExpertWork& w : r.work)
    budget +=
        2 * (m.mode_bytes ? m.shape.bytes
                          : w.rows.size() * static_cast<uint64_t>(m.shape.latent) * sizeof(float)) +
        (64u << 10);
  m.step_budget = budget;
  m.accept_step = m.step;
  m.left = r.work.size();
  m.st.requests += r.work.size();
  m.step_sent = Clock::now();
  m.step_rows = 0;
  if (!m.mode_bytes)
    for (const experts::ExpertWork& w : r.work) m.step_rows += w.rows.size();
  m.step_allowance = remote_step_allowance(m.opt, m.shape, r.work.size(), m.step_rows);
  m.step_deadline = m.step_sent + m.step_allowance;
  ++m.steps;
  m.send(std::move(p));
  return absl::OkStatus();
}

StatusOr<std::optional<experts::ExpertCompletion>> RemoteExpertSource::poll(int timeout_ms) {
  Impl& m = *impl_;
  m.held.clear();
  if (m.left == 0) return absl::FailedPreconditionError("no expert completion is due");
  const auto until = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    std::optional<pb::ExpertStreamReply> r;
    bool ended = false;
    {
      std::unique_lock<std::mutex> lk(m.mu);
      while (!m.inbox.empty() && m.inbox.front().step() != m.step) m.inbox.pop_front();
      if (!m.inbox.empty()) {
        r = std::move(m.inbox.front());
        m.inbox.pop_front();
      } else if (m.read_done) {
        ended = true;
      } else if (timeout_ms != 0) {
        auto wake = m.step_deadline;
        if (timeout_ms > 0) wake = std::min(wake, until);
        const auto t0 = Clock::now();
        if (t0 < wake) {
          m.cv.wait_until(lk, wake, [&] { return m.read_done || !m.inbox.empty(); });
          m.st.wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
          continue;
        }
      }
    }
    if (r) {
      auto c = m.take(*r);
      if (!c.ok()) return m.fail(msg(c.status()));
      if (*c) return c;
      continue;  // a chunk of an expert not yet complete
    }
    if (ended) return m.fail("");
    if (Clock::now() >= m.step_deadline)
      return m.fail(cat(
          "layer ", m.req.layer, "'s ", m.left, " of ", m.req.work.size(),
          " expert(s) not answered within ", m.step_allowance.count(), " ms (--remote-deadline-ms ",
          m.opt.deadline_ms, " + ", m.req.work.size(), " x ", m.shape.bytes, " B",
          m.step_rows == 0 ? std::string()
                           : cat(" and ", m.step_rows, " row(s) x ", 2 * m.shape.latent * 4, " B"),
          " at --remote-min-mbps ", m.opt.min_mbps,
          m.step_rows == 0 ? std::string()
                           : cat(" + ", m.step_rows, " row(s) x ", expert_macs_per_row(m.shape),
                                 " multiply-adds at ", kRemoteMinComputeGmacs, " G/s"),
          "; host down, hung, unreachable or too slow)"));
    if (timeout_ms == 0 || (timeout_ms > 0 && Clock::now() >= until))
      return std::optional<experts::ExpertCompletion>();
  }
}

}  // namespace k3::engined
