// The README's tour, run at 2 ranks on host devices: each block between "README: <name>" and
// "README: end" is in README.md word for word (readme_snippets_test checks it), so the README's
// code compiles and does what its text says.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

// README: device
#include <atomr/local/actors.hpp>
#include <atomr/local/device/device.hpp>

// Your kernel, launched on ctx.stream.
atomr::result<void> launch_scale(float* data, std::size_t n, float factor, const atomr::local::stream_context& ctx);

// Each co_await suspends the coroutine until the GPU has done the step; no thread waits.
atomr::local::task<float> scale_on_device(atomr::local::device gpu) {
  std::vector<float> host(1024, 1.5f);
  ATOMR_CO_TRY(auto buf, co_await gpu.allocate<float>(host.size()));  // an error leaves here
  ATOMR_CO_TRY_VOID(co_await gpu.upload(buf, std::span<const float>(host)));
  auto kernel = [buf](const atomr::local::stream_context& ctx) -> atomr::result<void> {
    ATOMR_ASSIGN_OR_RETURN(float* p, buf.data());  // checked: a stale buffer fails here
    return launch_scale(p, buf.size(), 2.0f, ctx);
  };
  std::vector uses{buf.block()};  // kept alive until the kernel is done
  ATOMR_CO_TRY_VOID(co_await gpu.run(kernel, uses));
  ATOMR_CO_TRY_VOID(co_await gpu.download(buf, std::span<float>(host)));  // after the kernel, on the GPU
  co_return host[0];                                                      // 3.0
}
// README: end

// README: collective
#include <atomr/cluster/world.hpp>

// Every rank: a world over its GPU, an all_reduce, then a bucket of them submitted together.
atomr::result<void> average(MPI_Comm comm, const atomr::local::device& gpu,
                            const std::vector<atomr::local::gpu_ref<float>>& buckets) {
  using namespace atomr::cluster;
  ATOMR_ASSIGN_OR_RETURN(auto options, world_options::from_environment());
  ATOMR_ASSIGN_OR_RETURN(auto world, world::create(comm, {gpu}, options));  // NCCL on GPUs
  ATOMR_TRY(world->all_reduce(buckets[0], reduce_op::avg).get());           // in place
  std::vector<coll_spec> step;
  for (const auto& b : buckets) step.push_back(all_reduce_spec(b, reduce_op::avg));
  return world->submit_group(std::move(step)).get();  // one future for the whole group
}
// README: end

// README: remote ask
#include <atomr/cluster/router.hpp>

struct deposit {
  int amount;
  void serialize(auto& ar) { ar(amount); }
};
struct balance {
  atomr::local::reply_to<int> reply;
  void serialize(auto& ar) { ar(reply); }
};
ATOMR_WIRE_MESSAGE(deposit, 0x10001);  // a permanent id per message type that crosses ranks
ATOMR_WIRE_MESSAGE(balance, 0x10002);
using account_msg = std::variant<deposit, balance>;

class account : public atomr::local::actor<account_msg> {
  int total_ = 0;
  void receive(account_msg& m) override {
    if (auto* d = std::get_if<deposit>(&m))
      total_ += d->amount;
    else
      std::get<balance>(m).reply.send(total_);
  }
};

// On rank 1: an account every rank can reach by name.
atomr::result<void> open_account(atomr::cluster::router& router, atomr::local::actor_system& system) {
  ATOMR_ASSIGN_OR_RETURN(auto acc, system.spawn<account>({.name = "account"}));
  return router.publish("account", acc);
}

// On any rank: a tell and an ask to it; they arrive in the order sent.
atomr::local::task<int> deposit_and_ask(atomr::cluster::router& router) {
  using namespace std::chrono_literals;
  auto acc = router.lookup<account_msg>(1, "account");
  ATOMR_CO_TRY_VOID(acc.tell(deposit{5}));
  co_return co_await acc.ask<int>([](auto reply) { return balance{std::move(reply)}; }, 1s);
}
// README: end

// README: token fetch
#include <atomr/cluster/buffer_registry.hpp>

// The owner exports a buffer; its token (plain bytes, no pointer) can travel in any message.
atomr::result<atomr::cluster::remote_buffer> share(atomr::cluster::buffer_registry& registry,
                                                   const atomr::local::gpu_ref<float>& buf) {
  return registry.export_buffer(buf).get();  // once buf's earlier writes are done
}

// Any rank with the token fetches the bytes into its own buffer (GPU to GPU where it can).
atomr::result<atomr::local::gpu_ref<float>> fetch(atomr::cluster::buffer_registry& registry,
                                                  const atomr::local::device& gpu,
                                                  const atomr::cluster::remote_buffer& token) {
  ATOMR_ASSIGN_OR_RETURN(auto mine, gpu.allocate<float>(token.bytes / sizeof(float)).get());
  ATOMR_TRY(registry.fetch(token, mine).get());
  return mine;
}
// README: end

atomr::result<void> launch_scale(float* data, std::size_t n, float factor, const atomr::local::stream_context&) {
  for (std::size_t i = 0; i < n; ++i) data[i] *= factor;  // host devices: the device's thread runs it
  return atomr::ok();
}

namespace {

namespace local = atomr::local;

class readme_tour : public ::testing::Test {
 protected:
  void SetUp() override { MPI_Comm_rank(MPI_COMM_WORLD, &rank_); }
  int rank_ = 0;
  local::actor_system sys_;
  local::device dev_ = local::device::start(sys_, 0, local::device_kind::host).value();
};

TEST_F(readme_tour, Device) { EXPECT_EQ(scale_on_device(dev_).get().value(), 3.0f); }

TEST_F(readme_tour, Collective) {
  std::vector<local::gpu_ref<float>> buckets;
  for (int i = 0; i < 3; ++i) {
    auto b = dev_.allocate<float>(256).get().value();
    std::vector<float> values(256, static_cast<float>(rank_ + 1));
    ASSERT_TRUE(dev_.upload(b, std::span<const float>(values)).get());
    buckets.push_back(b);
  }
  ASSERT_TRUE(average(MPI_COMM_WORLD, dev_, buckets)) << "average failed";
  std::vector<float> out(256);
  ASSERT_TRUE(dev_.download(buckets[1], std::span<float>(out)).get());
  EXPECT_EQ(out[7], 1.5f);  // the average of 1 and 2
}

TEST_F(readme_tour, RemoteAskAndTokenFetch) {
  auto router = atomr::cluster::router::start(MPI_COMM_WORLD, sys_).value();
  if (rank_ == 1) {
    ASSERT_TRUE(open_account(*router, sys_));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) {
    EXPECT_EQ(deposit_and_ask(*router).get().value(), 5);
  }

  auto registry = atomr::cluster::buffer_registry::start(MPI_COMM_WORLD, *router, {dev_}).value();
  auto buf = dev_.allocate<float>(100).get().value();
  std::vector<float> values(100, 7.0f);
  ASSERT_TRUE(dev_.upload(buf, std::span<const float>(values)).get());
  atomr::cluster::remote_buffer token{};
  if (rank_ == 0) token = share(*registry, buf).value();
  MPI_Bcast(&token, sizeof token, MPI_BYTE, 0, MPI_COMM_WORLD);  // (a message would do as well)
  if (rank_ == 1) {
    auto mine = fetch(*registry, dev_, token).value();
    std::vector<float> out(100);
    ASSERT_TRUE(dev_.download(mine, std::span<float>(out)).get());
    EXPECT_EQ(out[99], 7.0f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  registry.reset();
  EXPECT_TRUE(router->stop());
}

}  // namespace
