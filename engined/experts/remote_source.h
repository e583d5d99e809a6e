// ExpertSource over one remote expertd (expertd --remote-listen; protocol in
// proto/k3serve/v1/expert.proto): one long-lived bidirectional Experts
// stream, one ExpertStreamRequest per MoE layer step, (token, expert) rows
// computed next to the data and sent back unweighted (compute mode) or the
// experts' raw bytes streamed in chunks and computed here (bytes mode).
//
// submit() hands the request to a writer thread and returns at once, so the
// caller computes its local experts while this host works; a reader thread
// collects the replies poll() hands out. Every step has a deadline: a host
// that dies, hangs or loses its link is noticed within it, the stream is
// cancelled, and the request fails UNAVAILABLE naming the host (the placement
// re-issues the work on a replica). A lost host is tried again by prepare()
// at most every retry_ms (health polling): it is used again once it answers
// Describe with this model's fingerprint.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "shared/checkpoint/manifest.h"
#include "shared/experts/expert_source.h"
#include "shared/rpc/credentials.h"

namespace k3::engined {

struct RemoteSourceOptions {
  std::string name;     // NAME of --remote-expertd NAME=HOST:PORT (in messages)
  std::string address;  // HOST:PORT
  rpc::TlsFiles tls;    // ca (and cert + key for mutual TLS); unused when insecure
  bool insecure = false;
  std::string token;         // sent as "authorization: Bearer TOKEN" ("" = none)
  uint64_t fingerprint = 0;  // the model's; a host of another model is refused
  // Connect + Describe; and the base of a layer step's deadline, to which
  // remote_step_allowance adds the step's bytes at min_mbps and, in compute
  // mode, its token rows' compute at kRemoteMinComputeGmacs: measured from
  // when the step goes out, not from the last reply, so a host that
  // trickles is given up like a dead one.
  int deadline_ms = 10000;
  double min_mbps = 50;     // 10^6 bytes/s
  int retry_ms = 1000;      // a lost host is polled again at most this often
  bool bytes_mode = false;  // fetch the experts' bytes and compute here
  // Bytes mode: every expert received is checked as a drive read is (NaN
  // scales; with a manifest, its XXH3-128), and one that fails ends the step
  // naming the host, as a lost host does (its work goes to a replica).
  std::shared_ptr<const checkpoint::Manifest> manifest;
};

// The slowest a healthy host is taken to compute routed expert rows, in
// 10^9 multiply-adds per second. A host computes with the engine's kernel
// variant on all its cores; one core runs the expert matmuls at 1.9 G/s on
// the scalar int8 kernel (mxfp4_matmul_q8_scalar, 3584 x 3072, 16 tokens,
// this project's 2-core EPYC machine; 2.7 on the scalar float one), 55-104
// on AVX2 and 97-236 on AVX-512 VNNI (the notes in
// shared/kernels/mxfp4_q8_batched_*.cpp). 1 G/s is half of one core on the
// slowest variant: a host below it is broken or starved, not busy.
inline constexpr double kRemoteMinComputeGmacs = 1.0;

// Multiply-adds of one token row through one routed expert: its gate and up
// matrices {intermediate, latent} and its down matrix {latent, intermediate}
// (compute_expert_rows); 33.0 M on the real model (3072 x 3584).
uint64_t expert_macs_per_row(const experts::ExpertShape& shape);

// A layer step's deadline after it goes out: deadline_ms; plus what the
// step moves at min_mbps: its `experts` x shape.bytes (the host reads them
// all) and, for each of its `computed_rows`, the row's activations out and
// its result back (latent floats each way at most); plus the
// computed_rows x expert_macs_per_row at kRemoteMinComputeGmacs. Capped at
// 24 hours. `computed_rows` is the sum of the work's rows in compute mode
// (the host computes them) and 0 in bytes mode (this engine computes them
// as each expert's bytes arrive, outside the host's time). The real model's
// big prefill step, 32 experts x 73 rows each, gets 10 + 11.2 + 1.1 + 77.2 s
// at the defaults; a decode step of 16 experts x 1 row about 10 + 5.6 +
// 0.5 s.
std::chrono::milliseconds remote_step_allowance(const RemoteSourceOptions& opt,
                                                const experts::ExpertShape& shape, size_t experts,
                                                size_t computed_rows);

class RemoteExpertSource final : public experts::ExpertSource {
 public:
  // Checks the options (TLS files are read now) and tries to connect once;
  // a host that is not up yet is tried again by prepare().
  static StatusOr<std::unique_ptr<RemoteExpertSource>> create(const RemoteSourceOptions& opt,
                                                              const experts::ExpertShape& shape);
  ~RemoteExpertSource() override;  // cancels the stream
  Status submit(const experts::ExpertRequest& request) override;
  StatusOr<std::optional<experts::ExpertCompletion>> poll(int timeout_ms) override;
  size_t outstanding() const override;
  Status prepare() override;
  bool owns(int64_t layer, int64_t expert) const override;
  experts::ExpertSourceStats stats() const override;
  bool remote() const override { return true; }
  void remote_host_stats(std::vector<experts::RemoteHostStats>* out) const override;
  // "NAME (HOST:PORT)".
  std::string label() const;

 private:
  struct Impl;
  explicit RemoteExpertSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "NAME=HOST:PORT" -> {NAME, HOST:PORT}; refuses other forms, naming the flag.
StatusOr<std::pair<std::string, std::string>> parse_remote_expertd(const std::string& value);

}  // namespace k3::engined
