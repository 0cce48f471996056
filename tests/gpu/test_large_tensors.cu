// Tensors past the 32-bit index range: more than 2^31 elements in a ragged tensor with int32 offsets, a row of
// more than 2^31 tokens with int64 offsets, padded tensors and masks of more than 2^32 elements, packed sequences
// of more than 2^31 bytes, attention's Q, K, V and O of more than 2^31 elements each, and LSTM / GRU layers whose
// input or input projections pass 2^31 elements. The kernels index in 64 bits and switch their 32-bit shortcuts
// off past these sizes (fast_divmod.h's divider, the scalar row pass at D = 1, the 32-bit arg index of max / min);
// the other tests reach those paths only forced, or at sizes that fit 32 bits. The segment ops, conversions, masks
// and packing are checked against the CPU reference, as in the other tests, attention by its bitwise batch
// invariance, the recurrent layers by the reference on three of their sequences; the host side runs on all the
// machine's cores, since single-threaded the references over ~2^31 elements would take minutes.
//
// Full size takes up to 19 GB of device memory at once and 18 GB of host memory (attention). RAGGED_TEST_SCALE
// shrinks every shape: the emulated run in tests/emu/run.sh runs this program at 1/1024, which checks the test's
// own logic, not the indices; those need scale 1, where each case REQUIREs the sizes it is about.
// compute-sanitizer does not run it (scripts/gpu-check.sh): instrumented, several passes over 4-5 GB would take far
// longer than its limit, and its kernels are sanitized at ordinary sizes in the other programs.
#include <catch2/catch.hpp>
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/host_attention.h"
#include "common/test_util.h"
#include "common/tolerance.h"
#include "ragged/attention.h"
#include "ragged/buffer.h"
#include "ragged/convert.h"
#include "ragged/packing.h"
#include "ragged/reference.h"
#include "ragged/reference_rnn.h"
#include "ragged/rnn.h"
#include "ragged/segment_reduce.h"

using namespace ragged;
using test::run_two_phase;

namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kUint32Max = std::numeric_limits<std::uint32_t>::max();

bool full_size() { return test::test_scale() == 1.0; }

// fn(begin, end) on each of up to hardware_concurrency() slices of [0, count), one thread each. fn must not use
// Catch2's assertions (it is not thread-safe): it records what it finds for the calling thread to check.
template <typename Fn>
void parallel_for(std::int64_t count, Fn&& fn) {
  const std::int64_t threads = std::max<std::int64_t>(
      1, std::min<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()), count / 65536 + 1));
  std::vector<std::thread> pool;
  for (std::int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&fn, count, threads, t] { fn(count * t / threads, count * (t + 1) / threads); });
  for (std::thread& thread : pool) thread.join();
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// test::random_values' distribution (floats uniform in [-2, -0.05] U [0.05, 2], bytes in [1, 255]), drawn from a
// hash of (seed, index) so that the threads fill their slices independently.
template <typename T>
std::vector<T> hashed_values(std::int64_t count, std::uint64_t seed) {
  std::vector<T> out(static_cast<std::size_t>(count));
  parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::uint64_t bits = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(i)));
      if constexpr (std::is_same<T, std::uint8_t>::value) {
        out[i] = static_cast<std::uint8_t>(1 + bits % 255);
      } else {
        const double magnitude = 0.05 + 1.95 * static_cast<double>(bits >> 11) * 0x1.0p-53;
        out[i] = test::from_double<T>((bits & 1) != 0 ? magnitude : -magnitude);
      }
    }
  });
  return out;
}

std::uint64_t fresh_seed(std::uint64_t salt) { return test::make_rng(salt)(); }

// Free device memory, checked before a case allocates: a GPU with too little fails here with the amount named,
// rather than at some cudaMalloc deep inside the case.
void require_device_memory(std::size_t bytes) {
  std::size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  INFO("this case needs " << bytes / (1 << 20) << " MiB of device memory; " << free_bytes / (1 << 20)
                          << " MiB are free (run the other tests with ~[large] on a smaller GPU)");
  REQUIRE(free_bytes >= bytes);
}

template <typename T>
std::vector<T> device_to_host(const T* device, std::int64_t count) {
  std::vector<T> host(static_cast<std::size_t>(count));
  if (count > 0)
    REQUIRE(cudaMemcpy(host.data(), device, static_cast<std::size_t>(count) * sizeof(T), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
  return host;
}

// The first index in [0, count) where check(k) is false, or -1; the slices run in parallel.
template <typename Check>
std::int64_t first_failure(std::int64_t count, Check&& check) {
  std::vector<std::int64_t> found;
  std::mutex mutex;
  parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t k = begin; k < end; ++k)
      if (!check(k)) {
        std::lock_guard<std::mutex> lock(mutex);
        found.push_back(k);
        return;
      }
  });
  return found.empty() ? -1 : *std::min_element(found.begin(), found.end());
}

// The sum of term(i) over [0, count) in double: each slice's sum, then the slices' in index order.
template <typename Term>
double parallel_sum(std::int64_t count, Term&& term) {
  std::vector<std::pair<std::int64_t, double>> parts;
  std::mutex mutex;
  parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
    double sum = 0.0;
    for (std::int64_t i = begin; i < end; ++i) sum += term(i);
    std::lock_guard<std::mutex> lock(mutex);
    parts.emplace_back(begin, sum);
  });
  std::sort(parts.begin(), parts.end());
  double total = 0.0;
  for (const auto& part : parts) total += part.second;
  return total;
}

// The segment tests' per-element rule (tolerance.h, rule (1)): |got - ref| <= bound + ulp_T(ref). Rule (2), the
// comparison with a naive computation in T, is left out: over rows this long the naive bfloat16 sum stagnates,
// which would only loosen the bound.
template <typename T>
bool within_rule(T got, T ref, double bound) {
  if (test::is_poison(got)) return false;
  const double r = test::to_double(ref);
  return test::within(test::to_double(got), r, bound + test::ulp_of<T>(r));
}

// "<what> <at>: got <got>, expected <expected>", or "no mismatch" for at = -1 (first_failure's answer).
template <typename T>
std::string mismatch(const char* what, std::int64_t at, const T* got, double expected) {
  if (at < 0) return "no mismatch";
  return std::string(what) + " " + std::to_string(at) + ": got " + std::to_string(test::to_double(got[at])) +
         ", expected " + std::to_string(expected);
}

}  // namespace

