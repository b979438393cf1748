// Every tunable of atomr, declared once: name, environment variable, default and meaning.
// `atomr info` prints this table with the values in effect. Add a tunable by adding one line to the
// list below; read it with tunable_value()/tunable_int().
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "atomr/common/result.hpp"

namespace atomr {

struct tunable {
  std::string_view name;
  std::string_view env;
  std::string_view default_value;
  std::string_view description;
};

namespace tunables {
inline constexpr tunable log{"log", "ATOMR_LOG", "info", "log level, then per-subsystem overrides: warn,cluster=debug"};
inline constexpr tunable wire_max_payload{"wire_max_payload", "ATOMR_WIRE_MAX_PAYLOAD", "67108864",
                                          "largest message payload a rank accepts from the wire, bytes"};
inline constexpr tunable wire_max_container{"wire_max_container", "ATOMR_WIRE_MAX_CONTAINER", "16777216",
                                            "longest container or string a rank decodes from the wire, elements"};

inline constexpr tunable coll_init_timeout{"coll_init_timeout_ms", "ATOMR_COLL_INIT_TIMEOUT_MS", "60000",
                                           "deadline for creating a world (NCCL or host), ms"};
inline constexpr tunable coll_timeout{"coll_timeout_ms", "ATOMR_COLL_TIMEOUT_MS", "120000",
                                      "deadline of each collective, ms; the watchdog aborts the world after it"};
inline constexpr tunable coll_check{"coll_check", "ATOMR_COLL_CHECK", "0",
                                    "1: compare every collective across ranks first; report the first mismatch"};
inline constexpr tunable coll_pack_bytes{"coll_pack_bytes", "ATOMR_COLL_PACK_BYTES", "65536",
                                         "all_reduces up to this size may be packed together; 0: no packing"};
inline constexpr tunable coll_seal_bytes{"coll_seal_bytes", "ATOMR_COLL_SEAL_BYTES", "1048576",
                                         "NCCL: collectives of at least this many bytes per rank get a completion "
                                         "event each; smaller ones issued in a row share one"};

inline constexpr tunable coll_call_batch{
    "coll_call_batch", "ATOMR_COLL_CALL_BATCH", "256",
    "a long submit_all call of small all_reduces, planned whole: requests per packed batch (best a multiple of 128, "
    "the parts the call is handed over in)"};

inline constexpr tunable coll_pack_graphs{
    "coll_pack_graphs", "ATOMR_COLL_PACK_GRAPHS", "1",
    "NCCL, CUDA graphs on: a packed batch repeated on the same buffers is voted on and replayed as one graph (its "
    "pack up to ATOMR_NCCL_GRAPH_BYTES); 0: packed batches are issued as usual. The same on every rank"};

inline constexpr tunable coll_bulk{
    "coll_bulk", "ATOMR_COLL_BULK", "1",
    "a submit_all or submit_group call of more than 128 small all_reduces (up to ATOMR_COLL_PACK_BYTES each) goes "
    "through the engine as one request, 1024 at most each; 0: one request per all_reduce. The same on every rank"};

inline constexpr tunable coll_group_cache{
    "coll_group_cache", "ATOMR_COLL_GROUP_CACHE", "1",
    "a submit_group call of bulk calls made twice lately with the same specs and buffers is prepared and kept (at "
    "most 4, each holding its buffers until 1 s unsubmitted), and later matching calls are submitted as it; 0: off"};

inline constexpr tunable coll_vote_shm{
    "coll_vote_shm", "ATOMR_COLL_VOTE_SHM", "1",
    "every rank of a world on one node: its CUDA graph votes go through shared memory; 0: by MPI point-to-point "
    "messages (as across nodes)"};

inline constexpr tunable host_rd_bytes{
    "host_rd_bytes", "ATOMR_HOST_RD_BYTES", "65536",
    "host backend: all_reduces (and packs) up to this size go by point-to-point recursive doubling; 0: MPI_Iallreduce"};
inline constexpr tunable host_shm_bytes{
    "host_shm_bytes", "ATOMR_HOST_SHM_BYTES", "4194304",
    "host backend, every rank on one node: each rank's shared-memory ring; all_reduces (and packs) up to half of it "
    "are reduced through it (at most 256 MiB for all ranks together); 0: never"};
inline constexpr tunable host_arena_most{
    "host_arena_most", "ATOMR_HOST_ARENA_MOST", "4194304",
    "host devices: buffers up to this size come from memory the node's other ranks can map, so that the host "
    "backend's shared-memory all_reduce reads and writes them where they are; 0: every buffer from the heap"};

inline constexpr tunable nccl_blocking{
    "nccl_blocking", "ATOMR_NCCL_BLOCKING", "1",
    "1: blocking NCCL communicators (a blocked call is aborted at its deadline); 0: nonblocking (slow enqueue)"};
inline constexpr tunable spin{
    "spin", "ATOMR_SPIN", "auto",
    "how polling threads wait between looks: pause (spin with the CPU's pause hint), yield (give the core up), "
    "auto: pause where a rank has 4 CPUs or more"};
inline constexpr tunable avoid_irq_cpus{
    "avoid_irq_cpus", "ATOMR_AVOID_IRQ_CPUS", "1",
    "1: a world's progress thread and the thread that creates it keep off the CPUs that take the node's GPU "
    "interrupts (where others are allowed); 0: they run wherever the scheduler puts them"};
inline constexpr tunable nccl_graphs{
    "nccl_graphs", "ATOMR_NCCL_GRAPHS", "1",
    "NCCL (blocking communicators): a collective the ranks repeat on the same buffers is captured once and "
    "replayed as CUDA graphs, one per GPU (the ranks agree on each replay): 1 or 0"};
inline constexpr tunable nccl_graph_bytes{"nccl_graph_bytes", "ATOMR_NCCL_GRAPH_BYTES", "1048576",
                                          "NCCL graphs: collectives up to this many bytes per rank are replayed"};
inline constexpr tunable nccl_scalable_ranks{
    "nccl_scalable_ranks", "ATOMR_NCCL_SCALABLE_RANKS", "1024",
    "NCCL worlds of at least this many GPUs start with ncclCommInitRankScalable (several unique ids); 0: never"};
inline constexpr tunable nccl_ranks_per_id{
    "nccl_ranks_per_id", "ATOMR_NCCL_RANKS_PER_ID", "128",
    "ncclCommInitRankScalable: one unique id (bootstrap root) per this many GPUs"};
inline constexpr tunable trace{"trace", "ATOMR_TRACE", "",
                               "path prefix: each rank writes its request timeline to <path>.rank<N>.json"};
inline constexpr tunable trace_requests{"trace_requests", "ATOMR_TRACE_REQUESTS", "65536",
                                        "the request timeline keeps the last this many requests"};

inline constexpr tunable heartbeat{"heartbeat_ms", "ATOMR_HEARTBEAT_MS", "500",
                                   "liveness: each rank's heartbeat period, ms; 0 turns liveness off"};
inline constexpr tunable heartbeat_timeout{"heartbeat_timeout_ms", "ATOMR_HEARTBEAT_TIMEOUT_MS", "10000",
                                           "liveness: a rank silent this long is declared failed, ms"};
inline constexpr tunable on_failure{"on_failure", "ATOMR_ON_FAILURE", "abort",
                                    "after a rank failed: abort (end the job, MPI_Abort) or continue"};

inline constexpr tunable router_queue{"router_queue", "ATOMR_ROUTER_QUEUE", "65536",
                                      "router: messages per peer accepted but not yet sent, at most"};
inline constexpr tunable router_overflow{"router_overflow", "ATOMR_ROUTER_OVERFLOW", "block",
                                         "router: a send to a full queue waits (block, up to 10 s) or fails (fail)"};
inline constexpr tunable router_packet{"router_packet", "ATOMR_ROUTER_PACKET", "65536",
                                       "router: largest MPI message, bytes (rank 0's value is used)"};
inline constexpr tunable router_idle{"router_idle_us", "ATOMR_ROUTER_IDLE_US", "2000",
                                     "router: the progress thread spins this long after traffic, then naps, us"};
inline constexpr tunable router_direct{"router_direct_us", "ATOMR_ROUTER_DIRECT_US", "2",
                                       "router: a caller sends itself to a peer quiet this long, us (0: never)"};
inline constexpr tunable router_cork{"router_cork_us", "ATOMR_ROUTER_CORK_US", "2",
                                     "router: the longest a staged tell waits to fill a packet, us"};
inline constexpr tunable router_stream_cork{
    "router_stream_cork_us", "ATOMR_ROUTER_STREAM_CORK_US", "32",
    "router: the same while a stream flows (the peer's last packet left within this long), us"};

inline constexpr tunable cuda_ipc{"cuda_ipc", "ATOMR_CUDA_IPC", "1",
                                  "buffer fetches between GPU ranks of one node: CUDA IPC (1) or host staging (0)"};

inline constexpr tunable fetch_nccl{
    "fetch_nccl", "ATOMR_FETCH_NCCL", "auto",
    "buffer fetches between GPU ranks by NCCL send/recv: auto (where CUDA IPC does not serve), 1 (first), 0 (never)"};

inline constexpr tunable dedicated_look{
    "dedicated_look_us", "ATOMR_DEDICATED_LOOK_US", "100",
    "an actor thread of its own (device actors) looks for work this long before it sleeps, us (0: sleeps at once)"};

inline constexpr tunable device_inline{
    "device_inline", "ATOMR_DEVICE_INLINE", "1",
    "a device operation that would be next anyway is enqueued by its caller, not the device thread: 1 or 0"};

inline constexpr tunable wait_look{
    "wait_look_us", "ATOMR_WAIT_LOOK_US", "auto",
    "a thread waiting for a future (a reply, a device operation) looks this long before it sleeps, us; "
    "auto: 1000 where a rank has 4+ CPUs, else 200"};

inline constexpr tunable wait_assist{
    "wait_assist", "ATOMR_WAIT_ASSIST", "auto",
    "a caller waiting for a collective or a remote ask polls for it itself: 1, 0, auto (where a rank has 4+ CPUs)"};

inline constexpr std::array k_all{&log,
                                  &wire_max_payload,
                                  &wire_max_container,
                                  &coll_init_timeout,
                                  &coll_timeout,
                                  &coll_check,
                                  &coll_pack_bytes,
                                  &coll_seal_bytes,
                                  &coll_call_batch,
                                  &coll_pack_graphs,
                                  &coll_bulk,
                                  &coll_group_cache,
                                  &coll_vote_shm,
                                  &nccl_blocking,
                                  &trace,
                                  &trace_requests,
                                  &heartbeat,
                                  &heartbeat_timeout,
                                  &on_failure,
                                  &router_queue,
                                  &router_overflow,
                                  &router_packet,
                                  &router_idle,
                                  &router_direct,
                                  &router_cork,
                                  &router_stream_cork,
                                  &cuda_ipc,
                                  &device_inline,
                                  &fetch_nccl,
                                  &dedicated_look,
                                  &wait_look,
                                  &wait_assist,
                                  &host_rd_bytes,
                                  &host_shm_bytes,
                                  &host_arena_most,
                                  &nccl_scalable_ranks,
                                  &nccl_ranks_per_id,
                                  &nccl_graphs,
                                  &nccl_graph_bytes,
                                  &avoid_irq_cpus,
                                  &spin};
}  // namespace tunables

// The value in effect: the environment variable if set and non-empty, else the default.
std::string tunable_value(const tunable& t);
// True when the value comes from the environment.
bool tunable_is_set(const tunable& t);
// The value parsed as a base-10 integer; a clear invalid_argument error names the variable otherwise.
result<std::int64_t> tunable_int(const tunable& t);
// The value as microseconds, at least 0, for a look or a wait read once at start: where it is not
// one, `fallback`, with a warning (subsystem `log_name`) that names the variable and what serves.
std::chrono::microseconds tunable_us_or(const tunable& t, std::chrono::microseconds fallback,
                                        std::string_view log_name);

}  // namespace atomr
