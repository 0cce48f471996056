// Uses the installed ragged package: host offsets and the planner run anywhere; the device path runs when a
// GPU is present.
#include <ragged/ragged.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  const std::vector<std::int64_t> lengths = {3, 0, 5, 2};
  std::vector<std::int32_t> offsets(lengths.size() + 1);
  ragged::throw_if_error(ragged::lengths_to_offsets_host(lengths.data(), 4, offsets.data()));
  if (offsets.back() != 10) {
    std::printf("consumer: wrong offsets\n");
    return 1;
  }
  const std::int32_t bad[] = {0, 4, 2};
  if (ragged::validate_offsets_host(bad, 2, 10) != ragged::Status::kInvalidOffsets) {
    std::printf("consumer: bad offsets not rejected\n");
    return 1;
  }
  std::printf("consumer: host API ok (%s)\n", ragged::last_error_message());
  // The error helpers whose messages are strings.
  if (ragged::fail(ragged::Status::kInvalidArgument, std::string("consumer's own message")) !=
          ragged::Status::kInvalidArgument ||
      std::string(ragged::last_error_message()) != "consumer's own message") {
    std::printf("consumer: fail() did not record the message\n");
    return 1;
  }
  ragged::CheckResult check;
  check.code = (std::uint64_t{3} << 8) | static_cast<unsigned>(ragged::Status::kInvalidOffsets);
  if (ragged::describe(check) != "invalid offsets at offsets[3]") {
    std::printf("consumer: describe() gave '%s'\n", ragged::describe(check).c_str());
    return 1;
  }

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("consumer: no CUDA device, device path not run\n");
    return 0;
  }
  std::vector<float> values(10);
  for (int i = 0; i < 10; ++i) values[i] = static_cast<float>(i + 1);
  auto tensor = ragged::RaggedTensor<float, std::int32_t>::from_host(values, lengths);
  auto padded = tensor.to_padded(-1.0f);
  const std::vector<float> host = padded.data.to_host();
  // Row 2 (length 5) starts at padded element 2 * 5 and holds values 4..8.
  if (padded.max_len != 5 || host[10] != 4.0f || host[5] != -1.0f) {
    std::printf("consumer: device conversion wrong\n");
    return 1;
  }
  std::printf("consumer: device path ok\n");
  return 0;
}
