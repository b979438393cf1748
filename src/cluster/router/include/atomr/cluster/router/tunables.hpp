// The tunables of the router, declared where they are read (atomr info lists them).
#pragma once

#include <array>

#include "atomr/common/tunables.hpp"

namespace atomr::tunables {

inline constexpr tunable router_queue{"router_queue", "ATOMR_ROUTER_QUEUE", "65536",
                                      "router: messages per peer accepted but not yet sent, at most"};
inline constexpr tunable router_overflow{"router_overflow", "ATOMR_ROUTER_OVERFLOW", "block",
                                         "router: a send to a full queue waits (block, up to 10 s) or fails (fail)"};
inline constexpr tunable router_packet{"router_packet", "ATOMR_ROUTER_PACKET", "65536",
                                       "router: largest MPI message, bytes (rank 0's value is used)", tunable::expert};
inline constexpr tunable router_idle{"router_idle_us", "ATOMR_ROUTER_IDLE_US", "2000",
                                     "router: the progress thread spins this long after traffic, then naps, us",
                                     tunable::expert};
inline constexpr tunable router_direct{"router_direct_us", "ATOMR_ROUTER_DIRECT_US", "2",
                                       "router: a caller sends itself to a peer quiet this long, us (0: never)",
                                       tunable::expert};
inline constexpr tunable router_cork{"router_cork_us", "ATOMR_ROUTER_CORK_US", "2",
                                     "router: the longest a staged tell waits to fill a packet, us", tunable::expert};
inline constexpr tunable router_stream_cork{
    "router_stream_cork_us", "ATOMR_ROUTER_STREAM_CORK_US", "32",
    "router: the same while a stream flows (the peer's last packet left within this long), us", tunable::expert};

inline constexpr std::array k_router{&router_queue,  &router_overflow, &router_packet,     &router_idle,
                                     &router_direct, &router_cork,     &router_stream_cork};

}  // namespace atomr::tunables
