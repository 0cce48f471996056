// Catch2 main for CPU tests: no CUDA runtime call happens at start-up.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
