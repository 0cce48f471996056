// Catch2 main for GPU tests: exits with 77 (ctest SKIP_RETURN_CODE) when no CUDA device is visible, so a
// machine without a GPU shows these tests as not run, never as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "common/test_util.h"

int main(int argc, char** argv) {
  Catch::Session session;
  const int rc = session.applyCommandLine(argc, argv);
  if (rc != 0) return rc;
  const auto& config = session.configData();
  const bool listing = config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters;
  if (ragged::test::test_scale_error() != nullptr) {
    std::fprintf(stderr, "%s\n", ragged::test::test_scale_error());
    return 2;
  }
  if (!listing && ragged::test::test_scale() != 1.0)
    std::printf("RAGGED_TEST_SCALE=%g: the segment and attention tests' large generated inputs are scaled down\n",
                ragged::test::test_scale());
  if (!listing && !ragged::test::gpu_available()) {
    if (ragged::test::gpu_absent()) {
      std::printf("SKIP: no CUDA device visible (%s); GPU tests not run\n", ragged::test::gpu_unavailable_reason());
      return ragged::test::kSkipReturnCode;
    }
    std::fprintf(stderr, "FAIL: the CUDA runtime cannot use the device (%s)\n", ragged::test::gpu_unavailable_reason());
    return 1;
  }
  const int failed = session.run();
  // Catch2 returns the failed assertions' count (at most 255): 77 of them must not read as ctest's skip.
  return failed == ragged::test::kSkipReturnCode ? 1 : failed;
}
