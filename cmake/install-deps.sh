#!/bin/sh
# Installs the Debian 12 packages kvroute's build, tests, benchmarks and
# examples need, skipping those already present. Safe to run repeatedly.
set -eu

# prometheus brings promtool, which checks the rendered metrics; libboost1.81-dev
# (Boost.Beast/Asio, an established asynchronous HTTP stack) and
# nlohmann-json3-dev serve the HTTP router example, wrk its overhead benchmark
# (and zlib1g-dev the simulator's gzip input); clang, clang-format, clang-tidy
# and libclang-rt-14-dev serve the clang, fuzz and lint legs.
packages="g++ cmake ninja-build pkg-config libabsl-dev libfmt-dev catch2 libbenchmark-dev nlohmann-json3-dev libboost1.81-dev wrk prometheus zlib1g-dev clang clang-format clang-tidy libclang-rt-14-dev"

missing=""
for p in $packages; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -n "$missing" ]; then
  echo "kvroute: installing$missing"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi
