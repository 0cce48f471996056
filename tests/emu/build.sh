#!/usr/bin/env bash
# Builds GPU test programs against the kernel emulator (docs/emulator.md): copies the sources into
# $BUILD/tree, rewrites each kernel launch (k<<<grid, block, shared, stream>>>(args)) into a call of
# emu::launch_body with a lambda that holds the arguments' values, taken at the launch as CUDA does, and calls
# k with them (so template arguments are deduced as nvcc does), each
# `extern __shared__` array into the emulator's dynamic shared memory, each static `__shared__` variable into a
# reference to the running block's own storage (emu::static_shared), the inline PTX outside the replaced
# headers (ex2.approx) into its emulation, compiles every translation unit as host C++ with cuda_emu.h
# force-included, and links each program named against the emulated runtime instead of libcudart: a GPU test
# program (tests/gpu/<name>.cu) or ragged_bench, the benchmark program (bench/, with Google Benchmark).
#   tests/emu/build.sh BUILD_DIR test_segment_reduce test_segment_softmax ... [ragged_bench]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(mkdir -p "$1" && cd "$1" && pwd)"
shift
programs=("$@")
# The CUDA headers (types, half / bfloat16, cuBLAS declarations): next to nvcc, on PATH or in /usr/local/cuda.
nvcc_path="$(command -v nvcc || true)"
if [[ -z "$nvcc_path" && -x /usr/local/cuda/bin/nvcc ]]; then nvcc_path=/usr/local/cuda/bin/nvcc; fi
cuda_include="${CUDA_INCLUDE:-$(dirname "$(dirname "${nvcc_path:-/usr/local/cuda/bin/nvcc}")")/include}"
if [[ ! -f "$cuda_include/cuda_runtime.h" ]]; then
  echo "emu/build.sh: no cuda_runtime.h in $cuda_include (set CUDA_INCLUDE)" >&2
  exit 1
fi
tree="$build/tree"
jobs="${EMU_JOBS:-$(nproc)}"

