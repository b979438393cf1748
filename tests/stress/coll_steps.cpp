// The collective steps: every public submission form, every kind, element type and reduction,
// sizes from 0 to 16 MiB, in place and out of place, splits, and calls that must be refused.
// Each step's shape comes from the step's seed (the same on every rank); which thread submits
// and the pauses come from the rank's own jitter.
#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <thread>

#include "context.hpp"
#include "model.hpp"

namespace atomr::stress {
namespace {

using cluster::coll_kind;
using cluster::coll_spec;

struct coll_case {
  coll_kind kind = coll_kind::all_reduce;
  local::dtype type = local::dtype::f32;
  reduce_op op = reduce_op::sum;
  int root = 0;            // broadcast, reduce
  std::size_t count = 0;   // elements per rank
  bool in_place = false;   // all_reduce, broadcast, reduce
  std::uint32_t salt = 0;  // shifts the inputs
};

constexpr std::size_t k_most_bytes = 16u << 20;

std::size_t random_bytes(std::mt19937_64& g, std::size_t most) {
  const unsigned c = static_cast<unsigned>(g() % 100);
  std::size_t b = 0;
  if (c < 6) {
    b = 0;
  } else if (c < 45) {
    b = 1 + g() % 256;
  } else if (c < 75) {
    b = 1 + g() % (64 * 1024);
  } else if (c < 94) {
    b = 1 + g() % (1u << 20);
  } else {
    b = 1 + g() % k_most_bytes;
  }
  return std::min(b, most);
}

std::size_t elem_size(local::dtype t) {
  return with_dtype(t, []<typename T>() { return sizeof(T); });
}

// How many elements of the send and receive buffers a case needs.
std::size_t send_elems(const coll_case& c, int n) {
  switch (c.kind) {
    case coll_kind::reduce_scatter:
    case coll_kind::all_to_all: return c.count * static_cast<std::size_t>(n);
    case coll_kind::barrier: return 0;
    default: return c.count;
  }
}
std::size_t recv_elems(const coll_case& c, int n) {
  switch (c.kind) {
    case coll_kind::all_gather:
    case coll_kind::all_to_all: return c.count * static_cast<std::size_t>(n);
    case coll_kind::barrier: return 0;
    default: return c.count;
  }
}

coll_case random_case(std::mt19937_64& g, int n, bool grouped, std::size_t most_bytes) {
  static constexpr coll_kind single_kinds[] = {coll_kind::all_reduce, coll_kind::all_reduce, coll_kind::broadcast,
                                               coll_kind::reduce,     coll_kind::all_gather, coll_kind::reduce_scatter,
                                               coll_kind::all_to_all, coll_kind::send,       coll_kind::barrier};
  static constexpr coll_kind group_kinds[] = {coll_kind::all_reduce, coll_kind::all_reduce, coll_kind::broadcast,
                                              coll_kind::reduce,     coll_kind::all_gather, coll_kind::reduce_scatter};
  coll_case c;
  c.kind = grouped ? group_kinds[g() % std::size(group_kinds)] : single_kinds[g() % std::size(single_kinds)];
  c.type = static_cast<local::dtype>(g() % 10);
  c.op = static_cast<reduce_op>(g() % 5);
  c.root = static_cast<int>(g() % static_cast<std::uint64_t>(n));
  c.in_place = (g() % 2) == 0 &&
               (c.kind == coll_kind::all_reduce || c.kind == coll_kind::broadcast || c.kind == coll_kind::reduce);
  c.salt = static_cast<std::uint32_t>(g() % 3);
  const std::size_t spread =
      (c.kind == coll_kind::all_gather || c.kind == coll_kind::reduce_scatter || c.kind == coll_kind::all_to_all)
          ? static_cast<std::size_t>(n)
          : 1;
  c.count = random_bytes(g, most_bytes / spread) / elem_size(c.type);
  // A group with a request of 0 elements is refused whole (the invalid steps check that).
  if (grouped) c.count = std::max<std::size_t>(c.count, 1);
  return c;
}

std::string describe(const coll_case& c) {
  return std::string(cluster::to_string(c.kind)) + " " + std::string(local::to_string(c.type)) + " " +
         std::string(cluster::to_string(c.op)) + " x" + std::to_string(c.count) + " root " + std::to_string(c.root) +
         (c.in_place ? " in place" : "");
}

// One case's buffers on this rank, and what it must leave in them.
struct live_case {
  coll_case c;
  std::function<coll_spec()> spec;              // the case as a spec (a fresh one each time)
  std::function<local::future<void>(int form)>  // a typed call of the world (0, 1: two spellings)
      typed;
  std::function<result<void>()> reset;  // the inputs and placeholders, uploaded again
  std::function<std::string()> check;   // "" where every element is right
};

template <typename T>
std::vector<T> inputs_of(const coll_case& c, int rank, std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from_double<T>(input(c.op, rank, i, c.salt));
  return v;
}

template <typename T>
std::string first_wrong(const std::vector<T>& got, const std::function<std::optional<double>(std::size_t)>& want,
                        reduce_op op) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto w = want(i);
    if (!w || matches<T>(got[i], *w, op)) continue;
    return "element " + std::to_string(i) + " of " + std::to_string(got.size()) + " is " +
           std::to_string(to_double(got[i])) + ", the model says " + std::to_string(*w);
  }
  return {};
}

template <typename T>
result<live_case> build(context& ctx, const coll_case& c) {
  const int n = ctx.world->size();
  const int me = ctx.world->rank();
  const std::size_t ns = send_elems(c, n);
  const std::size_t nr = recv_elems(c, n);
  local::device& dev = *ctx.dev;
  local::gpu_ref<T> send;
  local::gpu_ref<T> recv;
  if (c.kind != coll_kind::barrier) {
    ATOMR_ASSIGN_OR_RETURN(send, dev.allocate<T>(ns).get());
    if (c.in_place) {
      recv = send;
    } else {
      ATOMR_ASSIGN_OR_RETURN(recv, dev.allocate<T>(nr).get());
    }
  }
  const bool rooted = c.kind == coll_kind::broadcast || c.kind == coll_kind::reduce;
  // A broadcast's non-root buffers start as placeholders, so a broadcast that did nothing shows.
  const bool send_is_input = !(c.kind == coll_kind::broadcast && c.in_place && me != c.root);
  auto send_values = send_is_input ? inputs_of<T>(c, me, ns) : std::vector<T>(ns, from_double<T>(k_untouched));
  live_case out;
  out.c = c;
  out.spec = [send, recv, c] { return cluster::spec_of<T>(c.kind, send, recv, {c.op, c.root, c.count}); };
  out.typed = [w = ctx.world.get(), send, recv, c](int form) -> local::future<void> {
    const bool sized = form == 1;  // the count spelled out, rather than derived from the buffers
    const std::size_t k = sized ? c.count : 0;
    switch (c.kind) {
      case coll_kind::all_reduce:
        return c.in_place && !sized ? w->all_reduce(send, c.op) : w->all_reduce(send, recv, c.op, k);
      case coll_kind::broadcast:
        return c.in_place && !sized ? w->broadcast(send, c.root) : w->broadcast(send, recv, c.root, k);
      case coll_kind::reduce: return w->reduce(send, recv, c.op, c.root, k);
      case coll_kind::all_gather: return w->all_gather(send, recv, k);
      case coll_kind::reduce_scatter: return w->reduce_scatter(send, recv, c.op, k);
      case coll_kind::all_to_all: return w->all_to_all(send, recv, k);
      case coll_kind::barrier: return w->barrier();
      default: break;
    }
    return w->collective<T>(c.kind, std::span(&send, 1), std::span(&recv, 1), {c.op, c.root, c.count});
  };
  out.reset = [&dev, send, recv, send_values, c, nr]() -> result<void> {
    if (c.kind == coll_kind::barrier) return ok();
    ATOMR_TRY(dev.upload(send, std::span<const T>(send_values)).get());
    if (!c.in_place) {
      const std::vector<T> placeholder(nr, from_double<T>(k_untouched));
      ATOMR_TRY(dev.upload(recv, std::span<const T>(placeholder)).get());
    }
    return ok();
  };
  out.check = [&dev, send, recv, send_values, c, n, me, rooted]() -> std::string {
    if (c.kind == coll_kind::barrier) return {};
    std::vector<T> got(recv.size());
    if (auto r = dev.download(recv, std::span<T>(got)).get(); !r) return "download: " + r.error_value().describe();
    const std::size_t k = c.count;
    const std::uint32_t s = c.salt;
    std::function<std::optional<double>(std::size_t)> want;
    switch (c.kind) {
      case coll_kind::all_reduce: want = [&](std::size_t i) { return reduced<T>(c.op, n, i, s); }; break;
      case coll_kind::broadcast: want = [&](std::size_t i) { return input(c.op, c.root, i, s); }; break;
      case coll_kind::reduce:
        want = [&](std::size_t i) -> std::optional<double> {
          if (me != c.root) return std::nullopt;  // only the root's result is defined
          return reduced<T>(c.op, n, i, s);
        };
        break;
      case coll_kind::all_gather:
        want = [&](std::size_t i) { return input(c.op, static_cast<int>(i / k), i % k, s); };
        break;
      case coll_kind::reduce_scatter:
        want = [&](std::size_t i) { return reduced<T>(c.op, n, static_cast<std::size_t>(me) * k + i, s); };
        break;
      case coll_kind::all_to_all:
        want = [&](std::size_t i) {
          return input(c.op, static_cast<int>(i / k), static_cast<std::size_t>(me) * k + i % k, s);
        };
        break;
      default: return {};
    }
    // A reduction's values are compared as its op rounds; the others' exactly.
    const bool reduction =
        c.kind == coll_kind::all_reduce || c.kind == coll_kind::reduce || c.kind == coll_kind::reduce_scatter;
    if (auto w = first_wrong<T>(got, want, reduction ? c.op : reduce_op::sum); !w.empty()) return "result: " + w;
    if (!c.in_place && !(rooted && c.kind == coll_kind::broadcast && me != c.root)) {
      std::vector<T> left(send.size());
      if (auto r = dev.download(send, std::span<T>(left)).get(); !r) return "download: " + r.error_value().describe();
      for (std::size_t i = 0; i < left.size(); ++i) {
        if (!(left[i] == send_values[i])) return "the send buffer changed at element " + std::to_string(i);
      }
    }
    return {};
  };
  ATOMR_TRY(out.reset());
  return out;
}

