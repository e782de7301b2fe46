"""Shared fixtures of kvroute's Python tests.

The tests import the module from a build tree: ctest sets PYTHONPATH to
<build>/python; by hand,

    cmake --build build/dev --target kvroute_python
    PYTHONPATH=build/dev/python /usr/bin/python3 -m pytest python/tests
"""

import pathlib

import pytest

try:
    import kvroute  # noqa: F401
except ImportError as e:  # pragma: no cover - a message for a wrong setup
    raise ImportError(
        "kvroute is not importable: build it (cmake --build build/dev --target kvroute_python) "
        "and set PYTHONPATH=build/dev/python, or pip install it"
    ) from e

REPO = pathlib.Path(__file__).resolve().parents[2]
URLS = [f"http://10.0.0.{i}:30000" for i in range(1, 5)]


@pytest.fixture
def urls():
    return list(URLS)


@pytest.fixture
def make_router():
    """make_router(policy, **options): a Router over the four URLS."""

    def make(policy="cache_aware", workers=URLS, **options):
        return kvroute.Router(policy=policy, workers=list(workers), **options)

    return make


def in_flight(router):
    """{url: requests in flight} of every worker."""
    return {w.url: w.in_flight for w in router.workers()}