TEST_CASE("segment ops on more than 2^31 elements with int32 offsets", "[segment][gpu][large]") {
  using T = bfloat16;
  using OffsetT = std::int32_t;
  const std::int64_t inner = 1024;
  // 2^21 + 4096 rows of 1024 columns: 2^31 + 2^22 elements at full size, in rows of 0 to 2000 tokens (every 97th
  // empty) and one of 65536 (a row of many chunks whose partials merge in trees), at random positions.
  const std::int64_t rows = test::scaled((std::int64_t{1} << 21) + 4096, 4096);
  std::mt19937_64 rng = test::make_rng(0x1a7e);
  std::vector<std::int64_t> lengths;
  const std::int64_t long_row = std::min<std::int64_t>(test::scaled(65536, 4096), rows / 4);
  std::int64_t nnz = 0;
  const std::int64_t long_at = std::uniform_int_distribution<std::int64_t>(0, 100)(rng);
  for (std::int64_t b = 0; nnz < rows; ++b) {
    std::int64_t length = b == long_at ? long_row : std::uniform_int_distribution<std::int64_t>(0, 2000)(rng);
    if (b % 97 == 0 && b != long_at) length = 0;
    length = std::min(length, rows - nnz);
    lengths.push_back(length);
    nnz += length;
  }
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size()), elems = nnz * inner;
  if (full_size()) REQUIRE(elems > kInt32Max);
  INFO("batch " << batch << ", " << nnz << " rows of " << inner << ": " << elems << " elements");
  require_device_memory(static_cast<std::size_t>(2 * elems * sizeof(T)) + (std::size_t{1} << 30));

  const std::vector<OffsetT> offsets = test::offsets_from_lengths<OffsetT>(lengths);
  const std::vector<T> values = hashed_values<T>(elems, fresh_seed(1));
  const DeviceBuffer<OffsetT> d_offsets(offsets);
  const DeviceBuffer<T> d_values(values);
  const RaggedView<const T, OffsetT> dev{d_values.data(), d_offsets.data(), batch, nnz, inner};
  // The reference over a slice of the batch (the offsets are absolute, so a slice is a view of its own).
  const auto slice = [&](std::int64_t b0, std::int64_t b1) {
    return RaggedView<const T, OffsetT>{values.data(), offsets.data() + b0, b1 - b0, nnz, inner};
  };
  // Sequence b as a batch of its own, from row 0 (local_offsets[b] = {0, length}): the references whose outputs
  // are the values' size then write a buffer of that sequence only, so that the host holds no second copy of the
  // whole output (the emulator runs this program whole in 23 GB).
  std::vector<std::array<OffsetT, 2>> local_offsets(lengths.size());
  for (std::size_t b = 0; b < lengths.size(); ++b) local_offsets[b] = {0, static_cast<OffsetT>(lengths[b])};
  const auto alone = [&](std::int64_t b) {
    return RaggedView<const T, OffsetT>{values.data() + offsets[b] * inner, local_offsets[b].data(), 1, lengths[b],
                                        inner};
  };
  const std::int64_t outputs = batch * inner;

  SECTION("sum, max and min with their args, and the sum's backward") {
    // sum |x| per output: the scale of float accumulation error.
    std::vector<double> abs_sum(static_cast<std::size_t>(outputs), 0.0);
    parallel_for(batch, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b)
        for (std::int64_t row = offsets[b]; row < offsets[b + 1]; ++row)
          for (std::int64_t d = 0; d < inner; ++d)
            abs_sum[b * inner + d] += std::abs(test::to_double(values[row * inner + d]));
    });
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      INFO("op " << reduce_op_name(op));
      const bool extreme = op != ReduceOp::kSum;
      std::vector<T> ref(static_cast<std::size_t>(outputs));
      std::vector<std::int64_t> ref_arg(static_cast<std::size_t>(outputs), -2);
      parallel_for(batch, [&](std::int64_t b0, std::int64_t b1) {
        reference::segment_reduce(slice(b0, b1), op, ref.data() + b0 * inner,
                                  extreme ? ref_arg.data() + b0 * inner : nullptr, -7.0f);
      });
      DeviceBuffer<T> d_out(static_cast<std::size_t>(outputs));
      DeviceBuffer<std::int64_t> d_arg(extreme ? static_cast<std::size_t>(outputs) : 0);
      test::poison(d_out);
      if (extreme) test::poison(d_arg);
      REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
        return segment_reduce(workspace, bytes, dev, op, d_out.data(), extreme ? d_arg.data() : nullptr, -7.0f,
                              nullptr);
      }));
      const std::vector<T> got = d_out.to_host();
      if (extreme) {
        const std::vector<std::int64_t> arg = d_arg.to_host();
        const std::int64_t bad = first_failure(outputs, [&](std::int64_t k) {
          return !test::is_poison(got[k]) && test::same_value(got[k], ref[k]) && arg[k] == ref_arg[k];
        });
        INFO("first mismatch at output " << bad);
        REQUIRE(bad == -1);
      } else {
        const std::int64_t bad =
            first_failure(outputs, [&](std::int64_t k) { return within_rule(got[k], ref[k], 1e-5 * abs_sum[k]); });
        INFO(mismatch("output", bad, got.data(), bad < 0 ? 0.0 : test::to_double(ref[bad])));
        REQUIRE(bad == -1);
      }
    }

    // Backward of the sum: every row of a sequence gets its gradient, a copy, so the comparison is exact.
    const std::vector<T> grad_out = hashed_values<T>(outputs, fresh_seed(2));
    const DeviceBuffer<T> d_grad_out(grad_out);
    DeviceBuffer<T> d_grad_in(static_cast<std::size_t>(elems));
    test::poison(d_grad_in);
    RaggedView<const T, OffsetT> shape = dev;
    shape.values = nullptr;
    REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
      return segment_reduce_backward(workspace, bytes, shape, ReduceOp::kSum, d_grad_out.data(), nullptr,
                                     d_grad_in.data(), nullptr);
    }));
    const std::vector<T> grad_got = d_grad_in.to_host();
    const std::int64_t bad = first_failure(batch, [&](std::int64_t b) {
      std::vector<T> ref(static_cast<std::size_t>(lengths[b] * inner));
      reference::segment_reduce_backward(alone(b), ReduceOp::kSum, grad_out.data() + b * inner, nullptr, ref.data());
      return ref.empty() || std::memcmp(ref.data(), grad_got.data() + offsets[b] * inner, ref.size() * sizeof(T)) == 0;
    });
    INFO("backward: first sequence that differs " << bad);
    REQUIRE(bad == -1);
  }

  SECTION("softmax") {
    DeviceBuffer<T> d_out(static_cast<std::size_t>(elems));
    test::poison(d_out);
    REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
      return segment_softmax(workspace, bytes, dev, false, d_out.data(), nullptr);
    }));
    const std::vector<T> got = d_out.to_host();
    // Sequence b's first element outside the rule, or -1.
    const auto first_wrong = [&](std::int64_t b) {
      std::vector<T> ref(static_cast<std::size_t>(lengths[b] * inner));
      reference::segment_softmax(alone(b), false, ref.data());
      const T* y = got.data() + offsets[b] * inner;
      for (std::size_t k = 0; k < ref.size(); ++k)
        if (!within_rule(y[k], ref[k], 1e-5 * test::to_double(ref[k]))) return static_cast<std::int64_t>(k);
      return std::int64_t{-1};
    };
    const std::int64_t bad = first_failure(batch, [&](std::int64_t b) { return first_wrong(b) < 0; });
    INFO("first sequence that differs " << bad << (bad < 0 ? std::string() : ", at its element " +
                                                                             std::to_string(first_wrong(bad))));
    REQUIRE(bad == -1);
  }
}