result<live_case> build_case(context& ctx, const coll_case& c) {
  return with_dtype(c.type, [&]<typename T>() { return build<T>(ctx, c); });
}

// Waits for `f` and checks the case: a failure names the form and the case.
void settle(context& ctx, std::string_view form, local::future<void>& f, live_case& lc) {
  auto r = f.get();
  if (!r) return ctx.failed_call(std::string(form) + " " + describe(lc.c), r.error_value());
  if (auto w = lc.check(); !w.empty()) ctx.fail(std::string(form) + " " + describe(lc.c) + ": " + w);
}

// Runs `submit` on this thread or, as the rank's jitter decides, on another one (one thread at a
// time submits to the world: the caller waits for that thread before it goes on).
template <typename F>
void on_some_thread(context& ctx, F&& submit) {
  if (ctx.jitter() % 4 != 0) return submit();
  std::thread t(std::forward<F>(submit));
  t.join();
}

void single(context& ctx, std::mt19937_64& g) {
  const coll_case c = random_case(g, ctx.world->size(), false, k_most_bytes);
  const int form = static_cast<int>(g() % 4);  // 0, 1: typed calls; 2: submit(spec); 3: collective<T>
  if (c.kind == coll_kind::send) {
    // Pairs (0, 1), (2, 3), ...: the lower rank sends first, the higher receives first; an odd
    // last rank sits this one out.
    const int me = ctx.world->rank();
    const int peer = me ^ 1;
    if (peer >= ctx.world->size()) return;
    with_dtype(c.type, [&]<typename T>() {
      if (c.count == 0) {
        // Point to point moves something or is refused (a collective of 0 elements is not).
        auto none = ctx.dev->allocate<T>(0).get();
        if (!none) return ctx.failed_call("allocate", none.error_value());
        ctx.expect_error(ctx.world->send(*none, peer).get(), errc::invalid_argument, "send of 0 elements",
                         "a send of 0 elements");
        ctx.expect_error(ctx.world->recv(*none, peer).get(), errc::invalid_argument, "recv of 0 elements",
                         "a recv of 0 elements");
        return;
      }
      auto out = ctx.dev->allocate<T>(c.count).get();
      auto in = ctx.dev->allocate<T>(c.count).get();
      if (!out || !in) return ctx.failed_call("allocate", !out ? out.error_value() : in.error_value());
      const auto mine = inputs_of<T>(c, me, c.count);
      if (auto u = ctx.dev->upload(*out, std::span<const T>(mine)).get(); !u)
        return ctx.failed_call("upload", u.error_value());
      std::vector<local::future<void>> fs;
      auto snd = [&] { fs.push_back(ctx.world->send(*out, peer, form == 1 ? c.count : 0)); };
      auto rcv = [&] { fs.push_back(ctx.world->recv(*in, peer, form == 1 ? c.count : 0)); };
      on_some_thread(ctx, [&] {
        if (me < peer) {
          snd();
          rcv();
        } else {
          rcv();
          snd();
        }
      });
      for (auto& f : fs) {
        if (auto r = f.get(); !r) return ctx.failed_call("send/recv " + describe(c), r.error_value());
      }
      std::vector<T> got(c.count);
      if (auto d = ctx.dev->download(*in, std::span<T>(got)).get(); !d)
        return ctx.failed_call("download", d.error_value());
      if (auto w = first_wrong<T>(
              got, [&](std::size_t i) -> std::optional<double> { return input(c.op, peer, i, c.salt); },
              reduce_op::sum);
          !w.empty()) {
        ctx.fail("recv from rank " + std::to_string(peer) + " " + describe(c) + ": " + w);
      }
    });
    return;
  }
  auto lc = build_case(ctx, c);
  if (!lc) return ctx.failed_call("buffers of " + describe(c), lc.error_value());
  if (c.count == 0 && c.kind != coll_kind::barrier) {
    auto r = form == 2 ? ctx.world->submit(lc->spec()).get() : lc->typed(form == 3 ? 2 : form).get();
    return ctx.expect_error(r, errc::invalid_argument, "of 0 elements", describe(c));
  }
  std::optional<local::future<void>> f;
  on_some_thread(ctx, [&] { f = form == 2 ? ctx.world->submit(lc->spec()) : lc->typed(form == 3 ? 2 : form); });
  settle(ctx, form == 2 ? "submit" : "typed call", *f, *lc);
}

