// Rank 0 fills a buffer on its device, exports it and sends the token to an actor on rank 1.
// That actor fetches the bytes into a buffer of its own (GPU to GPU where there are GPUs), sums
// them with a kernel on its device (the host device kind in CI) and answers with the sum.
//
//   mpirun -n 2 build/release/bin/atomr-example-token-sum
#include <cereal/types/vector.hpp>
#include <cstdio>
#include <memory>

#include "atomr/cluster/buffer_registry.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/router.hpp"
#include "atomr/local/devices.hpp"
#if ATOMR_HAVE_CUDA
#include "sum_kernel.hpp"
#endif

namespace example {
// "Sum this buffer": travels from rank 0 to rank 1; the reply is the sum.
struct sum_request {
  atomr::cluster::remote_buffer buffer;
  atomr::local::reply_to<double> reply;
  template <class A>
  void serialize(A& ar) {
    ar(buffer, reply);
  }
};
}  // namespace example
ATOMR_WIRE_MESSAGE(example::sum_request, 0x40001);

namespace example {
namespace al = atomr::local;

// Sums the floats of `buf` on `dev`'s stream; resolves with the sum.
al::future<double> device_sum(const al::device& dev, const al::gpu_ref<float>& buf) {
  auto total = std::make_shared<double>(0);
#if ATOMR_HAVE_CUDA
  if (dev.kind() == al::device_kind::cuda) {
    al::promise<double> p;
    auto f = p.get_future();
    auto shared = std::make_shared<al::promise<double>>(std::move(p));
    dev.allocate<double>(1).then([dev, buf, shared, total](const atomr::result<al::gpu_ref<double>>& acc) {
      if (!acc) return (void)shared->set_error(acc.error_value());
      const auto sum = *acc;
      dev.run(
             [buf, sum](const al::stream_context& ctx) -> atomr::result<void> {
               ATOMR_ASSIGN_OR_RETURN(float* in, buf.data());
               ATOMR_ASSIGN_OR_RETURN(double* out, sum.data());
               if (const int e = launch_sum(in, buf.size(), out, ctx.stream); e != 0) {
                 return atomr::error(atomr::errc::cuda, "sum kernel failed: CUDA error " + std::to_string(e));
               }
               return atomr::ok();
             },
             {buf.block(), sum.block()})
          .then([dev, sum, shared, total](const atomr::result<void>& ran) {
            if (!ran) return (void)shared->set_error(ran.error_value());
            dev.download(sum, std::span<double>(total.get(), 1))
                .then([shared, total, sum](const atomr::result<void>& d) {
                  if (!d) return (void)shared->set_error(d.error_value());
                  shared->set_value(*total);
                });
          });
    });
    return f;
  }
#endif
  // The host kind: the "kernel" is a loop run by the device on its own thread.
  al::promise<double> p;
  auto f = p.get_future();
  auto shared = std::make_shared<al::promise<double>>(std::move(p));
  dev.run(
         [buf, total](const al::stream_context&) -> atomr::result<void> {
           ATOMR_ASSIGN_OR_RETURN(float* in, buf.data());
           for (std::size_t i = 0; i < buf.size(); ++i) *total += in[i];
           return atomr::ok();
         },
         {buf.block()})
      .then([shared, total](const atomr::result<void>& ran) {
        if (!ran) return (void)shared->set_error(ran.error_value());
        shared->set_value(*total);
      });
  return f;
}

// Rank 1's actor: fetch, sum, answer. It never blocks: each step continues the last.
class summer : public al::actor<sum_request> {
 public:
  summer(al::device dev, atomr::cluster::buffer_registry* registry) : dev_(std::move(dev)), registry_(registry) {}
  void receive(sum_request& m) override {
    auto reply = std::make_shared<al::reply_to<double>>(std::move(m.reply));
    const std::size_t n = m.buffer.bytes / sizeof(float);
    dev_.allocate<float>(n).then([this, handle = m.buffer, reply](const atomr::result<al::gpu_ref<float>>& local) {
      if (!local) return reply->fail(local.error_value());
      const auto into = *local;
      registry_->fetch(handle, into).then([this, into, reply](const atomr::result<void>& fetched) {
        if (!fetched) return reply->fail(fetched.error_value());
        device_sum(dev_, into).then([reply, into](const atomr::result<double>& sum) {
          if (!sum) return reply->fail(sum.error_value());
          reply->send(*sum);
        });
      });
    });
  }

 private:
  al::device dev_;
  atomr::cluster::buffer_registry* registry_;
};

int fail(const atomr::error& e) {
  std::fprintf(stderr, "token_sum: %s\n", e.describe().c_str());
  return 1;
}

}  // namespace example

int main(int argc, char** argv) {
  using namespace example;
  auto session = atomr::cluster::mpi_session::start(&argc, &argv);
  if (!session) return fail(session.error_value());
  const auto& id = (*session)->identity();
  if (id.world_size < 2) return fail(atomr::error(atomr::errc::invalid_argument, "run with mpirun -n 2"));
  al::actor_system system;
  const auto gpus = al::probe_cuda_devices();
  const bool gpu = gpus && !gpus->devices.empty();
  const int index = gpu ? id.local_rank % static_cast<int>(gpus->devices.size()) : 0;
  auto dev = al::device::start(system, index, gpu ? al::device_kind::cuda : al::device_kind::host);
  if (!dev) return fail(dev.error_value());
  auto router = atomr::cluster::router::start((*session)->world(), system);
  if (!router) return fail(router.error_value());
  auto registry = atomr::cluster::buffer_registry::start((*session)->world(), **router, {*dev});
  if (!registry) return fail(registry.error_value());
  if (id.world_rank == 1) {
    auto s = system.spawn<summer>(al::spawn_options{.name = "summer"}, *dev, registry->get());
    if (!s) return fail(s.error_value());
    if (auto p = (*router)->publish("summer", *s); !p) return fail(p.error_value());
  }
  MPI_Barrier((*session)->world());  // rank 1's actor is published

  int status = 0;
  if (id.world_rank == 0) {
    constexpr std::size_t n = 1 << 20;
    std::vector<float> values(n);
    double expected = 0;
    for (std::size_t i = 0; i < n; ++i) expected += values[i] = static_cast<float>(i % 100) * 0.5f;
    auto buf = dev->allocate<float>(n).get();
    if (!buf) return fail(buf.error_value());
    if (auto u = dev->upload(*buf, std::span<const float>(values)).get(); !u) return fail(u.error_value());
    auto handle = (*registry)->export_buffer(*buf).get();
    if (!handle) return fail(handle.error_value());
    auto summer_ref = (*router)->lookup<sum_request>(1, "summer");
    auto sum = summer_ref
                   .ask<double>(
                       [&](al::reply_to<double> reply) {
                         return sum_request{*handle, std::move(reply)};
                       },
                       std::chrono::seconds(60))
                   .get();
    if (!sum) return fail(sum.error_value());
    std::printf("rank 1 summed %zu floats from rank 0's %s buffer (token %s): %.1f (expected %.1f)\n", n,
                gpu ? "GPU" : "host-device", atomr::to_string(handle->token).c_str(), *sum, expected);
    status = *sum == expected ? 0 : 1;
    (void)(*registry)->release(*handle);
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, (*session)->world());
  registry->reset();
  if (auto s = (*router)->stop(); !s) return fail(s.error_value());
  return status;
}