TEST_CASE("segment ops on a row of more than 2^31 tokens with int64 offsets", "[segment][gpu][large]") {
  using T = bfloat16;
  using OffsetT = std::int64_t;
  // Rows of 3, 2^31 + 2^20, 0 and 5 tokens at D = 1. The long row's extremes are planted past index 2^31: its
  // maximum once, its minimum twice (the arg is the first), so that the args need 64 bits.
  const std::int64_t huge = test::scaled((std::int64_t{1} << 31) + (std::int64_t{1} << 20), 20000);
  const std::vector<std::int64_t> lengths = {3, huge, 0, 5};
  const std::int64_t batch = 4, nnz = 3 + huge + 5;
  if (full_size()) REQUIRE(huge > kInt32Max);
  require_device_memory(static_cast<std::size_t>(2 * nnz * sizeof(T)) + (std::size_t{1} << 30));

  const std::vector<OffsetT> offsets = test::offsets_from_lengths<OffsetT>(lengths);
  std::vector<T> values = hashed_values<T>(nnz, fresh_seed(3));
  const std::int64_t max_at = huge - 777, min_at = huge - 5000, min_again = huge - 10;
  if (full_size()) REQUIRE(std::min(max_at, min_at) > kInt32Max);
  values[3 + max_at] = test::from_double<T>(3.0);
  values[3 + min_at] = test::from_double<T>(-3.0);
  values[3 + min_again] = test::from_double<T>(-3.0);
  const DeviceBuffer<OffsetT> d_offsets(offsets);
  const DeviceBuffer<T> d_values(values);
  const RaggedView<const T, OffsetT> host{values.data(), offsets.data(), batch, nnz, 1};
  const RaggedView<const T, OffsetT> dev{d_values.data(), d_offsets.data(), batch, nnz, 1};

  SECTION("sum, max and min with their args") {
    std::vector<double> abs_sum(batch);
    for (std::int64_t b = 0; b < batch; ++b)
      abs_sum[b] = parallel_sum(offsets[b + 1] - offsets[b],
                                [&](std::int64_t i) { return std::abs(test::to_double(values[offsets[b] + i])); });
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      INFO("op " << reduce_op_name(op));
      const bool extreme = op != ReduceOp::kSum;
      std::vector<T> ref(batch);
      std::vector<std::int64_t> ref_arg(batch, -2);
      reference::segment_reduce(host, op, ref.data(), extreme ? ref_arg.data() : nullptr, 0.0f);
      if (op == ReduceOp::kMax) REQUIRE(ref_arg[1] == max_at);
      if (op == ReduceOp::kMin) REQUIRE(ref_arg[1] == min_at);
      DeviceBuffer<T> d_out(batch);
      DeviceBuffer<std::int64_t> d_arg(extreme ? batch : 0);
      test::poison(d_out);
      if (extreme) test::poison(d_arg);
      REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
        return segment_reduce(workspace, bytes, dev, op, d_out.data(), extreme ? d_arg.data() : nullptr, 0.0f,
                              nullptr);
      }));
      const std::vector<T> got = d_out.to_host();
      for (std::int64_t b = 0; b < batch; ++b) {
        INFO("sequence " << b << ": got " << test::to_double(got[b]) << ", reference " << test::to_double(ref[b]));
        if (extreme) {
          REQUIRE(test::same_value(got[b], ref[b]));
          REQUIRE_FALSE(test::is_poison(got[b]));
        } else {
          REQUIRE(within_rule(got[b], ref[b], 1e-5 * abs_sum[b]));
        }
      }
      if (extreme) REQUIRE(d_arg.to_host() == ref_arg);
    }
  }

  SECTION("softmax") {
    DeviceBuffer<T> d_out(static_cast<std::size_t>(nnz));
    test::poison(d_out);
    REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
      return segment_softmax(workspace, bytes, dev, false, d_out.data(), nullptr);
    }));
    const std::vector<T> got = d_out.to_host();
    // The short rows against the reference itself, each as a batch of its own.
    for (std::int64_t b : {0, 2, 3}) {
      const OffsetT local[2] = {0, static_cast<OffsetT>(lengths[b])};
      std::vector<T> ref(static_cast<std::size_t>(lengths[b]));
      reference::segment_softmax(RaggedView<const T, OffsetT>{values.data() + offsets[b], local, 1, lengths[b], 1},
                                 false, ref.data());
      for (std::int64_t k = 0; k < lengths[b]; ++k) {
        INFO("sequence " << b << ", token " << k);
        REQUIRE(within_rule(got[offsets[b] + k], ref[k], 1e-5 * test::to_double(ref[k])));
      }
    }
    // The long row by the reference's formula (reference_segment.h: y = exp(x - m) / sum(exp(x - m)), m the
    // maximum, in double), its two reductions split across threads: the reference itself would take a minute.
    const T* x = values.data() + offsets[1];
    std::vector<double> slice_max;
    std::mutex mutex;
    parallel_for(huge, [&](std::int64_t i0, std::int64_t i1) {
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t i = i0; i < i1; ++i) m = std::max(m, test::to_double(x[i]));
      std::lock_guard<std::mutex> lock(mutex);
      slice_max.push_back(m);
    });
    const double m = *std::max_element(slice_max.begin(), slice_max.end());
    REQUIRE(m == 3.0);
    const double s = parallel_sum(huge, [&](std::int64_t i) { return std::exp(test::to_double(x[i]) - m); });
    const T* y = got.data() + offsets[1];
    const std::int64_t bad = first_failure(huge, [&](std::int64_t i) {
      const double r = std::exp(test::to_double(x[i]) - m) / s;
      return within_rule(y[i], test::round_to<T>(r), 1e-5 * r);
    });
    INFO(mismatch("long row, token", bad, y, bad < 0 ? 0.0 : std::exp(test::to_double(x[bad]) - m) / s));
    REQUIRE(bad == -1);
  }
}