std::vector<live_case> group_cases(context& ctx, std::mt19937_64& g, std::size_t k) {
  std::vector<live_case> cases;
  for (std::size_t i = 0; i < k; ++i) {
    auto lc = build_case(ctx, random_case(g, ctx.world->size(), true, 1u << 20));
    if (!lc) {
      ctx.failed_call("a group's buffers", lc.error_value());
      return {};
    }
    cases.push_back(std::move(*lc));
  }
  return cases;
}

void group(context& ctx, std::mt19937_64& g, bool each) {
  const std::size_t k = 1 + g() % 8;
  auto cases = group_cases(ctx, g, k);
  if (cases.size() != k) return;
  std::vector<coll_spec> specs;
  for (auto& lc : cases) specs.push_back(lc.spec());
  if (!each) {
    std::optional<local::future<void>> f;
    on_some_thread(ctx, [&] { f = ctx.world->submit_group(std::move(specs)); });
    auto r = f->get();
    if (!r) return ctx.failed_call("submit_group of " + std::to_string(k), r.error_value());
    for (auto& lc : cases) {
      if (auto w = lc.check(); !w.empty()) ctx.fail("submit_group: " + describe(lc.c) + ": " + w);
    }
    return;
  }
  std::vector<local::future<void>> fs;
  on_some_thread(ctx, [&] { fs = ctx.world->submit_group(std::move(specs), cluster::each_request); });
  for (std::size_t i = 0; i < k; ++i) settle(ctx, "submit_group(each_request)", fs[i], cases[i]);
}

