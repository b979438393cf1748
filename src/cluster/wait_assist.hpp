// Whether callers waiting on a world's collectives or a router's asks poll for their answer
// themselves (local::progress_hook), per ATOMR_WAIT_ASSIST. Where a rank has few CPUs the waiter
// and the progress thread take turns on the same core and the assist costs more than it saves,
// so `auto` turns it on only where spin_relax counts CPUs as plentiful.
#pragma once

namespace atomr::cluster::detail {

// Read once per process; a bad value is reported once and `auto` serves.
bool wait_assist_enabled();

}  // namespace atomr::cluster::detail