TEST_CASE("ragged <-> padded and masks of more than 2^32 elements", "[convert][gpu][large]") {
  using T = std::uint8_t;
  using OffsetT = std::int64_t;
  // Five sequences padded to max_len = 2^30 + 3 at D = 1: 5 x max_len > 2^32 padded bytes (each a vector of its
  // own, the row being one byte), so the divider of a padded index is the 64-bit one. One sequence is longer than
  // max_len (truncated), one empty, one of max_len - 1.
  const std::int64_t max_len = test::scaled(std::int64_t{1} << 30, 4096) + 3;
  const std::vector<std::int64_t> lengths = {max_len + 1000, 0, max_len / 2, 7, max_len - 1};
  const std::int64_t batch = 5;
  const std::vector<OffsetT> offsets = test::offsets_from_lengths<OffsetT>(lengths);
  const std::int64_t nnz = offsets.back(), padded = batch * max_len;
  if (full_size()) REQUIRE(padded > kUint32Max);
  require_device_memory(static_cast<std::size_t>(2 * nnz + padded) + (std::size_t{1} << 30));

  const std::vector<T> values = hashed_values<T>(nnz, fresh_seed(4));
  const DeviceBuffer<OffsetT> d_offsets(offsets);
  const DeviceBuffer<T> d_values(values);
  const RaggedView<const T, OffsetT> dev{d_values.data(), d_offsets.data(), batch, nnz, 1};
  // Each sequence is checked on its own against the reference of that sequence alone, from its part of the device
  // output: the host never holds the whole 5 GB padded tensor or mask twice.
  const auto alone = [&](std::int64_t b, const OffsetT* local) {
    return RaggedView<const T, OffsetT>{values.data() + offsets[b], local, 1, lengths[b], 1};
  };

  SECTION("ragged -> padded -> ragged") {
    struct Placement {
      Align align;
      Truncate trunc;
    };
    const Placement placements[] = {{Align::kLeft, Truncate::kRight}, {Align::kRight, Truncate::kLeft}};
    const T pad = 0xEE, fill = 0x11;
    for (const Placement& placement : placements) {
      const Align align = placement.align;
      const Truncate trunc = placement.trunc;
      INFO("align " << (align == Align::kLeft ? "left" : "right") << ", keep the "
                    << (trunc == Truncate::kRight ? "first" : "last") << " max_len tokens");
      DeviceBuffer<T> d_padded(static_cast<std::size_t>(padded));
      test::poison(d_padded);
      REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
        return ragged_to_padded(workspace, bytes, dev, PaddedView<T>{d_padded.data(), batch, max_len, 1}, pad, align,
                                trunc, nullptr);
      }));
      // And back, into a poisoned ragged tensor: every row of the five sequences is written (the truncated
      // sequence's dropped tokens with `fill`).
      DeviceBuffer<T> d_back(static_cast<std::size_t>(nnz));
      test::poison(d_back);
      REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
        return padded_to_ragged(workspace, bytes, PaddedView<const T>{d_padded.data(), batch, max_len, 1},
                                RaggedView<T, OffsetT>{d_back.data(), d_offsets.data(), batch, nnz, 1}, fill, align,
                                trunc, nullptr);
      }));
      for (std::int64_t b = 0; b < batch; ++b) {
        INFO("sequence " << b << " of " << lengths[b] << " tokens");
        const OffsetT local[2] = {0, static_cast<OffsetT>(lengths[b])};
        std::vector<T> ref(static_cast<std::size_t>(max_len));
        reference::ragged_to_padded(alone(b, local), PaddedView<T>{ref.data(), 1, max_len, 1}, pad, align, trunc);
        const std::vector<T> got = device_to_host(d_padded.data() + b * max_len, max_len);
        std::int64_t bad = first_failure(max_len, [&](std::int64_t k) { return got[k] == ref[k]; });
        INFO("to padded: first mismatch at slot " << bad);
        REQUIRE(bad == -1);

        std::vector<T> back_ref(static_cast<std::size_t>(lengths[b]), test::poison_byte<T>());
        reference::padded_to_ragged(PaddedView<const T>{ref.data(), 1, max_len, 1},
                                    RaggedView<T, OffsetT>{back_ref.data(), local, 1, lengths[b], 1}, fill, align,
                                    trunc);
        const std::vector<T> back = device_to_host(d_back.data() + offsets[b], lengths[b]);
        bad = first_failure(lengths[b], [&](std::int64_t k) { return back[k] == back_ref[k]; });
        INFO("back to ragged: first mismatch at token " << bad);
        REQUIRE(bad == -1);
      }
    }
  }

  SECTION("boolean mask") {
    const DeviceBuffer<std::int64_t> d_lengths(lengths);
    for (Align align : {Align::kLeft, Align::kRight}) {
      INFO("align " << (align == Align::kLeft ? "left" : "right"));
      DeviceBuffer<bool> d_mask(static_cast<std::size_t>(padded));
      d_mask.fill_bytes(0x5a);  // neither false (0) nor true (1)
      REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
        return lengths_to_mask(workspace, bytes, d_lengths.data(), batch, max_len, align, d_mask.data(), nullptr,
                               nullptr);
      }));
      for (std::int64_t b = 0; b < batch; ++b) {
        INFO("sequence " << b << " of " << lengths[b] << " tokens");
        std::unique_ptr<bool[]> ref(new bool[static_cast<std::size_t>(max_len)]);
        reference::lengths_to_mask(lengths.data() + b, 1, max_len, align, ref.get());
        std::unique_ptr<unsigned char[]> got(new unsigned char[static_cast<std::size_t>(max_len)]);
        REQUIRE(cudaMemcpy(got.get(), d_mask.data() + b * max_len, static_cast<std::size_t>(max_len),
                           cudaMemcpyDeviceToHost) == cudaSuccess);
        const std::int64_t bad = first_failure(max_len, [&](std::int64_t k) {
          return got[k] == static_cast<unsigned char>(ref[k] ? 1 : 0);
        });
        INFO("first mismatch at slot " << bad);
        REQUIRE(bad == -1);
      }
    }
  }
}

