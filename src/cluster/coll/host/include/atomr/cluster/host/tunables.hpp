// The tunables of the host backend, declared where they are read (atomr info lists them).
#pragma once

#include <array>

#include "atomr/common/tunables.hpp"

namespace atomr::tunables {

inline constexpr tunable host_rd_bytes{
    "host_rd_bytes", "ATOMR_HOST_RD_BYTES", "65536",
    "host backend: all_reduces (and packs) up to this size go by point-to-point recursive doubling; 0: MPI_Iallreduce",
    tunable::expert};
inline constexpr tunable host_shm_bytes{
    "host_shm_bytes", "ATOMR_HOST_SHM_BYTES", "4194304",
    "host backend, every rank on one node: each rank's shared-memory ring; all_reduces (and packs) up to half of it "
    "are reduced through it (at most 256 MiB for all ranks together); 0: never",
    tunable::expert};

inline constexpr std::array k_host{&host_rd_bytes, &host_shm_bytes};

}  // namespace atomr::tunables
