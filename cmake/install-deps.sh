#!/bin/sh
# Installs the Debian 12 packages kvroute needs, skipping those already
# present. Safe to run repeatedly.
#
#   sh cmake/install-deps.sh        what the README's two commands need: the
#                                   library, its tests and the examples
#   sh cmake/install-deps.sh --ci   also what the other CI legs and the
#                                   benchmarks need
#
# Why each package:
#   g++ cmake ninja-build pkg-config        the build
#   libabsl-dev                             the library's one dependency
#   libfmt-dev catch2                       the tests and examples
#   nlohmann-json3-dev                      JSON in the simulator and the HTTP router
#   libsimdjson-dev                         the HTTP router's fast paths for chat
#                                           bodies and workers' replies: parsing
#                                           them is the largest single part of
#                                           the router's own work per request,
#                                           and simdjson validates as strictly
#                                           as nlohmann at a fraction of the
#                                           cost, where a hand-written scanner
#                                           would be new untested parsing of
#                                           untrusted input
#   zlib1g-dev                              gzip traces in the simulator
#   libboost1.81-dev                        the HTTP router example: Boost.Beast
#                                           and Asio, an established asynchronous
#                                           HTTP/1.1 stack (timeouts, streaming,
#                                           many connections on few threads),
#                                           which a hand-written server would
#                                           have to reinvent
#   python3-dev pybind11-dev                the Python module (python/): the
#                                           interpreter's headers, and pybind11
#                                           for the binding instead of
#                                           hand-written CPython C-API code
#   python3-pytest                          the Python module's tests
#   libhiredis-dev                          kvroute::redis, the Redis transport for
#                                           router replicas: Redis's own C client
#                                           (RESP parsing, timeouts, unix sockets),
#                                           not a hand-written protocol client
#   redis-server                            the tests of kvroute::redis, which start
#                                           their own server on a unix socket. The
#                                           package enables a system service: this
#                                           script disables it again where systemd
#                                           runs (nothing here needs it)
#   python3-pip python3-venv                pip install . of the module without
#   python3-setuptools python3-wheel        network access (docs/python.md)
# With --ci:
#   clang clang-format clang-tidy           the clang leg, the fuzz preset, lint
#   libclang-rt-14-dev                      the sanitizer and libFuzzer runtimes
#   libbenchmark-dev                        the bench preset (Google Benchmark)
#   wrk                                     the router's overhead benchmark
#   nginx-light                             that benchmark's reference: the same
#                                           load through a mature C reverse
#                                           proxy, in the same run. The package
#                                           enables a web server on port 80:
#                                           this script disables it again where
#                                           systemd runs (the benchmark starts
#                                           its own, on a free port)
#   prometheus                              promtool, which checks the metrics
#                                           exposition. Debian ships it only
#                                           with the Prometheus server, whose
#                                           service the package enables: this
#                                           script disables it again where
#                                           systemd runs.
set -eu

packages="g++ cmake ninja-build pkg-config libabsl-dev libfmt-dev catch2 nlohmann-json3-dev libsimdjson-dev zlib1g-dev libboost1.81-dev python3-dev pybind11-dev python3-pytest libhiredis-dev redis-server python3-pip python3-venv python3-setuptools python3-wheel"
ci_packages="clang clang-format clang-tidy libclang-rt-14-dev libbenchmark-dev prometheus wrk nginx-light"

case "${1:-}" in
  "") ;;
  --ci) packages="$packages $ci_packages" ;;
  *) echo "install-deps: unknown option '$1' (usage: sh cmake/install-deps.sh [--ci])" >&2; exit 2 ;;
esac

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
  # shellcheck disable=SC2086 # $missing is a list of package names
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
  # package:service, for the packages that enable a service on install
  for pair in prometheus:prometheus redis-server:redis-server nginx-light:nginx; do
    package=${pair%%:*}
    service=${pair#*:}
    case "$missing " in
      *" $package "*)
        if command -v systemctl > /dev/null 2>&1 && [ -d /run/systemd/system ]; then
          $sudo systemctl disable --now "$service" > /dev/null 2>&1 || true
        fi
        ;;
    esac
  done
fi
