#!/bin/bash
# build-interposer.sh <output .so>: builds libgpushare-cuda.so without CMake, with the flags of
# interpose/CMakeLists.txt (every interpose/*.cc; `cc` links it as C, without the C++ runtime).
# For GPU machines where the library carried from the CPU machine cannot load.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
I=$ROOT/interpose
exec cc -std=c++20 -O2 -fPIC -shared -fno-exceptions -fno-rtti -fno-threadsafe-statics \
  -fvisibility=hidden -I"$ROOT" -include "$I/glibc_compat.h" "$I"/*.cc -static-libgcc \
  -Wl,-z,defs -Wl,-Bsymbolic -Wl,--version-script="$I/exports.map" -Wl,--no-as-needed -ldl \
  -lpthread -o "$1"
