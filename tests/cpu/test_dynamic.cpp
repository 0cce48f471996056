// The run-time typed entry points reject unsupported types before touching the device, naming the type.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "ragged/dynamic.h"

using namespace ragged;

TEST_CASE("dynamic entry points name an unsupported dtype", "[dynamic][errors]") {
  std::size_t bytes = 0;
  dynamic::RaggedDesc desc;
  desc.batch = 0;

  desc.dtype = DType::kInt32;  // segment ops are floating point only
  REQUIRE(dynamic::segment_reduce(nullptr, bytes, desc, ReduceOp::kSum, nullptr, nullptr, 0.0f, nullptr) ==
          Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "segment_reduce: no kernel for element type int32");
  REQUIRE(dynamic::segment_softmax(nullptr, bytes, desc, false, nullptr, nullptr) == Status::kUnsupportedDType);

  desc.dtype = DType::kFloat32;
  desc.offset_dtype = DType::kFloat16;  // offsets must be integers
  REQUIRE(dynamic::ragged_to_padded(nullptr, bytes, desc, nullptr, 0, 0.0, Align::kLeft, Truncate::kRight, nullptr) ==
          Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "ragged_to_padded: no kernel for offset type float16");
  REQUIRE(dynamic::lengths_to_offsets(nullptr, bytes, DType::kUInt8, nullptr, 0, DType::kInt32, nullptr, nullptr,
                                      nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "lengths_to_offsets: no kernel for length type uint8");
  REQUIRE(dynamic::lengths_to_offsets(nullptr, bytes, DType::kInt32, nullptr, 0, DType::kBool, nullptr, nullptr,
                                      nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "lengths_to_offsets: no kernel for offset type bool");

  REQUIRE(dynamic::offsets_to_lengths(nullptr, bytes, DType::kFloat32, nullptr, 0, DType::kInt32, nullptr,
                                      nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "offsets_to_lengths: no kernel for offset type float32");
  REQUIRE(dynamic::offsets_to_lengths(nullptr, bytes, DType::kInt64, nullptr, 0, DType::kUInt8, nullptr,
                                      nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "offsets_to_lengths: no kernel for length type uint8");
  REQUIRE(dynamic::max_length(nullptr, bytes, DType::kBFloat16, nullptr, 0, nullptr, nullptr) ==
          Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "max_length: no kernel for offset type bfloat16");
  REQUIRE(dynamic::validate_offsets(nullptr, bytes, DType::kBool, nullptr, 0, 0, -1, nullptr, nullptr) ==
          Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "validate_offsets: no kernel for offset type bool");
  // A supported type reaches the typed op's checks: a negative batch.
  REQUIRE(dynamic::max_length(nullptr, bytes, DType::kInt32, nullptr, -2, nullptr, nullptr) ==
          Status::kInvalidArgument);
  REQUIRE(std::string(last_error_message()).find("batch") != std::string::npos);
}

TEST_CASE("dynamic conversions refuse a pad or fill value the element type cannot hold", "[dynamic][errors]") {
  // Host buffers stand in for device ones: every failure below comes before the first CUDA call.
  const std::vector<std::int64_t> offsets = {0, 1, 3};
  std::vector<std::int32_t> values(3), padded(4);
  dynamic::RaggedDesc desc;
  desc.values = values.data();
  desc.offsets = offsets.data();
  desc.batch = 2;
  desc.nnz = 3;
  desc.inner = 1;
  desc.offset_dtype = DType::kInt64;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    DType dtype;
    double value;
    const char* printed;
  };
  const Case refused[] = {{DType::kInt32, 1e20, "pad_value = 100000000000000000000"},
                          {DType::kInt32, 2147483648.0, "does not fit int32"},
                          {DType::kInt32, -2147483649.0, "does not fit int32"},
                          {DType::kInt32, nan, "pad_value = nan"},
                          {DType::kInt64, 9223372036854775808.0, "does not fit int64"},
                          {DType::kInt64, -inf, "pad_value = -inf"},
                          {DType::kUInt8, -1.0, "does not fit uint8"},
                          {DType::kUInt8, 256.0, "does not fit uint8"}};
  for (const Case& c : refused) {
    INFO(dtype_name(c.dtype) << " " << c.value);
    desc.dtype = c.dtype;
    std::size_t bytes = 0;
    REQUIRE(dynamic::ragged_to_padded(nullptr, bytes, desc, padded.data(), 2, c.value, Align::kLeft, Truncate::kRight,
                                      nullptr) == Status::kInvalidArgument);
    REQUIRE(std::string(last_error_message()).find(c.printed) != std::string::npos);
    REQUIRE(dynamic::padded_to_ragged(nullptr, bytes, padded.data(), 2, desc, values.data(), c.value, Align::kLeft,
                                      Truncate::kRight, nullptr) == Status::kInvalidArgument);
    REQUIRE(std::string(last_error_message()).find("padded_to_ragged: fill") != std::string::npos);
  }
  // The edges of each range, and values truncated toward zero into it, pass (the query: no device needed).
  const Case accepted[] = {{DType::kInt32, 2147483647.0, ""}, {DType::kInt32, -2147483648.0, ""},
                           {DType::kInt32, -2147483648.9, ""}, {DType::kInt64, -9223372036854775808.0, ""},
                           {DType::kUInt8, 255.5, ""},          {DType::kUInt8, -0.5, ""},
                           {DType::kFloat32, inf, ""},          {DType::kFloat16, nan, ""},
                           {DType::kBool, nan, ""}};
  for (const Case& c : accepted) {
    INFO(dtype_name(c.dtype) << " " << c.value);
    desc.dtype = c.dtype;
    std::size_t bytes = 0;
    REQUIRE_OK(dynamic::ragged_to_padded(nullptr, bytes, desc, padded.data(), 2, c.value, Align::kLeft,
                                         Truncate::kRight, nullptr));
  }
}

TEST_CASE("dynamic entry points forward argument errors of the typed ops", "[dynamic][errors]") {
  std::size_t bytes = 0;
  dynamic::RaggedDesc desc;
  desc.dtype = DType::kBFloat16;
  desc.offset_dtype = DType::kInt32;
  desc.batch = 4;  // offsets are null but must hold 5 entries
  REQUIRE(dynamic::segment_reduce(nullptr, bytes, desc, ReduceOp::kMax, nullptr, nullptr, 0.0f, nullptr) ==
          Status::kNullPointer);
  REQUIRE(std::string(last_error_message()).find("offsets") != std::string::npos);
  desc.batch = -1;
  REQUIRE(dynamic::padded_to_ragged(nullptr, bytes, nullptr, 0, desc, nullptr, 0.0, Align::kLeft, Truncate::kRight,
                                    nullptr) == Status::kInvalidArgument);
}

TEST_CASE("dynamic backward, mask and attention entry points name what is wrong", "[dynamic][errors]") {
  std::size_t bytes = 0;
  dynamic::RaggedDesc shape;
  shape.dtype = DType::kUInt8;
  REQUIRE(dynamic::segment_reduce_backward(nullptr, bytes, shape, ReduceOp::kSum, nullptr, nullptr, nullptr,
                                           nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "segment_reduce_backward: no kernel for element type uint8");
  shape.dtype = DType::kFloat16;
  shape.offset_dtype = DType::kBFloat16;
  REQUIRE(dynamic::segment_softmax_backward(nullptr, bytes, shape, false, nullptr, nullptr, nullptr, nullptr) ==
          Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "segment_softmax_backward: no kernel for offset type bfloat16");

  REQUIRE(dynamic::lengths_to_mask(nullptr, bytes, DType::kFloat32, nullptr, 0, 0, Align::kLeft, nullptr, nullptr,
                                   nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "lengths_to_mask: no kernel for length type float32");
  REQUIRE(dynamic::lengths_to_additive_mask(nullptr, bytes, DType::kInt32, nullptr, 0, 0, Align::kLeft,
                                            DType::kInt64, nullptr, nullptr, nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "lengths_to_additive_mask: no kernel for mask type int64");
  // A supported combination reaches the typed op and its checks: a negative max_len.
  REQUIRE(dynamic::lengths_to_additive_mask(nullptr, bytes, DType::kInt64, nullptr, 1, -3, Align::kLeft,
                                            DType::kBFloat16, nullptr, nullptr, nullptr) != Status::kSuccess);
  REQUIRE(std::string(last_error_message()).find("max_len") != std::string::npos);

  dynamic::AttentionDesc attention;
  attention.dtype = DType::kBool;
  REQUIRE(dynamic::varlen_attention_forward(nullptr, bytes, attention, nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "varlen_attention_forward: no kernel for element type bool");
  attention.dtype = DType::kFloat32;
  attention.offset_dtype = DType::kUInt8;
  REQUIRE(dynamic::varlen_attention_forward(nullptr, bytes, attention, nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "varlen_attention_forward: no kernel for offset type uint8");
}

TEST_CASE("dynamic attention forwards the typed op's argument checks", "[dynamic][errors][attention]") {
  std::size_t bytes = 0;
  dynamic::AttentionDesc d;
  d.dtype = DType::kBFloat16;
  d.offset_dtype = DType::kInt64;
  d.batch = 2;
  d.heads_q = 8;
  d.heads_kv = 2;
  d.head_dim = 96;
  d.scale = 0.1f;
  REQUIRE(dynamic::varlen_attention_forward(nullptr, bytes, d, nullptr) == Status::kUnsupportedShape);
  REQUIRE(std::string(last_error_message()).find("head_dim 96") != std::string::npos);
  d.head_dim = 64;
  d.heads_kv = 3;
  REQUIRE(dynamic::varlen_attention_forward(nullptr, bytes, d, nullptr) == Status::kInvalidArgument);
  REQUIRE(std::string(last_error_message()).find("must divide heads_q") != std::string::npos);
  d.heads_kv = 2;
  // Neither offsets nor lengths for Q.
  REQUIRE(dynamic::varlen_attention_forward(nullptr, bytes, d, nullptr) == Status::kNullPointer);
  REQUIRE(std::string(last_error_message()).find("q_seq") != std::string::npos);
  // An explicit token stride that breaks the 16-byte rule is reported; the dense default (0) is not.
  alignas(16) static std::int64_t offsets[3] = {0, 0, 0};
  d.q_seq.offsets = offsets;
  d.k_seq.offsets = offsets;
  d.q.token_stride = 8 * 64 + 3;
  REQUIRE(dynamic::varlen_attention_forward(nullptr, bytes, d, nullptr) == Status::kInvalidArgument);
  REQUIRE(std::string(last_error_message()).find("q: token_stride 515") != std::string::npos);
  d.q.token_stride = 0;
  REQUIRE(dynamic::varlen_attention_forward(nullptr, bytes, d, nullptr) == Status::kSuccess);
  REQUIRE(bytes == 1);
}

TEST_CASE("dynamic rnn_forward names a dtype mismatch and forwards the typed op's checks", "[dynamic][errors][rnn]") {
  std::size_t bytes = 0;
  dynamic::RnnForwardDesc r;
  r.dtype = DType::kBFloat16;
  r.input.dtype = DType::kFloat32;
  REQUIRE(dynamic::rnn_forward(nullptr, bytes, r, nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "rnn_forward: the input is float32 but the layer is bfloat16");
  r.dtype = r.input.dtype = DType::kInt32;
  REQUIRE(dynamic::rnn_forward(nullptr, bytes, r, nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "rnn_forward: no kernel for element type int32");

  r.dtype = r.input.dtype = DType::kFloat16;
  r.desc.input_size = 8;
  r.desc.hidden_size = 16;
  r.desc.num_layers = 0;
  REQUIRE(dynamic::rnn_forward(nullptr, bytes, r, nullptr) == Status::kInvalidArgument);
  REQUIRE(std::string(last_error_message()).find("num_layers = 0") != std::string::npos);
  r.desc.num_layers = 70000;  // more than the run-time entry point copies; never read past the caller's table
  REQUIRE(dynamic::rnn_forward(nullptr, bytes, r, nullptr) == Status::kUnsupportedShape);
  REQUIRE(std::string(last_error_message()).find("num_layers = 70000") != std::string::npos);
  r.desc.num_layers = 2;
  REQUIRE(dynamic::rnn_forward(nullptr, bytes, r, nullptr) == Status::kNullPointer);  // no weight table
  REQUIRE(std::string(last_error_message()).find("weights") != std::string::npos);
  // A table whose second layer lacks w_hh: the typed op names the entry.
  RnnLayerWeights<void> table[2];
  alignas(16) static unsigned char blob[4096];
  table[0] = RnnLayerWeights<void>{blob, blob, blob, blob, nullptr};
  table[1] = RnnLayerWeights<void>{blob, nullptr, blob, blob, nullptr};
  r.weights = table;
  REQUIRE(dynamic::rnn_forward(nullptr, bytes, r, nullptr) == Status::kNullPointer);
  REQUIRE(std::string(last_error_message()).find("weights[1].w_hh") != std::string::npos);
}

TEST_CASE("dynamic packing entry points name an unsupported dtype", "[dynamic][errors][packing]") {
  std::size_t bytes = 0;
  dynamic::PackedLayoutDesc layout;
  REQUIRE(dynamic::packing_order(nullptr, bytes, DType::kFloat16, nullptr, layout, nullptr, nullptr) ==
          Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "packing_order: no kernel for offset type float16");
  dynamic::RaggedDesc desc;
  desc.dtype = DType::kBool;
  REQUIRE(dynamic::pack_sequences(nullptr, bytes, desc, layout, nullptr, nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "pack_sequences: no kernel for element type bool");
  REQUIRE(dynamic::unpack_sequences(nullptr, bytes, nullptr, layout, desc, nullptr, nullptr) ==
          Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "unpack_sequences: no kernel for element type bool");
  // A supported type reaches the typed op's checks: the layout's batch must match.
  desc.dtype = DType::kUInt8;
  desc.batch = 3;
  layout.batch = 2;
  REQUIRE(dynamic::pack_sequences(nullptr, bytes, desc, layout, nullptr, nullptr) != Status::kSuccess);
  REQUIRE(std::string(last_error_message()).find("batch") != std::string::npos);
}
