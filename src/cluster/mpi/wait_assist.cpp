#include "atomr/cluster/mpi/wait_assist.hpp"

#include "atomr/cluster/mpi/tunables.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/spin.hpp"

namespace atomr::cluster::detail {

bool wait_assist_enabled() {
  static const bool on = [] {
    const std::string v = tunable_value(tunables::wait_assist);
    if (v == "1") return true;
    if (v == "0") return false;
    if (v != "auto") {
      log::get("cluster")->warn("{}={} is not 1, 0 or auto; using auto", tunables::wait_assist.env, v);
    }
    return spin_relax::plenty();
  }();
  return on;
}

}  // namespace atomr::cluster::detail
