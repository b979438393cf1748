// The tunables of actors, devices and topology, declared where they are read (atomr info lists them).
#pragma once

#include <array>

#include "atomr/common/tunables.hpp"

namespace atomr::tunables {

inline constexpr tunable dedicated_look{
    "dedicated_look_us", "ATOMR_DEDICATED_LOOK_US", "100",
    "an actor thread of its own (device actors) looks for work this long before it sleeps, us (0: sleeps at once)",
    tunable::expert};
inline constexpr tunable wait_look{
    "wait_look_us", "ATOMR_WAIT_LOOK_US", "auto",
    "a thread waiting for a future (a reply, a device operation) looks this long before it sleeps, us; "
    "auto: 1000 where a rank has 4+ CPUs, else 200",
    tunable::expert};
inline constexpr tunable host_arena_most{
    "host_arena_most", "ATOMR_HOST_ARENA_MOST", "4194304",
    "host devices: buffers up to this size come from memory the node's other ranks can map, so that the host "
    "backend's shared-memory all_reduce reads and writes them where they are; 0: every buffer from the heap",
    tunable::expert};
inline constexpr tunable avoid_irq_cpus{
    "avoid_irq_cpus", "ATOMR_AVOID_IRQ_CPUS", "1",
    "1: a world's progress thread and the thread that creates it keep off the CPUs that take the node's GPU "
    "interrupts (where others are allowed); 0: they run wherever the scheduler puts them"};

inline constexpr std::array k_local{&dedicated_look, &wait_look, &host_arena_most, &avoid_irq_cpus};

}  // namespace atomr::tunables
