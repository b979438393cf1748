#include <gtest/gtest.h>

#include <map>
#include <string>

#include "atomr/cluster/device_plan.hpp"
#include "atomr/common/launch_env.hpp"

namespace atomr::cluster {
namespace {

result<launch_env> read(const std::map<std::string, std::string>& vars) {
  return read_launch_env([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(LaunchEnv, NothingSetMeansNoLauncher) {
  const auto env = read({}).value();
  EXPECT_EQ(env.launcher, launcher_kind::none);
  EXPECT_FALSE(env.rank);
  EXPECT_FALSE(env.visible_devices);
}

TEST(LaunchEnv, OpenMpi) {
  const auto env = read({{"OMPI_COMM_WORLD_RANK", "3"},
                         {"OMPI_COMM_WORLD_SIZE", "8"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                         {"PMIX_NAMESPACE", "prterun-host-123@1"},
                         {"PMIX_RANK", "3"}})
                       .value();
  EXPECT_EQ(env.launcher, launcher_kind::open_mpi);
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_size, 2);
  EXPECT_EQ(env.job_id, "prterun-host-123@1");
  EXPECT_EQ(to_string(env.launcher), "open-mpi");
}

TEST(LaunchEnv, SlurmTakesPrecedenceOverPmixAndReadsNodes) {
  const auto env = read({{"SLURM_PROCID", "5"},
                         {"SLURM_NTASKS", "16"},
                         {"SLURM_LOCALID", "1"},
                         {"SLURM_NNODES", "4"},
                         {"SLURM_NTASKS_PER_NODE", "4"},
                         {"SLURM_JOB_ID", "991"},
                         {"PMIX_RANK", "5"}})
                       .value();
  EXPECT_EQ(env.launcher, launcher_kind::slurm);
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.size, 16);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_size, 4);
  EXPECT_EQ(env.node_count, 4);
  EXPECT_EQ(env.job_id, "991");
}

TEST(LaunchEnv, PmixAlone) {
  const auto env = read({{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "ns"}}).value();
  EXPECT_EQ(env.launcher, launcher_kind::pmix);
  EXPECT_EQ(env.rank, 2);
  EXPECT_FALSE(env.size);
  EXPECT_EQ(env.job_id, "ns");
}

TEST(LaunchEnv, MalformedValuesNameTheVariable) {
  const auto bad = read({{"SLURM_PROCID", "x1"}, {"SLURM_NTASKS", "4"}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error_value().code(), errc::invalid_argument);
  EXPECT_EQ(bad.error_value().message(), "SLURM_PROCID='x1' is not a non-negative integer");

  const auto negative = read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "-2"}});
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error_value().message().find("OMPI_COMM_WORLD_SIZE='-2'"), std::string::npos);

  const auto outside = read({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}});
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error_value().message(), "launcher slurm says rank 4 of 4");
}

TEST(LaunchEnv, VisibleDevices) {
  EXPECT_EQ(*read({{"CUDA_VISIBLE_DEVICES", "2, 3,GPU-abc"}}).value().visible_devices,
            (std::vector<std::string>{"2", "3", "GPU-abc"}));
  // Set but empty hides every GPU, which differs from unset.
  const auto hidden = read({{"CUDA_VISIBLE_DEVICES", ""}}).value();
  ASSERT_TRUE(hidden.visible_devices);
  EXPECT_TRUE(hidden.visible_devices->empty());
}

TEST(DevicePlan, OnePerRankByLocalRank) {
  EXPECT_EQ(choose_devices({}, 0, 2, 2).value(), std::vector<int>{0});
  EXPECT_EQ(choose_devices({}, 1, 2, 2).value(), std::vector<int>{1});
  EXPECT_EQ(choose_devices({}, 3, 4, 8).value(), (std::vector<int>{6, 7}));
  EXPECT_EQ(choose_devices({.per_rank = 1}, 3, 4, 8).value(), std::vector<int>{3});
  // One rank holding every GPU of the node.
  EXPECT_EQ(choose_devices({}, 0, 1, 2).value(), (std::vector<int>{0, 1}));
}

TEST(DevicePlan, NumaOrderGroupsLocalRanksByNode) {
  // GPUs 0 and 2 on NUMA 1, GPUs 1 and 3 on NUMA 0.
  const std::vector<int> numa{1, 0, 1, 0};
  EXPECT_EQ(choose_devices({}, 0, 4, 4, numa).value(), std::vector<int>{1});
  EXPECT_EQ(choose_devices({}, 1, 4, 4, numa).value(), std::vector<int>{3});
  EXPECT_EQ(choose_devices({}, 2, 4, 4, numa).value(), std::vector<int>{0});
  EXPECT_EQ(choose_devices({}, 0, 2, 4, numa).value(), (std::vector<int>{1, 3}));
}

TEST(DevicePlan, HostAndExplicitRequests) {
  EXPECT_TRUE(choose_devices({}, 0, 2, 0).value().empty());
  EXPECT_TRUE(choose_devices({.host = true}, 0, 1, 8).value().empty());
  EXPECT_EQ(choose_devices({.explicit_devices = {1, 0}}, 0, 1, 2).value(), (std::vector<int>{1, 0}));

  const auto missing = choose_devices({.explicit_devices = {2}}, 0, 1, 2);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error_value().message(), "device 2 was asked for, but 2 CUDA devices are visible");
  EXPECT_FALSE(choose_devices({.explicit_devices = {0, 0}}, 0, 1, 2));
}

TEST(DevicePlan, TooManyRanksForTheGpusIsAClearError) {
  const auto r = choose_devices({}, 2, 4, 2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::invalid_argument);
  EXPECT_NE(r.error_value().message().find("4 ranks on this node want 1 GPU(s) each, but 2 are visible"),
            std::string::npos);
  EXPECT_FALSE(choose_devices({}, 2, 2, 2));
}

TEST(DevicePlan, ParsesDeviceLists) {
  EXPECT_EQ(parse_device_list("0,2").value(), (std::vector<int>{0, 2}));
  EXPECT_EQ(parse_device_list("7").value(), std::vector<int>{7});
  for (const char* bad : {"", "0,", "a", "1,-1", "0;1"}) {
    const auto r = parse_device_list(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error_value().message().find("comma-separated device indices"), std::string::npos);
  }
}

TEST(LaunchEnv, RanksOnThisNodeFromTheLauncherOrSlurmsLeadingCountElseOne) {
  auto on = [](const std::map<std::string, std::string>& vars) {
    return ranks_on_this_node([&](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_EQ(on({}), 1u);
  EXPECT_EQ(on({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}),
            4u);
  EXPECT_EQ(on({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "6"}, {"SLURM_NTASKS_PER_NODE", "3"}}), 3u);
  EXPECT_EQ(on({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "11"}, {"SLURM_STEP_TASKS_PER_NODE", "4(x2),3"}}), 4u);
  EXPECT_EQ(on({{"SLURM_TASKS_PER_NODE", "2"}}), 2u);
  EXPECT_EQ(on({{"MPI_LOCALNRANKS", "5"}}), 5u);
  EXPECT_EQ(on({{"SLURM_TASKS_PER_NODE", "x"}}), 1u);
  EXPECT_EQ(on({{"SLURM_TASKS_PER_NODE", "0"}}), 1u);
}

}  // namespace
}  // namespace atomr::cluster
