# Sourced by scripts/gpu-check.sh and scripts/gpu-profile.sh (bash, set -euo pipefail): the start both share.
#   gpu_script_start "$0" "$@"   checks for the one OUTDIR argument (usage and exit 2 otherwise), creates it
#                                 and sets `out` to its absolute path; puts the CUDA tools on PATH (a bare
#                                 machine may not have them there)
#   configure_command            sets the array `configure`: the Release, Ninja configure of "$build" for
#                                 "$archs", with .deps/usr (shared/gpu-deps.sh) on CMAKE_PREFIX_PATH if present

gpu_script_start() {
  local script="$1"
  shift
  if [ $# -ne 1 ]; then
    echo "usage: $script OUTDIR" >&2
    exit 2
  fi
  mkdir -p "$1"
  out=$(cd "$1" && pwd)
  local dir
  for dir in "${CUDA_HOME:-}/bin" /usr/local/cuda/bin; do
    if [ -d "$dir" ] && [[ ":$PATH:" != *":$dir:"* ]]; then PATH="$PATH:$dir"; fi
  done
  export PATH
}

configure_command() {
  configure=(cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$archs")
  if [ -d .deps/usr ]; then configure+=("-DCMAKE_PREFIX_PATH=$PWD/.deps/usr"); fi
}
