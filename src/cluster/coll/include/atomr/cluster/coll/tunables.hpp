// The tunables of a world's collectives (read by world_options::from_environment), declared where they are read (atomr
// info lists them).
#pragma once

#include <array>

#include "atomr/common/tunables.hpp"

namespace atomr::tunables {

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
                                         "event each; smaller ones issued in a row share one",
                                         tunable::expert};
inline constexpr tunable coll_call_batch{
    "coll_call_batch", "ATOMR_COLL_CALL_BATCH", "256",
    "a long per-request group of small all_reduces, planned whole: requests per packed batch (best a multiple of 128, "
    "the parts the call is handed over in)",
    tunable::expert};
inline constexpr tunable coll_pack_graphs{
    "coll_pack_graphs", "ATOMR_COLL_PACK_GRAPHS", "1",
    "NCCL, CUDA graphs on: a packed batch repeated on the same buffers is voted on and replayed as one graph (its "
    "pack up to ATOMR_NCCL_GRAPH_BYTES); 0: packed batches are issued as usual. The same on every rank",
    tunable::expert};
inline constexpr tunable coll_group_cache{
    "coll_group_cache", "ATOMR_COLL_GROUP_CACHE", "1",
    "a submit_group call of bulk calls made twice lately with the same specs and buffers is prepared and kept (at "
    "most 4, each holding its buffers until 1 s unsubmitted), and later matching calls are submitted as it; 0: off",
    tunable::expert};
inline constexpr tunable coll_vote_shm{
    "coll_vote_shm", "ATOMR_COLL_VOTE_SHM", "1",
    "every rank of a world on one node: its CUDA graph votes go through shared memory; 0: by MPI point-to-point "
    "messages (as across nodes)",
    tunable::expert};
inline constexpr tunable trace{"trace", "ATOMR_TRACE", "",
                               "path prefix: each rank writes its request timeline to <path>.rank<N>.json"};
inline constexpr tunable trace_requests{"trace_requests", "ATOMR_TRACE_REQUESTS", "65536",
                                        "the request timeline keeps the last this many requests", tunable::expert};

inline constexpr std::array k_coll{&coll_init_timeout, &coll_timeout,    &coll_check,       &coll_pack_bytes,
                                   &coll_seal_bytes,   &coll_call_batch, &coll_pack_graphs, &coll_group_cache,
                                   &coll_vote_shm,     &trace,           &trace_requests};

}  // namespace atomr::tunables