void prepared(context& ctx, std::mt19937_64& g) {
  const std::size_t k = 1 + g() % 6;
  const int reps = 1 + static_cast<int>(g() % 3);
  auto cases = group_cases(ctx, g, k);
  if (cases.size() != k) return;
  std::vector<coll_spec> specs;
  for (auto& lc : cases) specs.push_back(lc.spec());
  auto call = ctx.world->prepare_group(std::move(specs));
  if (!call) return ctx.failed_call("prepare_group", call.error_value());
  for (int rep = 0; rep < reps; ++rep) {
    if (rep > 0) {
      for (auto& lc : cases) {
        if (auto r = lc.reset(); !r) return ctx.failed_call("upload", r.error_value());
      }
    }
    auto r = ctx.world->submit_prepared(*call).get();
    if (!r) return ctx.failed_call("submit_prepared #" + std::to_string(rep + 1), r.error_value());
    for (auto& lc : cases) {
      if (auto w = lc.check(); !w.empty())
        ctx.fail("submit_prepared #" + std::to_string(rep + 1) + ": " + describe(lc.c) + ": " + w);
    }
  }
}

// More than 128 small in-place all_reduces of one type and reduction: bulk calls, and from the
// second repeat on, kept calls (the group cache) or the buffers form's lookup.
void bulk(context& ctx, std::mt19937_64& g) {
  const std::size_t m = 129 + g() % 200;
  const int reps = 1 + static_cast<int>(g() % 3);
  const bool by_buffers = g() % 2 == 0;
  coll_case c;
  c.kind = coll_kind::all_reduce;
  c.type = static_cast<local::dtype>(g() % 10);
  c.op = static_cast<reduce_op>(g() % 5);
  c.in_place = true;
  c.salt = static_cast<std::uint32_t>(g() % 3);
  std::vector<std::size_t> counts(m);
  for (auto& k : counts) k = 1 + g() % std::max<std::size_t>(1, 2048 / elem_size(c.type));
  with_dtype(c.type, [&]<typename T>() {
    std::vector<local::gpu_ref<T>> bufs;
    std::vector<std::vector<T>> ins;
    for (const std::size_t k : counts) {
      auto b = ctx.dev->allocate<T>(k).get();
      if (!b) return ctx.failed_call("allocate", b.error_value());
      bufs.push_back(*b);
      ins.push_back(inputs_of<T>(c, ctx.world->rank(), k));
    }
    for (int rep = 0; rep < reps; ++rep) {
      for (std::size_t i = 0; i < m; ++i) {
        if (auto u = ctx.dev->upload(bufs[i], std::span<const T>(ins[i])).get(); !u) {
          return ctx.failed_call("upload", u.error_value());
        }
      }
      local::future<void> f;
      if (by_buffers) {
        f = ctx.world->submit_group(std::span<const local::gpu_ref<T>>(bufs), c.op);
      } else {
        std::vector<coll_spec> specs;
        for (const auto& b : bufs) specs.push_back(cluster::all_reduce_spec(b, c.op));
        f = ctx.world->submit_group(std::move(specs));
      }
      const std::string what = "bulk of " + std::to_string(m) + " " + describe(c) + " #" + std::to_string(rep + 1);
      if (auto r = f.get(); !r) return ctx.failed_call(what, r.error_value());
      for (std::size_t i = 0; i < m; ++i) {
        std::vector<T> got(counts[i]);
        if (auto d = ctx.dev->download(bufs[i], std::span<T>(got)).get(); !d)
          return ctx.failed_call("download", d.error_value());
        auto w = first_wrong<T>(
            got, [&](std::size_t j) -> std::optional<double> { return reduced<T>(c.op, ctx.world->size(), j, c.salt); },
            c.op);
        if (!w.empty()) return ctx.fail(what + ": all_reduce " + std::to_string(i) + ": " + w);
      }
    }
  });
}

