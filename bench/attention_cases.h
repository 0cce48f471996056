// The attention benchmark shapes (issue 5), shared by bench_attention.cu and the ragged_attention_io tool
// (which prints them for scripts/torch_attention.py, so PyTorch runs exactly the same lengths).
//
// A case: `batch` sequences padded to `max_len` slots, bfloat16, heads 16, head_dim 128, query lengths = key
// lengths. Target padding p in {0, 25, 50, 75}%: sequence b gets max_len * f_b tokens with f_0 = 1 and
// f_b = ((batch - b - 0.5) / batch)^(p / (1 - p)) for b > 0, whose mean is about 1 - p (the achieved fraction
// is reported by each benchmark). Long: max_len 1k..8k; short: max_len <= 512, reported separately.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ragged {
namespace bench {

struct AttentionCase {
  int padding_percent = 0;  // target
  std::int64_t max_len = 0;
  std::int64_t batch = 0;
  int heads = 16;
  int head_dim = 128;
  bool causal = false;
  std::vector<std::int64_t> lengths;  // query lengths = key lengths
  std::int64_t tokens = 0;

  bool is_short() const { return max_len <= 512; }
  double padding_fraction() const;
  // Real work only: 4 * sum(L_b^2) * head_dim * heads, halved for causal.
  double flops() const;
  // "pad50/long/len:4096/batch:16/heads:16/dim:128/causal:0" (benchmark names are attention/<impl>/<this>).
  std::string name() const;
};

// sum_b max(1, round(max_len * f_b)) as described above.
std::vector<std::int64_t> attention_lengths(std::int64_t max_len, std::int64_t batch, int padding_percent);

// Which shapes a run times:
//   kDefault  max_len 4096 and 512, non-causal (8 cases: the kernel emulator's shrunk run times these)
//   kTargets  what issue 5's targets are judged on: max_len 1024, 4096 and 8192, causal and not, and 512
//             non-causal (28 cases; scripts/gpu-check.sh's default)
//   kFull     1k, 2k, 4k, 8k and 128, 256, 512, causal and not (56 cases)
enum class AttentionMatrix { kDefault, kTargets, kFull };

// kFull when `full` (RAGGED_BENCH_FULL=1 or ragged_attention_io's --full); else RAGGED_BENCH_ATTENTION from the
// environment: "targets" for kTargets, unset, empty or "default" for kDefault. Throws std::invalid_argument
// naming any other value.
AttentionMatrix attention_matrix(bool full);

// The cases of `matrix`, each holding 65536 token slots, padded 0, 25, 50 and 75%. length_scale < 1
// (RAGGED_BENCH_SCALE's square root) shortens the sequences and keeps the batch, so the names change with the
// lengths.
std::vector<AttentionCase> attention_cases(AttentionMatrix matrix, double length_scale = 1.0);

}  // namespace bench
}  // namespace ragged
