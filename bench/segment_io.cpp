// ragged_segment_io: ragged's CPU references of the segment ops (reference_segment.h) callable from a script
// through files, for scripts/torch_segment.py --device cpu to hold against PyTorch. These references are the
// oracles of the GPU segment tests; host code only, no GPU is touched.
//
//   ragged_segment_io reference DIR    reads DIR/meta.txt and the raw inputs, runs every segment reference (each
//                                      reduction and its backward, softmax and log-softmax and their backward),
//                                      writes the results to DIR; exit code 0 on success
//
// DIR/meta.txt holds "key value" lines: dtype (f32, f16 or bf16), offsets (i32 or i64), batch, nnz, inner,
// empty_value (the reductions' value for an empty sequence) and unwritten (what every [nnz, inner] output holds
// before the call, so that the script sees whether rows past offsets[batch] were left alone).
// Raw little-endian files, dense and row-major. Read:
//   x.bin [nnz, inner] of dtype, offsets.bin [batch + 1] of the offset type,
//   grad_reduce.bin [batch, inner] of dtype (dL/dout of a reduction), grad_softmax.bin [nnz, inner] (dL/dy).
// Written:
//   sum.bin, mean.bin, max.bin, min.bin [batch, inner] of dtype; argmax.bin, argmin.bin int64 [batch, inner];
//   sum_backward.bin .. min_backward.bin [nnz, inner] (max / min routed by the args above);
//   softmax.bin, log_softmax.bin [nnz, inner]; softmax_backward.bin, log_softmax_backward.bin [nnz, inner]
//   (each from the forward output above, as a training step would call it).
#include <cstdint>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench/common/raw_files.h"
#include "ragged/offsets.h"
#include "ragged/reference_segment.h"
#include "ragged/status.h"

namespace {

using ragged::bench::KeyValueFile;
using ragged::bench::read_array;
using ragged::bench::write_array;

// The element nearest to a float (the sentinel of unwritten rows; exact for the values the script picks).
template <typename T>
T from_float(float v) {
  if constexpr (std::is_same<T, ragged::half>::value) return __float2half_rn(v);
  else if constexpr (std::is_same<T, ragged::bfloat16>::value) return __float2bfloat16_rn(v);
  else return v;
}

template <typename T, typename OffsetT>
void run_reference(const std::string& dir, const KeyValueFile& meta) {
  const std::int64_t batch = std::stoll(meta.required("batch")), nnz = std::stoll(meta.required("nnz")),
                     inner = std::stoll(meta.required("inner"));
  if (batch < 0 || nnz < 0 || inner < 1) throw std::runtime_error("meta.txt: need batch >= 0, nnz >= 0, inner >= 1");
  // std::stof reads "inf", "-inf" and "nan" as well.
  const float empty_value = std::stof(meta.required("empty_value"));
  const T unwritten = from_float<T>(std::stof(meta.required("unwritten")));
  const std::size_t row_elems = static_cast<std::size_t>(batch * inner);
  const std::size_t all_elems = static_cast<std::size_t>(nnz * inner);

  const std::vector<T> x = read_array<T>(dir + "/x.bin", all_elems);
  const std::vector<OffsetT> offsets = read_array<OffsetT>(dir + "/offsets.bin", static_cast<std::size_t>(batch + 1));
  const std::vector<T> grad_reduce = read_array<T>(dir + "/grad_reduce.bin", row_elems);
  const std::vector<T> grad_softmax = read_array<T>(dir + "/grad_softmax.bin", all_elems);
  // The references trust their offsets (reference_segment.h): check them first, as a caller must.
  if (ragged::validate_offsets_host(offsets.data(), batch, nnz) != ragged::Status::kSuccess)
    throw std::runtime_error(std::string("offsets.bin: ") + ragged::last_error_message());
  const ragged::RaggedView<const T, OffsetT> view{x.data(), offsets.data(), batch, nnz, inner};

  const std::pair<ragged::ReduceOp, const char*> reductions[] = {
      {ragged::ReduceOp::kSum, "sum"}, {ragged::ReduceOp::kMean, "mean"},
      {ragged::ReduceOp::kMax, "max"}, {ragged::ReduceOp::kMin, "min"}};
  for (const auto& [op, name] : reductions) {
    const bool has_arg = op == ragged::ReduceOp::kMax || op == ragged::ReduceOp::kMin;
    std::vector<T> out(row_elems);
    std::vector<std::int64_t> arg(has_arg ? row_elems : 0);
    ragged::reference::segment_reduce(view, op, out.data(), has_arg ? arg.data() : nullptr, empty_value);
    std::vector<T> grad_in(all_elems, unwritten);
    ragged::reference::segment_reduce_backward(view, op, grad_reduce.data(), has_arg ? arg.data() : nullptr,
                                               grad_in.data());
    write_array(dir + "/" + name + ".bin", out);
    if (has_arg) write_array(dir + "/arg" + name + ".bin", arg);
    write_array(dir + "/" + name + "_backward.bin", grad_in);
  }
  for (const bool log : {false, true}) {
    const std::string name = log ? "log_softmax" : "softmax";
    std::vector<T> y(all_elems, unwritten);
    ragged::reference::segment_softmax(view, log, y.data());
    std::vector<T> grad_in(all_elems, unwritten);
    ragged::reference::segment_softmax_backward(view, log, y.data(), grad_softmax.data(), grad_in.data());
    write_array(dir + "/" + name + ".bin", y);
    write_array(dir + "/" + name + "_backward.bin", grad_in);
  }
}

template <typename T>
void run_reference_for_offsets(const std::string& dir, const KeyValueFile& meta,
                               const std::string& offsets) {
  if (offsets == "i32") run_reference<T, std::int32_t>(dir, meta);
  else if (offsets == "i64") run_reference<T, std::int64_t>(dir, meta);
  else throw std::runtime_error("unknown offsets " + offsets + " (i32 or i64)");
}

int usage() {
  std::cerr << "usage: ragged_segment_io reference DIR\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) != "reference") return usage();
  try {
    const std::string dir = argv[2];
    const auto meta = ragged::bench::read_key_values(dir + "/meta.txt");
    const std::string& dtype = meta.required("dtype");
    const std::string& offsets = meta.required("offsets");
    if (dtype == "f32") run_reference_for_offsets<float>(dir, meta, offsets);
    else if (dtype == "f16") run_reference_for_offsets<ragged::half>(dir, meta, offsets);
    else if (dtype == "bf16") run_reference_for_offsets<ragged::bfloat16>(dir, meta, offsets);
    else throw std::runtime_error("unknown dtype " + dtype + " (f32, f16 or bf16)");
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "ragged_segment_io: " << error.what() << "\n";
    return 1;
  }
}
