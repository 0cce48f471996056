// GPU benchmarks of ragged <-> padded conversion (ragged::ragged_to_padded / padded_to_ragged, float values, and
// bfloat16 and uint8 ones at D = 1 (`/dtype:bf16`, `/dtype:u8`); int32 offsets, left-aligned, nothing truncated),
// each next to a plain device-to-device copy of the same bytes.
//
// Bytes per iteration:
//   ragged_to_padded: ragged values read + the whole padded tensor written (pad slots count as written)
//   padded_to_ragged: the token slots of the padded tensor read + ragged values written (pad slots are not read)
//   copy:             a cudaMemcpyAsync of half those bytes (rounded up to 4 KiB), i.e. the same bytes read +
//                     written
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/common/device_data.h"
#include "bench/common/gpu_timer.h"
#include "bench/common/suite.h"
#include "bench/common/traffic.h"
#include "bench/common/verify.h"
#include "bench/convert_cases.h"
#include "ragged/buffer.h"
#include "ragged/convert.h"
#include "ragged/reference.h"

namespace ragged {
namespace bench {
namespace {

enum class Direction { kRaggedToPadded, kPaddedToRagged };

const char* op_name(Direction direction) {
  return direction == Direction::kRaggedToPadded ? "ragged_to_padded" : "padded_to_ragged";
}

// A case and its element size.
struct ConvertCase {
  RaggedCase shape;
  std::size_t elem_size;
};

double value_bytes(const ConvertCase& c) {
  return static_cast<double>(c.shape.tokens * c.shape.inner * static_cast<std::int64_t>(c.elem_size));
}
double padded_bytes(const ConvertCase& c) {
  return static_cast<double>(c.shape.padded_slots() * c.shape.inner * static_cast<std::int64_t>(c.elem_size));
}

double moved_bytes(const ConvertCase& c, Direction direction) {
  return direction == Direction::kRaggedToPadded ? value_bytes(c) + padded_bytes(c) : 2.0 * value_bytes(c);
}

// The name's suffix for an element type other than float.
template <typename T>
const char* dtype_suffix() {
  if (std::is_same<T, __nv_bfloat16>::value) return "/dtype:bf16";
  if (std::is_same<T, std::uint8_t>::value) return "/dtype:u8";
  return "";
}

// Uniform values: [-1, 1) for float and bfloat16, every byte for uint8.
template <typename T>
float fill_scale() {
  return std::is_same<T, std::uint8_t>::value ? 128.0f : 1.0f;
}

void set_case_counters(benchmark::State& state, const RaggedCase& c) {
  state.counters["padding_frac"] = c.padding_fraction();
  state.counters["tokens"] = static_cast<double>(c.tokens);
  state.counters["max_len"] = static_cast<double>(c.max_len);
}

// RAGGED_BENCH_VERIFY (bench/common/verify.h): the converted tensor, exactly, against ragged's CPU reference of
// the same conversion of the source as it is now (the timed runs left it unchanged).
template <typename T>
void verify_conversion(benchmark::State& state, const RaggedCase& c, Direction direction,
                       const DeviceBuffer<T>& ragged_values, const DeviceBuffer<T>& padded) {
  std::vector<T> ragged_host = ragged_values.to_host(), padded_host = padded.to_host();
  const std::vector<double> got = as_doubles(direction == Direction::kRaggedToPadded ? padded_host : ragged_host);
  RaggedView<T, std::int32_t> ragged_view{ragged_host.data(), c.offsets.data(), c.batch, c.tokens, c.inner};
  PaddedView<T> padded_view{padded_host.data(), c.batch, c.max_len, c.inner};
  const T pad = static_cast<T>(0.0f);
  if (direction == Direction::kRaggedToPadded)
    reference::ragged_to_padded<T, std::int32_t>(ragged_view, padded_view, pad, Align::kLeft, Truncate::kRight);
  else
    reference::padded_to_ragged<T, std::int32_t>(padded_view, ragged_view, pad, Align::kLeft, Truncate::kRight);
  const std::vector<double> want = as_doubles(direction == Direction::kRaggedToPadded ? padded_host : ragged_host);
  check_against_reference(state, got, want, 0.0, op_name(direction));
}

template <typename T>
void bench_conversion(benchmark::State& state, const ConvertCase& cc, Direction direction) {
  run_guarded(state, [&] {
    const RaggedCase& c = cc.shape;
    cudaStream_t stream = GpuTimer::instance().stream();
    DeviceBuffer<T> ragged_values(static_cast<std::size_t>(c.tokens * c.inner), stream);
    DeviceBuffer<T> padded(static_cast<std::size_t>(c.padded_slots() * c.inner), stream);
    DeviceBuffer<std::int32_t> offsets(c.offsets, stream);
    // The values do not matter to a data-movement op; distinct ones let RAGGED_BENCH_VERIFY see misplaced rows.
    fill_uniform(ragged_values, fill_scale<T>(), 21u, stream);
    fill_uniform(padded, fill_scale<T>(), 22u, stream);

    RaggedView<T, std::int32_t> ragged_view{ragged_values.data(), offsets.data(), c.batch, c.tokens, c.inner};
    RaggedView<const T, std::int32_t> ragged_const{ragged_values.data(), offsets.data(), c.batch, c.tokens, c.inner};
    PaddedView<T> padded_view{padded.data(), c.batch, c.max_len, c.inner};
    PaddedView<const T> padded_const{padded.data(), c.batch, c.max_len, c.inner};
    const T pad = static_cast<T>(0.0f);

    auto launch = [&](void* workspace, std::size_t& bytes, cudaStream_t s) {
      return direction == Direction::kRaggedToPadded
                 ? ragged_to_padded<T, std::int32_t>(workspace, bytes, ragged_const, padded_view, pad, Align::kLeft,
                                                     Truncate::kRight, s)
                 : padded_to_ragged<T, std::int32_t>(workspace, bytes, padded_const, ragged_view, pad, Align::kLeft,
                                                     Truncate::kRight, s);
    };
    std::size_t workspace_bytes = 0;
    if (!ok_or_skip(state, launch(nullptr, workspace_bytes, stream), "workspace query")) return;
    // A zero-byte query still needs a non-null pointer to mean "run".
    DeviceBuffer<unsigned char> workspace(workspace_bytes > 0 ? workspace_bytes : 1, stream);

    time_on_gpu(state, [&](cudaStream_t s) { return launch(workspace.data(), workspace_bytes, s); });
    const double peak = value_bytes(cc) + padded_bytes(cc) + static_cast<double>(offsets.bytes() + workspace_bytes);
    set_gpu_traffic(state, moved_bytes(cc, direction), peak);
    set_case_counters(state, c);
    if (verify_results() && !state.error_occurred()) verify_conversion(state, c, direction, ragged_values, padded);
  });
}

void bench_copy(benchmark::State& state, const ConvertCase& c, Direction direction) {
  run_guarded(state, [&] {
    cudaStream_t stream = GpuTimer::instance().stream();
    // Rounded up to 4 KiB: in the 087a77a run (H200) the ~64 MiB copies whose size had no factor 2^12 took
    // 34.8-35.9 us, those with one 31.3-33.3 (copy_frac 0.93-0.94 against 0.99-1.02): a tail the conversion does
    // not pay, which flattered ragged by ~7% there. The extra bytes (< 4 KiB) are counted.
    constexpr std::size_t kCopyGranule = 4096;
    const auto wanted = static_cast<std::size_t>(moved_bytes(c, direction) / 2.0);
    const std::size_t bytes = (wanted + kCopyGranule - 1) / kCopyGranule * kCopyGranule;
    DeviceBuffer<unsigned char> src(bytes, stream), dst(bytes, stream);
    src.fill_bytes(0x3c);
    dst.fill_bytes(0x00);
    time_on_gpu(state, [&](cudaStream_t s) {
      return bytes == 0 ? Status::kSuccess
                        : from_cuda(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s),
                                    "cudaMemcpyAsync");
    });
    set_gpu_traffic(state, 2.0 * static_cast<double>(bytes), 2.0 * static_cast<double>(bytes));
    set_case_counters(state, c.shape);
    if (verify_results() && !state.error_occurred())
      check_against_reference(state, as_doubles(dst.to_host()), as_doubles(src.to_host()), 0.0, "copy");
  });
}

template <typename T>
void register_cases(const std::vector<RaggedCase>& cases) {
  for (const RaggedCase& c : cases) {
    const auto shared = std::make_shared<const ConvertCase>(ConvertCase{c, sizeof(T)});
    const std::string name = c.name() + dtype_suffix<T>();
    for (const Direction direction : {Direction::kRaggedToPadded, Direction::kPaddedToRagged}) {
      const std::string op = op_name(direction);
      register_gpu_benchmark(op + "/ragged/" + name, [shared, direction](benchmark::State& state) {
        bench_conversion<T>(state, *shared, direction);
      });
      register_gpu_benchmark(op + "/copy/" + name,
                             [shared, direction](benchmark::State& state) { bench_copy(state, *shared, direction); });
    }
  }
}

void register_convert_gpu() {
  register_cases<float>(gpu_convert_cases());
  register_cases<__nv_bfloat16>(gpu_convert_narrow_cases(sizeof(__nv_bfloat16)));
  register_cases<std::uint8_t>(gpu_convert_narrow_cases(sizeof(std::uint8_t)));
}

}  // namespace

RAGGED_BENCH_SUITE(convert_gpu, Needs::kGpu, register_convert_gpu);

}  // namespace bench
}  // namespace ragged