// A sub-world by color and key: its size, this rank's place in it (by key, then old rank), and
// an all_reduce and an all_gather on it.
void split(context& ctx, std::mt19937_64& g) {
  const int n = ctx.world->size();
  std::vector<int> color(static_cast<std::size_t>(n));
  std::vector<int> key(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    color[static_cast<std::size_t>(r)] = static_cast<int>(g() % 3);
    key[static_cast<std::size_t>(r)] = static_cast<int>(g() % 4);
  }
  const int me = ctx.world->rank();
  std::vector<int> members;
  for (int r = 0; r < n; ++r) {
    if (color[static_cast<std::size_t>(r)] == color[static_cast<std::size_t>(me)]) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return key[static_cast<std::size_t>(a)] < key[static_cast<std::size_t>(b)]; });
  const std::size_t count = 1 + g() % 5000;
  auto sub = ctx.world->split(color[static_cast<std::size_t>(me)], key[static_cast<std::size_t>(me)]);
  if (!sub) return ctx.failed_call("split", sub.error_value());
  auto& w = **sub;
  const std::string what = "split(" + std::to_string(color[static_cast<std::size_t>(me)]) + ", " +
                           std::to_string(key[static_cast<std::size_t>(me)]) + ")";
  const auto place = std::find(members.begin(), members.end(), me) - members.begin();
  if (w.size() != static_cast<int>(members.size()) || w.rank() != place) {
    return ctx.fail(what + ": rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size()) +
                    ", the model says " + std::to_string(place) + " of " + std::to_string(members.size()));
  }
  auto b = ctx.dev->allocate<std::int64_t>(count).get();
  auto mine = ctx.dev->allocate<std::int32_t>(1).get();
  auto all = ctx.dev->allocate<std::int32_t>(members.size()).get();
  if (!b || !mine || !all) return ctx.failed_call("allocate", error(errc::out_of_memory, "split's buffers"));
  const std::vector<std::int64_t> in(count, me + 1);
  const std::vector<std::int32_t> id{me};
  if (!ctx.dev->upload(*b, std::span<const std::int64_t>(in)).get() ||
      !ctx.dev->upload(*mine, std::span<const std::int32_t>(id)).get()) {
    return ctx.fail(what + ": upload failed");
  }
  if (auto r = w.all_reduce(*b).get(); !r) return ctx.failed_call(what + " all_reduce", r.error_value());
  if (auto r = w.all_gather(*mine, *all).get(); !r) return ctx.failed_call(what + " all_gather", r.error_value());
  std::vector<std::int64_t> sum(count);
  std::vector<std::int32_t> order(members.size());
  (void)ctx.dev->download(*b, std::span<std::int64_t>(sum)).get();
  (void)ctx.dev->download(*all, std::span<std::int32_t>(order)).get();
  std::int64_t want = 0;
  for (const int r : members) want += r + 1;
  for (std::size_t i = 0; i < count; ++i) {
    if (sum[i] != want) {
      return ctx.fail(what + " all_reduce: element " + std::to_string(i) + " is " + std::to_string(sum[i]) +
                      ", the model says " + std::to_string(want));
    }
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (order[i] != members[i]) {
      return ctx.fail(what + " all_gather: member " + std::to_string(i) + " is old rank " + std::to_string(order[i]) +
                      ", the model says " + std::to_string(members[i]));
    }
  }
}

