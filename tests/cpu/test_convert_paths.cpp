// Which kernel a conversion takes, decided on the host from the row size and the base pointers: the vector width
// of convert.cu's kernels (widest_vector_bytes) and whether narrow rows take the token groups (token_groups_fit,
// kernels/convert_tokens.cu). The kernels themselves: tests/gpu/test_convert.cu.
#include <catch2/catch.hpp>

#include <cstdint>

#include "../../kernels/byte_vector.h"
#include "../../kernels/convert_launch.h"
#include "gpu/restore_setting.h"

using ragged::detail::token_groups_fit;
using ragged::detail::widest_vector_bytes;

namespace {

using RestoreTokenGroups = ragged::test::RestoreSetting<bool, ragged::detail::convert_token_groups_enabled,
                                                        ragged::detail::set_convert_token_groups_enabled>;

// An address `offset` bytes past a 256-byte boundary (never dereferenced).
const void* at(std::uintptr_t offset) { return reinterpret_cast<const void*>(std::uintptr_t{4096} + offset); }

}  // namespace

TEST_CASE("conversions: the vector width divides the row and every base pointer", "[convert][paths]") {
  REQUIRE(widest_vector_bytes(64 * 4, 4, {at(0), at(0)}) == 16);
  REQUIRE(widest_vector_bytes(64 * 4, 4, {at(0), at(4)}) == 4);   // a sub-view one float off
  REQUIRE(widest_vector_bytes(2 * 8, 8, {at(8), at(0)}) == 8);
  REQUIRE(widest_vector_bytes(3 * 2, 2, {at(0), at(0)}) == 2);    // 6-byte rows
  REQUIRE(widest_vector_bytes(5, 1, {at(0), at(0)}) == 1);
  REQUIRE(widest_vector_bytes(1 * 4, 4, {at(0), at(0)}) == 4);    // D = 1: a token per vector
  REQUIRE(widest_vector_bytes(1 * 4, 4, {at(2), at(0)}) == 0);    // a float pointer off its alignment
}

TEST_CASE("conversions: narrow rows take the token groups where the pointers allow", "[convert][paths]") {
  const RestoreTokenGroups restore;
  ragged::detail::set_convert_token_groups_enabled(true);
  for (std::int64_t row_bytes : {1, 2, 4, 8}) {
    INFO("row_bytes " << row_bytes);
    REQUIRE(token_groups_fit(row_bytes, at(0), at(0)));
    REQUIRE(token_groups_fit(row_bytes, at(static_cast<std::uintptr_t>(row_bytes)), at(16)));  // src off 16 bytes
    REQUIRE(token_groups_fit(row_bytes, nullptr, at(0)));  // no source rows: src is never read
    REQUIRE_FALSE(token_groups_fit(row_bytes, at(0), at(static_cast<std::uintptr_t>(row_bytes))));  // dst off 16
    if (row_bytes > 1) REQUIRE_FALSE(token_groups_fit(row_bytes, at(1), at(0)));  // a token off its size
  }
  for (std::int64_t row_bytes : {3, 6, 12, 16, 32, 256}) {  // 16 and wider: the vector kernels move whole rows
    INFO("row_bytes " << row_bytes);
    REQUIRE_FALSE(token_groups_fit(row_bytes, at(0), at(0)));
  }
  ragged::detail::set_convert_token_groups_enabled(false);  // RAGGED_CONVERT_TOKEN_GROUPS=0
  REQUIRE_FALSE(token_groups_fit(4, at(0), at(0)));
}