TEST_CASE("pack and unpack more than 2^31 bytes", "[packing][gpu][large]") {
  using T = std::uint8_t;
  using OffsetT = std::int32_t;
  // 512 sequences of 1 to 2400 tokens of 4096 bytes: about 2.5 GB at full size, so that a packed row's byte offset
  // (row x 4096) passes 2^31 while the rows fit int32 offsets.
  const std::int64_t inner = 4096, batch = 512;
  const std::int64_t longest = test::scaled(2400, 8);
  std::mt19937_64 rng = test::make_rng(0x9ac4);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch));
  for (std::int64_t& length : lengths) length = std::uniform_int_distribution<std::int64_t>(1, longest)(rng);
  const std::vector<OffsetT> offsets = test::offsets_from_lengths<OffsetT>(lengths);
  const std::int64_t nnz = offsets.back(), bytes_total = nnz * inner;
  const std::int64_t max_steps = *std::max_element(lengths.begin(), lengths.end());
  if (full_size()) REQUIRE(bytes_total > kInt32Max);
  require_device_memory(static_cast<std::size_t>(3 * bytes_total) + (std::size_t{1} << 30));

  const std::vector<T> values = hashed_values<T>(bytes_total, fresh_seed(8));
  const DeviceBuffer<OffsetT> d_offsets(offsets);
  const DeviceBuffer<T> d_values(values);

  // The layout on the device, against the host reference's.
  DeviceBuffer<std::int64_t> sorted_indices(batch), unsorted_indices(batch);
  DeviceBuffer<OffsetT> sorted_lengths(batch), batch_sizes(max_steps), step_offsets(max_steps + 1);
  PackedLayout<OffsetT> layout;
  layout.batch = batch;
  layout.max_steps = max_steps;
  layout.sorted_indices = sorted_indices.data();
  layout.unsorted_indices = unsorted_indices.data();
  layout.sorted_lengths = sorted_lengths.data();
  layout.batch_sizes = batch_sizes.data();
  layout.step_offsets = step_offsets.data();
  REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
    return packing_order(workspace, bytes, d_offsets.data(), layout, nullptr, nullptr);
  }));
  const reference::HostPackedLayout<OffsetT> host_layout = reference::packing_order(offsets.data(), batch, max_steps);
  REQUIRE(sorted_indices.to_host() == host_layout.sorted_indices);
  REQUIRE(step_offsets.to_host() == host_layout.step_offsets);

  const RaggedView<const T, OffsetT> dev{d_values.data(), d_offsets.data(), batch, nnz, inner};
  DeviceBuffer<T> d_packed(static_cast<std::size_t>(bytes_total));
  test::poison(d_packed);
  REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
    return pack_sequences(workspace, bytes, dev, layout, d_packed.data(), nullptr);
  }));
  {
    std::vector<T> ref(static_cast<std::size_t>(bytes_total));
    reference::pack_sequences(RaggedView<const T, OffsetT>{values.data(), offsets.data(), batch, nnz, inner},
                              host_layout, ref.data());
    const std::vector<T> got = d_packed.to_host();
    const std::int64_t bad = first_failure(nnz, [&](std::int64_t row) {
      return std::memcmp(got.data() + row * inner, ref.data() + row * inner, static_cast<std::size_t>(inner)) == 0;
    });
    INFO("pack: first packed row that differs " << bad);
    REQUIRE(bad == -1);
  }
  // And back: every row returns to its place (the packed rows are the reference's, checked above).
  DeviceBuffer<T> d_back(static_cast<std::size_t>(bytes_total));
  test::poison(d_back);
  REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
    return unpack_sequences(workspace, bytes, d_packed.data(), layout,
                            RaggedView<T, OffsetT>{d_back.data(), d_offsets.data(), batch, nnz, inner}, nullptr);
  }));
  const std::vector<T> back = d_back.to_host();
  const std::int64_t bad = first_failure(nnz, [&](std::int64_t row) {
    return std::memcmp(back.data() + row * inner, values.data() + row * inner, static_cast<std::size_t>(inner)) == 0;
  });
  INFO("unpack: first row that differs " << bad);
  REQUIRE(bad == -1);
}

