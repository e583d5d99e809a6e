// engined's request executor: one thread owns the model, the sessions and the
// checkpoints, and runs every admitted request together (continuous
// batching): each round, one forward pass takes every request's next piece (a
// prefill piece of up to `chunk` tokens, or the one token it sampled last), so
// the weights and the routed experts are read once for all of them and a long
// prompt does not stall the other sessions' decoding. Requests talk to it
// through a RequestHandle (an event queue plus a cancel flag).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "engined/sampler.h"
#include "engined/serving/checkpoint_store.h"
#include "engined/serving/chunk_policy.h"
#include "engined/serving/pass_pacer.h"
#include "engined/serving/placement_swap.h"
#include "engined/serving/prefill_rate.h"
#include "engined/serving/remote_host_counters.h"
#include "engined/serving/request_handle.h"
#include "engined/serving/session_pool.h"
#include "engined/serving/think_budget.h"

namespace k3::engined {

struct EngineCounters {
  uint64_t requests = 0, failed = 0, cancelled = 0;
  uint64_t prompt_tokens = 0, prefill_tokens = 0, reused_tokens = 0, restored_tokens = 0;
  uint64_t generated_tokens = 0;
  uint64_t checkpoints_saved = 0, checkpoint_restores = 0, checkpoint_bytes = 0;
  uint64_t checkpoint_budget_bytes = 0, checkpoint_evictions = 0, checkpoint_failed_saves = 0;
  // Prefill snapshots saved (EngineLoopOptions::snapshot_tokens), the disk
  // tier's bytes and budget, and disk writes dropped for a full queue.
  uint64_t snapshots_saved = 0, checkpoint_disk_bytes = 0, checkpoint_disk_budget_bytes = 0;
  uint64_t snapshot_writes_dropped = 0;
  uint32_t sessions = 0, sessions_busy = 0;
  uint64_t session_evictions = 0;
  k3::experts::ExpertSourceStats experts;
  // Per remote host in use, its counters summed over the expert sources
  // made for it (a placement that keeps a host keeps its counts).
  std::vector<k3::experts::RemoteHostStats> remote_hosts;
  SpeculationStats speculation;
  uint64_t experts_pruned = 0;  // (token, expert) pairs top-p dropped
  double prefill_seconds = 0, decode_seconds = 0;
  // The measured prefill rate (PrefillRate): 0 until a prefill ran.
  double prefill_tokens_per_second = 0;
};

struct EngineLoopOptions {
  int sessions = 4;
  CheckpointOptions checkpoints;
  // A prefill snapshot every this many prompt tokens (0: none): prefill
  // pieces are cut at its multiples and the state there saved into the
  // checkpoints (when they are on), so a later prompt sharing the prefix
  // resumes from the deepest one. Snapshots already saved outlive a
  // cancelled prefill.
  int64_t snapshot_tokens = 0;
  // The prefill chunk policy (issue 26): a prompt with many tokens left is
  // read in big chunks (chunk_policy.h sizes them; they end at snapshot
  // positions) by a ChunkPass in sub-chunks of about a second, between which
  // the other sessions decode; shorter prompts go in the model's chunk.
  // False: every prefill piece is the model's chunk (engined's --chunk).
  bool chunk_policy = true;
  // The pass's part per step, seconds (0: paced by the other sessions'
  // steps, pass_pacer.h). Tests set a small one to see many parts.
  double pass_part_seconds = 0;
  // Where routed experts come from. Without expertd segments the in-process
  // reader must open at create(); with them the loop starts even when they
  // cannot be attached yet (a daemon starting before its expertd): each step
  // retries and fails with UNAVAILABLE while it cannot.
  ExpertSourceOptions experts;
  // Token ids repetition_penalty never touches: the control tokens (the
  // tokenizer's specials).
  std::unordered_set<int32_t> unpenalized_ids;
  // The model's stop tokens (checkpoint/stop_tokens.h): every request ends
  // at the first it generates (none: only its own stop_ids end it).
  std::vector<int32_t> stop_ids;
};

// Thread-safe: submit(), set_placement() and counters() from any thread.
class EngineLoop {
 public:
  static StatusOr<std::unique_ptr<EngineLoop>> create(std::unique_ptr<Model> model,
                                                      const EngineLoopOptions& opt);
  ~EngineLoop();  // stops the loop; requests still running fail with CANCELLED