// A call that must be refused at once with its documented error, submitting nothing (the next
// steps would hang or see wrong values if it had run on some ranks).
void invalid(context& ctx, std::mt19937_64& g) {
  const int n = ctx.world->size();
  const std::size_t count = 1 + g() % 1000;
  auto a = ctx.dev->allocate<float>(count).get();
  auto big = ctx.dev->allocate<float>(count * static_cast<std::size_t>(n)).get();
  if (!a || !big) return ctx.failed_call("allocate", error(errc::out_of_memory, "invalid step's buffers"));
  auto& w = *ctx.world;
  switch (g() % 7) {
    case 0:
      ctx.expect_error(w.broadcast(*a, n).get(), errc::invalid_argument, "",
                       "broadcast from root " + std::to_string(n));
      break;
    case 1: {
      auto small = ctx.dev->allocate<float>(count * static_cast<std::size_t>(n) - 1).get().value();
      ctx.expect_error(w.all_gather(*a, small).get(), errc::invalid_argument, "", "all_gather into a short buffer");
      break;
    }
    case 2:
      ctx.expect_error(w.all_reduce(local::gpu_ref<float>{}).get(), errc::invalid_argument, "",
                       "all_reduce of an empty gpu_ref");
      break;
    case 3: {
      // A group with one bad request: refused whole, naming it; the good requests did not run.
      const std::size_t k = 2 + g() % 4;
      const std::size_t bad = g() % k;
      std::vector<local::gpu_ref<float>> bufs;
      std::vector<coll_spec> specs;
      const std::vector<float> ones(count, 1.0f);
      for (std::size_t i = 0; i < k; ++i) {
        bufs.push_back(ctx.dev->allocate<float>(count).get().value());
        (void)ctx.dev->upload(bufs.back(), std::span<const float>(ones)).get();
        specs.push_back(
            i == bad ? cluster::spec_of<float>(coll_kind::broadcast, bufs.back(), bufs.back(), {reduce_op::sum, n, 0})
                     : cluster::all_reduce_spec(bufs.back()));
      }
      const std::string words = "request " + std::to_string(bad + 1) + " of " + std::to_string(k);
      if (g() % 2 == 0) {
        ctx.expect_error(w.submit_group(std::move(specs)).get(), errc::invalid_argument, words,
                         "a group with a bad request");
      } else {
        auto call = w.prepare_group(std::move(specs));
        ctx.expect_error(call, errc::invalid_argument, words, "prepare_group with a bad request");
      }
      for (std::size_t i = 0; i < k; ++i) {
        std::vector<float> got(count);
        (void)ctx.dev->download(bufs[i], std::span<float>(got)).get();
        if (got != ones) return ctx.fail("a refused group ran its request " + std::to_string(i + 1));
      }
      break;
    }
    case 4:
      ctx.expect_error(w.shrink(), errc::invalid_argument, "shrink: no rank of this job has failed",
                       "shrink with no failed rank");
      break;
    case 5:
      ctx.expect_error(w.send(*a, n).get(), errc::invalid_argument, "", "send to member " + std::to_string(n));
      break;
    default:
      if (n > 1) {
        ctx.expect_error(w.reduce_scatter(*a, *a, reduce_op::sum, count).get(), errc::invalid_argument, "",
                         "reduce_scatter of a short send buffer");
      }
      break;
  }
}

}  // namespace

void run_collective_step(context& ctx, const step& s) {
  std::mt19937_64 g(s.seed);
  switch (s.kind) {
    case step_kind::single: return single(ctx, g);
    case step_kind::group: return group(ctx, g, false);
    case step_kind::group_each: return group(ctx, g, true);
    case step_kind::prepared: return prepared(ctx, g);
    case step_kind::bulk: return bulk(ctx, g);
    case step_kind::split: return split(ctx, g);
    case step_kind::invalid: return invalid(ctx, g);
    default: return;
  }
}

}  // namespace atomr::stress
