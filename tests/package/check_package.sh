#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then configures, builds and runs an outside
# project that does find_package(atomr) and links atomr::atomr.
#   check_package.sh <atomr build dir> <scratch dir>
set -euo pipefail
build=$1 scratch=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$scratch"
mkdir -p "$scratch"
step() {
  local name=$1
  shift
  if ! "$@" >"$scratch/$name.log" 2>&1; then
    echo "check_package: step '$name' failed: $*" >&2
    cat "$scratch/$name.log" >&2
    exit 1
  fi
}
step install cmake --install "$build" --prefix "$scratch/prefix"
step configure cmake -S "$here/consumer" -B "$scratch/build" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix"
step build cmake --build "$scratch/build"
"$scratch/build/consumer"
