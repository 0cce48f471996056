// The run-time typed entry points reject unsupported types before touching the device, naming the type.
#include <catch2/catch.hpp>

#include <string>

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
  REQUIRE(dynamic::lengths_to_offsets(nullptr, bytes, DType::kInt32, nullptr, 0, DType::kBool, nullptr, nullptr,
                                      nullptr) == Status::kUnsupportedDType);
  REQUIRE(std::string(last_error_message()) == "lengths_to_offsets: no kernel for offset type bool");
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