  // Validates and queues a request; it waits for a free session. Invalid
  // requests fail at once (INVALID_ARGUMENT / OUT_OF_RANGE).
  StatusOr<std::shared_ptr<RequestHandle>> submit(ServeRequest request);
  // Switches the expert source between steps; returns once applied. The
  // placement replaces the whole set: segments and remote hosts alike (the
  // flag-given ones until then). Each host is checked (check_remote_host)
  // before anything changes.
  Status set_placement(const std::vector<std::string>& segments,
                       const std::vector<RemoteHost>& remote_hosts, uint64_t version);
  uint64_t placement_version() const { return placement_.version(); }
  // The segments and remote hosts in use (as last set).
  std::vector<std::string> expertd_segments() const { return placement_.segments(); }
  std::vector<RemoteHost> remote_hosts() const { return placement_.remote_hosts(); }
  EngineCounters counters() const;
  const Model& model() const { return *model_; }
  int sessions() const { return opt_.sessions; }
  // The model's stop tokens (EngineLoopOptions::stop_ids).
  const std::vector<int32_t>& stop_ids() const { return opt_.stop_ids; }
  // Waits until the checkpoints' queued disk writes are done (tests).
  void wait_checkpoint_writes() { checkpoints_->wait_writes(); }

 private:
  struct Job;
  EngineLoop(std::unique_ptr<Model> model, const EngineLoopOptions& opt,
             std::unique_ptr<CheckpointStore> checkpoints,
             std::unique_ptr<k3::experts::ExpertSource> experts);
  void run();
  void admit();
  // One round: every active request's next piece (a prefill piece or its
  // last sampled token) in one forward pass, then sampling; finished
  // requests are released.
  void step_all();
  // Samples the next token from the session's logits; false when the
  // request is over (released).
  bool sample_next(Job& job, Session& s);
  // A request of n choices whose prefill just ended: copies the state into
  // the sessions held for choices 1..n-1 and returns their jobs.
  std::vector<std::unique_ptr<Job>> fork_choices(Job& job);
  // With the chunk policy: whether the job's prompt is read by a pass (it
  // has one, or enough tokens left), and the job whose pass runs this step
  // (started now for the first such job when none runs; null: none).
  bool wants_pass(const Job& job);
  Job* start_pass();
  void save_checkpoint(Job& job, Session& s, int64_t end);
  // Snapshots: the next multiple of snapshot_tokens after `pos` when it
  // cuts [pos, end) short of the prompt's end `n` (else `end`).
  int64_t snapshot_cut(Job& job, int64_t pos, int64_t end, int64_t n);
  void finish(Job& job, ServeEvent e, bool keep_state);
  // Sends the job's kProgress: its prefill done so far, of its total, with
  // the time left at prefill_rate_ shared by `reading` prompts read together.
  void report_progress(Job& job, int reading);
  // A placement posted by set_placement(): the expert source remade for it
  // (placement_swap.h).
  void apply_placement();
  // The remote hosts' figures into counters_ (remote_host_counters.h).
  void update_host_counters();
  // Copies the expert source's and the model's counters into counters_
  // (the caller holds mu_).
  void copy_model_counters();
  // Idle with remote hosts: tries the ones that are down again (health
  // polling), so /metrics sees a host back before the next request.
  void poll_hosts();

  // The expert source, made (again) on first use when null.
  Status ensure_experts();

  std::unique_ptr<Model> model_;
  std::unique_ptr<k3::experts::ExpertSource> experts_;  // the loop thread's
  EngineLoopOptions opt_;
  std::unique_ptr<CheckpointStore> checkpoints_;
  SessionPool pool_;

  // Guards inbox_, stop_, counters_. pool_, checkpoints_ and active_ belong
  // to the loop thread.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> inbox_;
  bool stop_ = false;
  EngineCounters counters_;
  PlacementSwap placement_;  // thread-safe itself

  std::vector<std::unique_ptr<Job>> active_;  // loop thread only
  RemoteHostCounters host_counters_;          // loop thread only
  PrefillRate prefill_rate_;                  // loop thread only; across requests
  PassPacer pacer_;                           // loop thread only
  int64_t policy_max_ = 0;                    // ChunkPolicy::max_tokens for this model
  std::thread thread_;
};

}  // namespace k3::engined
