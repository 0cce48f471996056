#include "bench/attention_cases.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace ragged {
namespace bench {

double AttentionCase::padding_fraction() const {
  const double slots = static_cast<double>(batch * max_len);
  return slots == 0.0 ? 0.0 : 1.0 - static_cast<double>(tokens) / slots;
}

double AttentionCase::flops() const {
  double pairs = 0.0;
  for (const std::int64_t l : lengths) pairs += static_cast<double>(l) * static_cast<double>(l);
  return 4.0 * pairs * head_dim * heads * (causal ? 0.5 : 1.0);
}

std::string AttentionCase::name() const {
  return "pad" + std::to_string(padding_percent) + (is_short() ? "/short" : "/long") + "/len:" +
         std::to_string(max_len) + "/batch:" + std::to_string(batch) + "/heads:" + std::to_string(heads) +
         "/dim:" + std::to_string(head_dim) + "/causal:" + (causal ? "1" : "0");
}

std::vector<std::int64_t> attention_lengths(std::int64_t max_len, std::int64_t batch, int padding_percent) {
  const double p = padding_percent / 100.0;
  const double exponent = p / (1.0 - p);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    const double f =
        b == 0 ? 1.0 : std::pow((static_cast<double>(batch - b) - 0.5) / static_cast<double>(batch), exponent);
    lengths[b] = std::max<std::int64_t>(1, std::llround(static_cast<double>(max_len) * f));
  }
  return lengths;
}

AttentionMatrix attention_matrix(bool full) {
  if (full) return AttentionMatrix::kFull;
  const char* env = std::getenv("RAGGED_BENCH_ATTENTION");
  const std::string value = env == nullptr ? "" : env;
  if (value.empty() || value == "default") return AttentionMatrix::kDefault;
  if (value == "targets") return AttentionMatrix::kTargets;
  throw std::invalid_argument("RAGGED_BENCH_ATTENTION='" + value + "': expected 'default' or 'targets'");
}

std::vector<AttentionCase> attention_cases(AttentionMatrix matrix, double length_scale) {
  constexpr std::int64_t kSlots = 65536;
  struct Shape {
    std::int64_t max_len;
    bool causal;
  };
  std::vector<Shape> shapes;
  switch (matrix) {
    case AttentionMatrix::kDefault:
      shapes = {{4096, false}, {512, false}};
      break;
    case AttentionMatrix::kTargets:
      for (const bool causal : {false, true})
        for (const std::int64_t max_len : {1024, 4096, 8192}) shapes.push_back({max_len, causal});
      shapes.push_back({512, false});
      break;
    case AttentionMatrix::kFull:
      for (const bool causal : {false, true})
        for (const std::int64_t max_len : {1024, 2048, 4096, 8192, 128, 256, 512})
          shapes.push_back({max_len, causal});
      break;
  }
  std::vector<AttentionCase> cases;
  for (const Shape& shape : shapes)
    for (const int pad : {0, 25, 50, 75}) {
      AttentionCase c;
      c.padding_percent = pad;
      c.batch = kSlots / shape.max_len;
      c.max_len = std::max<std::int64_t>(1, std::llround(static_cast<double>(shape.max_len) * length_scale));
      c.causal = shape.causal;
      c.lengths = attention_lengths(c.max_len, c.batch, pad);
      for (const std::int64_t l : c.lengths) c.tokens += l;
      cases.push_back(std::move(c));
    }
  return cases;
}

}  // namespace bench
}  // namespace ragged