TEST_CASE("attention on Q, K, V and O of more than 2^31 elements each", "[attention][gpu][large]") {
  using T = bfloat16;
  using OffsetT = std::int32_t;
  // [rows, 16, 128] tensors of 2^20 + 4096 rows: 2^31 + 2^23 elements each at full size, in sequences of 1 to
  // 1000 tokens (causal and not). The check is the op's bitwise batch invariance (attention.h): the first and the
  // last two sequences, run again as a batch of their own at the start of small buffers, must give the same bits,
  // and that small run is the path gpu_test_attention checks against the CPU reference. Every row of the large
  // output must be written (poisoned before).
  const int heads = 16, head_dim = 128;
  const std::int64_t row_elems = std::int64_t{heads} * head_dim;
  const std::int64_t rows = test::scaled((std::int64_t{1} << 31) / row_elems + 4096, 1024);
  const std::int64_t longest = test::scaled(1000, 32);
  std::mt19937_64 rng = test::make_rng(0xa77e);
  std::vector<std::int64_t> lengths;
  for (std::int64_t filled = 0; filled < rows;) {
    const std::int64_t length =
        std::min(std::uniform_int_distribution<std::int64_t>(1, longest)(rng), rows - filled);
    lengths.push_back(length);
    filled += length;
  }
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size()), elems = rows * row_elems;
  REQUIRE(batch >= 3);
  if (full_size()) REQUIRE(elems > kInt32Max);
  INFO("batch " << batch << ", " << rows << " rows of " << heads << " heads x " << head_dim);
  require_device_memory(static_cast<std::size_t>(4 * elems * sizeof(T)) + (std::size_t{1} << 30));

  const std::vector<OffsetT> offsets = test::offsets_from_lengths<OffsetT>(lengths);
  const std::vector<T> q = hashed_values<T>(elems, fresh_seed(5)), k = hashed_values<T>(elems, fresh_seed(6)),
                       v = hashed_values<T>(elems, fresh_seed(7));
  const DeviceBuffer<OffsetT> d_offsets(offsets);
  const DeviceBuffer<T> d_q(q), d_k(k), d_v(v);

  // The chosen sequences gathered into small host buffers, in order: their offsets and Q, K, V rows.
  const std::vector<std::int64_t> chosen = {0, batch - 2, batch - 1};
  std::vector<std::int64_t> small_lengths;
  for (std::int64_t b : chosen) small_lengths.push_back(lengths[b]);
  const std::vector<OffsetT> small_offsets = test::offsets_from_lengths<OffsetT>(small_lengths);
  const std::int64_t small_rows = small_offsets.back(), small_elems = small_rows * row_elems;
  std::vector<T> small_q, small_k, small_v;
  for (std::int64_t b : chosen) {
    const std::int64_t first = offsets[b] * row_elems, last = offsets[b + 1] * row_elems;
    small_q.insert(small_q.end(), q.begin() + first, q.begin() + last);
    small_k.insert(small_k.end(), k.begin() + first, k.begin() + last);
    small_v.insert(small_v.end(), v.begin() + first, v.begin() + last);
  }
  const DeviceBuffer<OffsetT> d_small_offsets(small_offsets);
  const DeviceBuffer<T> d_small_q(small_q), d_small_k(small_k), d_small_v(small_v);

  // The arguments of a run over device buffers (a HostAttention as the shape only: its vectors stay empty).
  const auto args_for = [&](const T* dq, const T* dk, const T* dv, T* o, float* lse, const OffsetT* offs,
                            std::int64_t n_rows, std::int64_t n_batch, bool causal) {
    test::HostAttention<T, OffsetT> shape;
    shape.batch = n_batch;
    shape.heads_q = shape.heads_kv = heads;
    shape.dim = head_dim;
    shape.causal = causal;
    shape.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    shape.q_rows = shape.k_rows = n_rows;
    return shape.args_with(dq, dk, dv, o, lse, offs, offs);
  };

  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "not causal"));
    DeviceBuffer<T> d_o(static_cast<std::size_t>(elems));
    DeviceBuffer<float> d_lse(static_cast<std::size_t>(rows * heads));
    test::poison(d_o);
    test::poison(d_lse);
    const AttentionArgs<T, OffsetT> large =
        args_for(d_q.data(), d_k.data(), d_v.data(), d_o.data(), d_lse.data(), d_offsets.data(), rows, batch, causal);
    REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
      return varlen_attention_forward(workspace, bytes, large, nullptr);
    }));
    const std::vector<T> o = d_o.to_host();
    const std::vector<float> lse = d_lse.to_host();
    const std::int64_t unwritten = first_failure(elems, [&](std::int64_t i) { return !test::is_poison(o[i]); });
    INFO("first element of O never written: " << unwritten);
    REQUIRE(unwritten == -1);

    DeviceBuffer<T> d_small_o(static_cast<std::size_t>(small_elems));
    DeviceBuffer<float> d_small_lse(static_cast<std::size_t>(small_rows * heads));
    test::poison(d_small_o);
    test::poison(d_small_lse);
    const AttentionArgs<T, OffsetT> small =
        args_for(d_small_q.data(), d_small_k.data(), d_small_v.data(), d_small_o.data(), d_small_lse.data(),
                 d_small_offsets.data(), small_rows, static_cast<std::int64_t>(chosen.size()), causal);
    REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
      return varlen_attention_forward(workspace, bytes, small, nullptr);
    }));
    const std::vector<T> small_o = d_small_o.to_host();
    const std::vector<float> small_lse = d_small_lse.to_host();
    REQUIRE(test::count_poison(small_o) == 0);
    REQUIRE(test::count_poison(small_lse) == 0);
    // The arguments themselves (scale, heads, causality) against a direct computation of a few log-sum-exps of
    // the small run: the first and last query of each chosen sequence, in the first and last head.
    const double scale = static_cast<double>(1.0f / std::sqrt(static_cast<float>(head_dim)));
    for (std::size_t c = 0; c < chosen.size(); ++c) {
      const std::int64_t b = chosen[c], length = lengths[b];
      for (std::int64_t i : {std::int64_t{0}, length - 1})
        for (int h : {0, heads - 1}) {
          const std::int64_t visible = causal ? i + 1 : length;  // as many keys as queries: key j <= query i
          std::vector<double> scores(static_cast<std::size_t>(visible));
          for (std::int64_t j = 0; j < visible; ++j) {
            double dot = 0.0;
            for (int d = 0; d < head_dim; ++d)
              dot += test::to_double(q[(offsets[b] + i) * row_elems + h * head_dim + d]) *
                     test::to_double(k[(offsets[b] + j) * row_elems + h * head_dim + d]);
            scores[j] = scale * dot;
          }
          const double top = *std::max_element(scores.begin(), scores.end());
          double sum = 0.0;
          for (double score : scores) sum += std::exp(score - top);
          const double expected = top + std::log(sum);
          const double got = small_lse[(small_offsets[c] + i) * heads + h];
          INFO("sequence " << b << ", query " << i << ", head " << h << ": LSE " << got << ", expected " << expected);
          REQUIRE(std::abs(got - expected) <= 1e-4 * std::max(1.0, std::abs(expected)));
        }
    }
    for (std::size_t c = 0; c < chosen.size(); ++c) {
      const std::int64_t b = chosen[c], at = offsets[b], small_at = small_offsets[c];
      INFO("sequence " << b << " of " << lengths[b] << " tokens, from row " << at);
      REQUIRE(std::memcmp(o.data() + at * row_elems, small_o.data() + small_at * row_elems,
                          static_cast<std::size_t>(lengths[b] * row_elems) * sizeof(T)) == 0);
      REQUIRE(std::memcmp(lse.data() + at * heads, small_lse.data() + small_at * heads,
                          static_cast<std::size_t>(lengths[b] * heads) * sizeof(float)) == 0);
    }
  }
}

namespace {

// One layer's random parameters on the host and the device, matrices scaled by 1 / sqrt(width) as PyTorch
// initialises them, biases in [-1, 1].
template <typename T>
struct RnnParameters {
  std::vector<std::vector<T>> host;
  std::vector<DeviceBuffer<T>> device;
  std::vector<RnnLayerWeights<T>> host_weights, device_weights;