rm -rf "$tree"
mkdir -p "$tree" "$build/obj"
cp -r "$root/include" "$root/kernels" "$root/src" "$root/tests" "$root/bench" "$tree/"
# The headers that wrap PTX (mma.sync, ldmatrix, cp.async, griddepcontrol) are replaced by emulated ones.
cp "$here/device/mma_sync.cuh" "$here/device/async_copy.cuh" "$here/device/grid_dependency.cuh" "$tree/kernels/"
find "$tree" \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' -o -name '*.cpp' \) -print0 |
  xargs -0 perl -0pi -e '
    s{^([ \t]*)((?:if \([^\n]*?\) |else )?)([^\n;]*?)<<<([^\n]*?)>>>\(([^;]*?)\);}{
      my ($indent, $kernel, $config, $args) = ($1 . $2, $3, $4, $5);
      my $named = "[&](auto... emu_x) -> decltype(::emu::kernel_pointer($kernel, emu_x...)) { " .
                  "return ::emu::kernel_pointer($kernel, emu_x...); }";
      $indent . "::emu::launch_body(\"" . ($kernel =~ s/"/\\"/gr) . "\", " .
        "::emu::config_named($named, ::emu::config($config)), " .
        "[=, emu_args = std::make_tuple($args)] { std::apply([&](const auto&... a) { $kernel(a...); }, emu_args); });"
    }gme;
    s{asm\("ex2\.approx\.ftz\.f32 %0, %1;\\n" : "=f"\((\w+)\) : "f"\((\w+)\)\);}{$1 = ::emu::ex2_approx_ftz($2);}g;
    s{extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([^\n;\[]*?)\s*(\w+)\[\];}{$1* $2 = reinterpret_cast<$1*>(::emu::dynamic_shared());}g;
    s{^([ \t]*)__shared__[ \t]+(?:__align__\(\d+\)[ \t]+)?([^\n;\[=,]*?)[ \t]*(\w+)((?:\[[^\n;]*\])?);}{$1static char ${3}_emu_tag; auto& $3 = *reinterpret_cast<$2 (*)$4>(::emu::static_shared(&${3}_emu_tag, sizeof($2$4)));}gm;
  '
# A `__shared__` left in code (not in a comment) is a declaration the rewrites above did not take (another form:
# `static __shared__`, several names): as cuda_emu.h's plain `static` it would be one variable for every block.
leftover="$(find "$tree" -path "$tree/tests/emu" -prune -o \
                 \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' -o -name '*.cpp' \) -print0 |
  xargs -0 perl -0ne 's{/\*.*?\*/}{}gs; s{//[^\n]*}{}g; print "$ARGV\n" if /\b__shared__\b/')"
if [[ -n "$leftover" ]]; then
  echo "emu/build.sh: a __shared__ declaration it cannot rewrite (one name a line, starting it:" \
       "[extern] __shared__ T name[...];) in:" >&2
  echo "$leftover" >&2
  exit 1
fi

# -fno-tree-vrp: g++ 12.2 at -O2 miscompiled segment_softmax's scalar row pass without it (host_compiler_check.cpp,
# which must pass with these flags before anything is built).
optimize=(-O2 -fno-tree-vrp -g -mfma -ffp-contract=fast -fno-strict-aliasing)
# A GPU faults on an access that is not aligned to its size (a 16-byte vector load from an address 4 bytes past
# alignment: "misaligned address"); x86 does not. UBSan's alignment check stops the program there instead, naming
# the source line and the type. EMU_UBSAN names the checks the kernels' sources (kernels/*.cu) are compiled with
# (comma-separated; empty: no UBSan). The default also stops at a shift by the width or more (x86 masks the
# count, a GPU's shift clamps it: the two give different bits), an index past a fixed-size array (registers,
# static shared memory) and a signed overflow (it wraps on the GPU; g++ may assume it does not happen). On the
# kernels alone they cost nothing measurable: a whole run.sh took 29.8 min with alignment and 29.8 with all four,
# against 31.4 without (2026-12-06, 2 cores). EMU_UBSAN_ALL=1 puts them on every source: with `alignment` alone
# that took CI's emulated tests from 36 to 58 min.
ubsan_checks="${EMU_UBSAN-alignment,shift-exponent,bounds,signed-integer-overflow}"
ubsan=()
[[ -n "$ubsan_checks" ]] && ubsan=(-fsanitize="$ubsan_checks" -fno-sanitize-recover="$ubsan_checks")
# EMU_COVERAGE=1 compiles the library's sources (kernels/, src/) with gcov's counters; their .gcda files land next
# to the objects in $BUILD/obj, summed over every program run. tests/emu/coverage.sh lists the lines no test ran.
coverage=()
[[ "${EMU_COVERAGE:-0}" == 1 ]] && coverage=(--coverage)
flags=(-std=c++17 "${optimize[@]}" -pthread -include "$here/cuda_emu.h"
       -I"$here/shim" -I"$tree/include" -I"$tree/kernels" -I"$tree/src" -I"$tree/tests" -I"$tree" -I"$cuda_include")
g++ -std=c++17 "${optimize[@]}" "$here/host_compiler_check.cpp" -o "$build/host_compiler_check"
if ! "$build/host_compiler_check" > /dev/null; then
  "$build/host_compiler_check" >&2 || true
  echo "emu/build.sh: $(g++ --version | head -1) miscompiles tests/emu/host_compiler_check.cpp with: ${optimize[*]}" >&2
  exit 1
fi

# The library as an archive (a program pulls in only what it calls): every source of src/ and kernels/ (CUB and
# Thrust calls go to the host stand-ins in shim/). Then the emulated runtime, the GPU tests' main and the
# benchmark program's sources (its suites, timers, cases and main).
lib_sources=("$tree"/src/*.cpp "$tree"/kernels/*.cu)
runtime_sources=("$here/emu_scheduler.cpp" "$here/emu_cuda_api.cpp" "$here/emu_cublas.cpp")
test_main_sources=("$tree/tests/common/test_util.cpp" "$tree/tests/common/gpu_main.cpp")
bench_sources=("$tree"/bench/bench_*.cu "$tree"/bench/bench_*.cpp "$tree"/bench/common/*.cu "$tree"/bench/common/*.cpp
               "$tree/bench/attention_cases.cpp" "$tree/bench/convert_cases.cpp")

# src/segment_reduce.cpp and kernels/segment_reduce.cu must not share an object name, nor bench/common/x.cpp
# and tests/common/x.cpp.
obj_of() {
  local src
  for src in "$@"; do
    local rel="${src#"$tree"/}"
    [[ "$rel" == "$src" ]] && rel="emu/$(basename "$src")"
    echo "$build/obj/$(echo "${rel%.*}" | tr / _).o"
  done
}
# Compiles sources into $build/obj, $jobs at a time; fails if any compile fails.
compile_all() {
  local pids=() src
  for src in "$@"; do
    while (( $(jobs -rp | wc -l) >= jobs )); do sleep 0.2; done
    local checked=()
    [[ "$src" == "$tree"/kernels/*.cu || "${EMU_UBSAN_ALL:-0}" == 1 ]] && checked=("${ubsan[@]}")
    [[ "$src" == "$tree"/kernels/*.cu || "$src" == "$tree"/src/*.cpp ]] && checked+=("${coverage[@]}")
    g++ "${flags[@]}" "${checked[@]}" -x c++ -c "$src" -o "$(obj_of "$src")" &
    pids+=($!)
  done
  local pid failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return $failed
}

sources=("${lib_sources[@]}" "${runtime_sources[@]}")
tests=()
bench=0
for p in "${programs[@]}"; do
  if [[ "$p" == ragged_bench ]]; then bench=1; else tests+=("$p"); fi
done
(( ${#tests[@]} > 0 )) && sources+=("${test_main_sources[@]}")
for t in "${tests[@]}"; do sources+=("$tree/tests/gpu/$t.cu"); done
(( bench )) && sources+=("${bench_sources[@]}")
compile_all "${sources[@]}"
rm -f "$build/libragged_emu.a"
ar rcs "$build/libragged_emu.a" $(obj_of "${lib_sources[@]}")
for t in "${tests[@]}"; do
  g++ -pthread "${ubsan[@]}" "${coverage[@]}" -o "$build/emu_$t" "$(obj_of "$tree/tests/gpu/$t.cu")" \
    $(obj_of "${test_main_sources[@]}") \
    $(obj_of "${runtime_sources[@]}") "$build/libragged_emu.a"
done
# Suites register themselves from static initialisers, so their objects are linked directly, not from an archive.
if (( bench )); then
  g++ -pthread "${ubsan[@]}" "${coverage[@]}" -o "$build/emu_ragged_bench" $(obj_of "${bench_sources[@]}") \
    $(obj_of "${runtime_sources[@]}") \
    "$build/libragged_emu.a" -lbenchmark
fi
