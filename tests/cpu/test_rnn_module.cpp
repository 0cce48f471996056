// The owning Rnn layer checks its description and PyTorch-ordered parameters on the host, before allocating
// anything, and names what is wrong (so these run without a device).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ragged/rnn_module.h"

using namespace ragged;

namespace {

RnnDesc lstm_desc() {
  RnnDesc d;
  d.mode = RnnMode::kLstm;
  d.input_size = 3;
  d.hidden_size = 4;
  d.num_layers = 2;
  d.bidirectional = true;
  return d;
}

// The message of the Error that constructing Rnn<float>(desc, params) throws ("" if none is thrown), which must
// carry `status`.
std::string construction_error(const RnnDesc& desc, const std::vector<std::vector<float>>& params,
                               Status status = Status::kInvalidArgument) {
  try {
    Rnn<float> rnn(desc, params);
  } catch (const Error& e) {
    INFO(e.what());
    REQUIRE(e.status() == status);
    return e.what();
  }
  return "";
}

// PyTorch's flat parameter list for `desc`, every tensor of the right size.
std::vector<std::vector<float>> torch_parameters(const RnnDesc& desc) {
  const std::int64_t G = rnn_gate_count(desc.mode), H = desc.hidden_size, S = rnn_state_size(desc);
  std::vector<std::vector<float>> params;
  for (std::int64_t l = 0; l < desc.num_layers; ++l)
    for (int d = 0; d < rnn_directions(desc); ++d) {
      params.emplace_back(G * H * rnn_layer_input_size(desc, l), 0.5f);
      params.emplace_back(G * H * S, 0.5f);
      if (desc.bias) {
        params.emplace_back(G * H, 0.5f);
        params.emplace_back(G * H, 0.5f);
      }
      if (desc.proj_size > 0) params.emplace_back(desc.proj_size * H, 0.5f);
    }
  return params;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("Rnn rejects a parameter list of the wrong length, naming the expected count", "[rnn][module][errors]") {
  const RnnDesc desc = lstm_desc();  // 2 layers x 2 directions x 4 tensors
  auto params = torch_parameters(desc);
  REQUIRE(params.size() == 16);
  params.pop_back();
  const std::string message = construction_error(desc, params);
  INFO(message);
  REQUIRE(contains(message, "15 parameter tensors"));
  REQUIRE(contains(message, "takes 16"));
}

TEST_CASE("Rnn names the first parameter of the wrong size by its PyTorch name", "[rnn][module][errors]") {
  RnnDesc desc = lstm_desc();
  auto params = torch_parameters(desc);
  params[5].pop_back();  // layer 0, reverse direction: weight_hh_l0_reverse
  std::string message = construction_error(desc, params);
  INFO(message);
  REQUIRE(contains(message, "parameter 5 (weight_hh_l0_reverse)"));
  REQUIRE(contains(message, "expected 64"));

  desc.proj_size = 2;  // weight_hr follows the biases; layer 1 reads 2 directions x P = 4 inputs
  params = torch_parameters(desc);
  REQUIRE(params.size() == 20);
  params[19].push_back(1.0f);
  message = construction_error(desc, params);
  INFO(message);
  REQUIRE(contains(message, "parameter 19 (weight_hr_l1_reverse)"));

  desc = lstm_desc();
  desc.bias = false;
  desc.mode = RnnMode::kGru;
  params = torch_parameters(desc);
  REQUIRE(params.size() == 8);
  params[6].clear();  // layer 1, reverse: weight_ih_l1_reverse [3 * 4, 2 * 4]
  message = construction_error(desc, params);
  INFO(message);
  REQUIRE(contains(message, "parameter 6 (weight_ih_l1_reverse) has 0 elements, expected 96"));
}

TEST_CASE("Rnn rejects a malformed description before allocating", "[rnn][module][errors]") {
  RnnDesc desc = lstm_desc();
  desc.hidden_size = 0;
  REQUIRE(contains(construction_error(desc, {}), "hidden_size"));
  desc = lstm_desc();
  desc.proj_size = 4;  // must be < hidden_size
  REQUIRE(contains(construction_error(desc, {}), "proj_size = 4 must be smaller than hidden_size = 4"));
  desc = lstm_desc();
  desc.mode = RnnMode::kGru;
  desc.proj_size = 2;
  REQUIRE(contains(construction_error(desc, {}), "only supported for LSTM"));
  // The same checks as rnn_forward's: an unknown mode (else taken for a 4-gate non-LSTM), and sizes whose
  // parameter counts G * H * input_size would overflow the expected sizes they are compared with.
  desc = lstm_desc();
  desc.mode = static_cast<RnnMode>(7);
  REQUIRE(contains(construction_error(desc, {}), "desc.mode = 7 is unknown"));
  desc = lstm_desc();
  desc.hidden_size = std::int64_t{1} << 33;
  desc.input_size = std::int64_t{1} << 33;
  REQUIRE(contains(construction_error(desc, {}, Status::kSizeOverflow), "must each fit int"));
}