  RnnParameters(const RnnDesc& desc, std::uint64_t seed) {
    REQUIRE(desc.num_layers == 1);
    REQUIRE(desc.proj_size == 0);
    const std::int64_t rows = rnn_gate_count(desc.mode) * desc.hidden_size;
    for (int dir = 0; dir < rnn_directions(desc); ++dir) {
      const std::array<std::pair<std::int64_t, double>, 4> shapes = {
          {{rows * desc.input_size, 1.0 / std::sqrt(static_cast<double>(desc.input_size))},
           {rows * desc.hidden_size, 1.0 / std::sqrt(static_cast<double>(desc.hidden_size))},
           {rows, 0.5},
           {rows, 0.5}}};
      for (const auto& shape : shapes) {
        std::vector<T> values = hashed_values<T>(shape.first, seed++);
        for (T& v : values) v = test::from_double<T>(test::to_double(v) * shape.second);
        device.emplace_back(values);
        host.push_back(std::move(values));
      }
      const std::size_t i = host.size() - 4;
      host_weights.push_back({host[i].data(), host[i + 1].data(), host[i + 2].data(), host[i + 3].data(), nullptr});
      device_weights.push_back(
          {device[i].data(), device[i + 1].data(), device[i + 2].data(), device[i + 3].data(), nullptr});
    }
  }
};

struct CublasHandle {
  cublasHandle_t handle = nullptr;
  CublasHandle() { REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS); }
  ~CublasHandle() { cublasDestroy(handle); }
};

// rnn_forward (one layer, h0 and c0 given) over the whole batch, then three sequences of it (the first and the
// last two, where the rows past the 32-bit range are) against the CPU reference run on those sequences alone:
// output rows, hn and cn within test_rnn's budget (test::compare_within_naive_budget). Every output row must be
// written. With the batch-invariant projection the three sequences also run as a batch of their own on the device,
// which must give the same bits (the path gpu_test_rnn checks against the reference at ordinary sizes).
template <typename T, typename OffsetT>
void check_rnn_at_size(const RnnDesc& desc, const std::vector<std::int64_t>& lengths, RnnProjection projection,
                       RnnAlgo algo, std::uint64_t salt) {
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  REQUIRE(batch >= 3);
  const std::vector<OffsetT> offsets = test::offsets_from_lengths<OffsetT>(lengths);
  const std::int64_t nnz = offsets.back(), in = desc.input_size, H = desc.hidden_size;
  const std::int64_t slots = rnn_directions(desc), width = slots * H;  // one layer, no projection: S = H
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const bool lstm = desc.mode == RnnMode::kLstm;
  INFO(rnn_mode_name(desc.mode) << " in " << in << " H " << H << (slots == 2 ? " bidirectional" : "") << ", "
                                << rnn_projection_name(projection) << " projection, " << rnn_algo_name(algo)
                                << ", batch " << batch << ", " << nnz << " tokens, longest " << longest);

  const std::vector<T> x = hashed_values<T>(nnz * in, fresh_seed(salt));
  const std::vector<T> h0 = hashed_values<T>(slots * batch * H, fresh_seed(salt + 1));
  const std::vector<T> c0 = hashed_values<T>(lstm ? slots * batch * H : 0, fresh_seed(salt + 2));
  const RnnParameters<T> params(desc, fresh_seed(salt + 3));
  const CublasHandle cublas;

  // A run over device buffers; returns output, hn and cn on the host.
  struct Results {
    std::vector<T> output, hn, cn;
  };
  const auto run = [&](const std::vector<T>& xs, const std::vector<OffsetT>& offs, const std::vector<T>& h0s,
                       const std::vector<T>& c0s, std::int64_t steps) {
    const std::int64_t b = static_cast<std::int64_t>(offs.size()) - 1, rows = offs.back();
    const DeviceBuffer<T> d_x(xs), d_h0(h0s), d_c0(c0s);
    const DeviceBuffer<OffsetT> d_offsets(offs);
    DeviceBuffer<T> d_out(static_cast<std::size_t>(rows * width)), d_hn(h0s.size()), d_cn(c0s.size());
    DeviceBuffer<CheckResult> d_check(1);
    test::poison(d_out);
    test::poison(d_hn);
    test::poison(d_cn);
    d_check.fill_bytes(0);  // "failure at 0": a missing reset shows
    RnnArgs<T, OffsetT> args;
    args.desc = desc;
    args.weights = params.device_weights.data();
    args.input = RaggedView<const T, OffsetT>{d_x.data(), d_offsets.data(), b, rows, in};
    args.max_steps = steps;
    args.h0 = d_h0.data();
    args.c0 = lstm ? d_c0.data() : nullptr;
    args.output = d_out.data();
    args.hn = d_hn.data();
    args.cn = lstm ? d_cn.data() : nullptr;
    args.projection = projection;
    args.cublas = cublas.handle;
    args.algo = algo;
    args.check = d_check.data();
    REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
      return rnn_forward<T, OffsetT>(workspace, bytes, args, nullptr);
    }));
    REQUIRE(d_check.to_host()[0].ok());
    return Results{d_out.to_host(), d_hn.to_host(), lstm ? d_cn.to_host() : std::vector<T>{}};
  };

  Results large;
  {
    // The projections (nnz x 4H or 3H floats a direction) are most of the workspace run_two_phase allocates.
    const std::int64_t projections = nnz * slots * rnn_gate_count(desc.mode) * H;
    require_device_memory(static_cast<std::size_t>((nnz * (in + width)) * sizeof(T) + projections * sizeof(float)) +
                          (std::size_t{1} << 30));
    large = run(x, offsets, h0, c0, longest);
  }
  const std::int64_t unwritten =
      first_failure(nnz * width, [&](std::int64_t i) { return !test::is_poison(large.output[i]); });
  INFO("first output element never written: " << unwritten);
  REQUIRE(unwritten == -1);

  // The chosen sequences as a batch of their own on the host: x rows, and h0 / c0 / hn / cn slots.
  const std::vector<std::int64_t> chosen = {0, batch - 2, batch - 1};
  std::vector<std::int64_t> small_lengths;
  for (std::int64_t b : chosen) small_lengths.push_back(lengths[b]);
  const std::vector<OffsetT> small_offsets = test::offsets_from_lengths<OffsetT>(small_lengths);
  const std::int64_t small_batch = static_cast<std::int64_t>(chosen.size());
  std::vector<T> small_x, small_h0, small_c0;
  Results got;  // the large run's results for the chosen sequences, in the same layout
  for (std::int64_t b : chosen) {
    small_x.insert(small_x.end(), x.begin() + offsets[b] * in, x.begin() + offsets[b + 1] * in);
    got.output.insert(got.output.end(), large.output.begin() + offsets[b] * width,
                      large.output.begin() + offsets[b + 1] * width);
  }
  for (std::int64_t s = 0; s < slots; ++s)
    for (std::int64_t b : chosen) {
      const std::int64_t at = (s * batch + b) * H;
      small_h0.insert(small_h0.end(), h0.begin() + at, h0.begin() + at + H);
      got.hn.insert(got.hn.end(), large.hn.begin() + at, large.hn.begin() + at + H);
      if (lstm) {
        small_c0.insert(small_c0.end(), c0.begin() + at, c0.begin() + at + H);
        got.cn.insert(got.cn.end(), large.cn.begin() + at, large.cn.begin() + at + H);
      }
    }
  const auto reference_run = [&](reference::RnnPrecision precision) {
    Results r;
    r.output.resize(small_x.size() / in * width);
    r.hn.resize(small_h0.size());
    r.cn.resize(small_c0.size());
    reference::rnn_forward<T, OffsetT>(
        desc, params.host_weights.data(),
        RaggedView<const T, OffsetT>{small_x.data(), small_offsets.data(), small_batch, small_offsets.back(), in},
        small_h0.data(), lstm ? small_c0.data() : nullptr, r.output.data(), r.hn.data(),
        lstm ? r.cn.data() : nullptr, precision);
    return r;
  };
  const Results exact = reference_run(reference::RnnPrecision::kExact);
  const Results naive = reference_run(reference::RnnPrecision::kStorage);
  const std::string output_failure = test::compare_within_naive_budget(got.output, exact.output, naive.output);
  INFO("output rows of sequences 0, " << batch - 2 << " and " << batch - 1 << ": " << output_failure);
  REQUIRE(output_failure.empty());
  const std::string hn_failure = test::compare_within_naive_budget(got.hn, exact.hn, naive.hn);
  INFO("hn: " << hn_failure);
  REQUIRE(hn_failure.empty());
  if (lstm) {
    const std::string cn_failure = test::compare_within_naive_budget(got.cn, exact.cn, naive.cn);
    INFO("cn: " << cn_failure);
    REQUIRE(cn_failure.empty());
  }

  if (projection == RnnProjection::kBatchInvariant) {
    const std::int64_t small_longest = *std::max_element(small_lengths.begin(), small_lengths.end());
    const Results alone = run(small_x, small_offsets, small_h0, small_c0, small_longest);
    REQUIRE(alone.output.size() == got.output.size());
    REQUIRE(std::memcmp(alone.output.data(), got.output.data(), got.output.size() * sizeof(T)) == 0);
    REQUIRE(std::memcmp(alone.hn.data(), got.hn.data(), got.hn.size() * sizeof(T)) == 0);
    REQUIRE(std::memcmp(alone.cn.data(), got.cn.data(), got.cn.size() * sizeof(T)) == 0);
  }
}

