// Every library's tunables together: what `atomr info --all` lists.
#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "atomr/cluster/all_tunables.hpp"

namespace atomr {
namespace {

TEST(AllTunables, EachIsDeclaredOnceWithTheAtomrPrefixAndAMeaning) {
  std::set<std::string_view> names;
  std::set<std::string_view> envs;
  for (const tunable* t : all_tunables()) {
    EXPECT_TRUE(names.insert(t->name).second) << t->name;
    EXPECT_TRUE(envs.insert(t->env).second) << t->env;
    EXPECT_TRUE(t->env.starts_with("ATOMR_")) << t->env;
    EXPECT_FALSE(t->description.empty()) << t->name;
  }
  // The switches that only compared two designs are gone with the losing design.
  for (const std::string_view gone : {"ATOMR_NCCL_BLOCKING", "ATOMR_COLL_BULK", "ATOMR_DEVICE_INLINE"}) {
    EXPECT_FALSE(envs.contains(gone)) << gone;
  }
}

TEST(AllTunables, TheUserFacingOnesAreTheFewAUserTurns) {
  std::set<std::string_view> user;
  for (const tunable* t : all_tunables()) {
    if (t->level == tunable::user) user.insert(t->env);
  }
  for (const std::string_view env : {"ATOMR_LOG", "ATOMR_COLL_TIMEOUT_MS", "ATOMR_HEARTBEAT_TIMEOUT_MS",
                                     "ATOMR_ON_FAILURE", "ATOMR_NCCL_GRAPHS", "ATOMR_CUDA_IPC"}) {
    EXPECT_TRUE(user.contains(env)) << env;
  }
  EXPECT_FALSE(user.contains("ATOMR_ROUTER_CORK_US"));
  EXPECT_LT(user.size(), all_tunables().size());
}

}  // namespace
}  // namespace atomr