// Lengths drawn uniformly from 1..longest until they sum to `tokens` (the last one cut to fit).
std::vector<std::int64_t> lengths_summing_to(std::int64_t tokens, std::int64_t longest, std::uint64_t salt) {
  std::mt19937_64 rng = test::make_rng(salt);
  std::vector<std::int64_t> lengths;
  for (std::int64_t filled = 0; filled < tokens;) {
    const std::int64_t length =
        std::min(std::uniform_int_distribution<std::int64_t>(1, longest)(rng), tokens - filled);
    lengths.push_back(length);
    filled += length;
  }
  return lengths;
}

}  // namespace

TEST_CASE("rnn_forward on an input of more than 2^31 elements", "[rnn][gpu][large]") {
  using T = bfloat16;
  using OffsetT = std::int32_t;
  // GRU, input_size 4096, H = 2: 2^19 + 1024 tokens make x 2^31 + 2^22 elements at full size (a token's row starts
  // past 2^31 from token 2^19 on), in sequences of 1 to 1000 tokens; the projections and outputs stay small. Both
  // projections read x: cuBLAS (in calls of at most 2^30 rows) and ragged's GEMM (row x input_size in 64 bits).
  RnnDesc desc;
  desc.mode = RnnMode::kGru;
  desc.input_size = 4096;
  desc.hidden_size = 2;
  const std::int64_t tokens = test::scaled((std::int64_t{1} << 19) + 1024, 512);
  if (full_size()) REQUIRE(tokens * desc.input_size > kInt32Max);
  const std::vector<std::int64_t> lengths = lengths_summing_to(tokens, test::scaled(1000, 8), 0x5e11);
  SECTION("cuBLAS projection") {
    check_rnn_at_size<T, OffsetT>(desc, lengths, RnnProjection::kCublas, RnnAlgo::kAuto, 9);
  }
  SECTION("batch-invariant projection") {
    check_rnn_at_size<T, OffsetT>(desc, lengths, RnnProjection::kBatchInvariant, RnnAlgo::kAuto, 9);
  }
}

TEST_CASE("rnn_forward with input projections of more than 2^31 elements", "[rnn][gpu][large]") {
  using T = bfloat16;
  using OffsetT = std::int64_t;
  // Bidirectional LSTM, H = 8, input_size 3: a token's projections are 2 x 32 floats, so 2^25 + 2^20 tokens make
  // them 2^31 + 2^26 elements (8.8 GB of workspace) at full size, in sequences of 1 to 512 tokens, int64 offsets.
  // The recurrence reads its gate inputs at row x 64 + direction x 32 on every path.
  RnnDesc desc;
  desc.mode = RnnMode::kLstm;
  desc.input_size = 3;
  desc.hidden_size = 8;
  desc.bidirectional = true;
  const std::int64_t tokens = test::scaled((std::int64_t{1} << 25) + (std::int64_t{1} << 20), 4096);
  if (full_size()) REQUIRE(tokens * 2 * 4 * desc.hidden_size > kInt32Max);
  const std::vector<std::int64_t> lengths = lengths_summing_to(tokens, test::scaled(512, 8), 0x5e12);
  SECTION("per-step kernels") {
    check_rnn_at_size<T, OffsetT>(desc, lengths, RnnProjection::kCublas, RnnAlgo::kPerStep, 10);
  }
  SECTION("persistent kernel") {
    check_rnn_at_size<T, OffsetT>(desc, lengths, RnnProjection::kCublas, RnnAlgo::kPersistent, 10);
  }
}
