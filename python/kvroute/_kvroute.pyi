"""Type stubs of kvroute's extension module (re-exported by kvroute)."""

import os
from types import TracebackType
from typing import Any, Iterable, Literal, Mapping, Sequence, TypedDict, Union

__version__: str
POLICIES: tuple[str, ...]
BRANCHES: tuple[str, ...]
SIM_POLICIES: tuple[str, ...]
SIM_GENERATORS: tuple[str, ...]
_build: str  # the build type and compiler

_Text = Union[str, bytes]
_Headers = Union[Mapping[_Text, _Text], Iterable[tuple[_Text, _Text]]]

class _WorkerDict(TypedDict, total=False):
    url: str
    model: str
    healthy: bool

_WorkerSpec = Union[str, _WorkerDict]

class Worker:
    """A worker as Router.workers() saw it (a copy)."""

    @property
    def url(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def healthy(self) -> bool: ...
    @property
    def in_flight(self) -> int: ...
    @property
    def in_flight_tokens(self) -> int: ...
    @property
    def processed(self) -> int: ...

class Selection:
    """One routing decision; false when no worker could be chosen."""

    def __bool__(self) -> bool: ...
    @property
    def url(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def branch(self) -> str: ...
    @property
    def reason(self) -> Literal["none", "no_workers", "no_healthy_workers", "policy_miss"]: ...
    @property
    def claimed(self) -> int: ...
    @property
    def dispatched(self) -> bool: ...

class Dispatch:
    """One request in flight; a context manager that ends the load on exit."""

    def __enter__(self) -> "Dispatch": ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]: ...
    def release(self) -> None: ...
    def release_tokens(self) -> None: ...
    def set_tokens(self, tokens: int) -> None: ...
    @property
    def active(self) -> bool: ...
    @property
    def tokens(self) -> int: ...
    @property
    def url(self) -> str | None: ...

class Router:
    """One routing policy over workers named by URL (see help(kvroute.Router))."""

    def __init__(
        self,
        flags: Sequence[_Text] = (),
        *,
        workers: Iterable[_WorkerSpec] | None = None,
        policy: str = ...,
        cache_threshold: float = ...,
        balance_abs_threshold: int = ...,
        balance_rel_threshold: float = ...,
        eviction_interval: int = ...,
        eviction_interval_secs: int = ...,
        max_tree_size: int = ...,
        max_idle_secs: int = ...,
        assignment_mode: Literal["random", "min_load", "min_group"] = ...,
        prefix_token_count: int = ...,
        prefix_hash_load_factor: float = ...,
        bucket_adjust_interval_secs: int = ...,
        bounded_load_factor: float = ...,
        queue_weight: float = ...,
        chars_per_token: float = ...,
        seed: int = ...,
    ) -> None: ...
    @staticmethod
    def from_args(args: Sequence[_Text]) -> tuple["Router", list[str]]: ...
    @property
    def policy(self) -> str: ...
    @property
    def config(self) -> dict[str, Any]: ...
    def add_worker(self, url: _Text, *, model: _Text = "", healthy: bool = True) -> None: ...
    def add_workers(self, workers: Iterable[_WorkerSpec]) -> None: ...
    def remove_worker(self, url: _Text) -> None: ...
    def set_healthy(self, url: _Text, healthy: bool = True) -> None: ...
    def workers(self) -> list[Worker]: ...
    def __len__(self) -> int: ...
    def __contains__(self, url: object) -> bool: ...
    def select(
        self,
        text: _Text | None = None,
        *,
        tokens: Iterable[int] | None = None,
        headers: _Headers | None = None,
        model: _Text | None = None,
        exclude: Iterable[_Text] | None = None,
    ) -> Selection: ...
    def dispatch(self, selection: Selection, *, prompt_tokens: int | None = None) -> Dispatch: ...
    def predicted_tokens(self, selection: Selection, *, prompt_tokens: int | None = None) -> int: ...
    def report_cached(
        self, selection: Selection, cached_tokens: int, *, prompt_tokens: int | None = None
    ) -> int: ...
    def maintain(self) -> None: ...
    def metrics(self) -> str: ...

class PolicyResult(TypedDict, total=False):
    name: str
    hit_rate: float
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    imbalance: float
    select_us_mean: float
    select_us_p99: float
    branches: dict[str, int]
    # per_request=True only:
    ttft_s: list[float]
    server: list[int]
    cached_tokens: list[int]
    claimed_tokens: list[int]
    branch: list[str]
    prefill_tokens: list[int]

class SimResult(TypedDict):
    trace: str
    servers: int
    requests: int
    ideal_hit_rate: float
    policies: dict[str, PolicyResult]

def simulate(
    trace: Union[str, os.PathLike[str], Iterable[Mapping[str, Any]]] = "chat",
    *,
    policies: Sequence[str] | str | None = None,
    n: int = 0,
    speed: float = 1.0,
    chars_per_token: float = 4.0,
    per_request: bool = False,
    servers: int = ...,
    cache_tokens: int = ...,
    prefill_rate: float = ...,
    tpot: float = ...,
    seed: int = ...,
    lp_queue_weight: float = ...,
    lp_tree_scale: float = ...,
    ca_recency_shift: int = ...,
    ca_feedback_slack_stamps: int = ...,
    ca_tenant_rule: Literal["least_loaded", "most_recent"] = ...,
) -> SimResult: ...
def _bench_loop(
    router: Router,
    texts: list[str],
    rounds: int,
    mode: Literal["select", "router_select", "select_dispatch"] = "select",
) -> float: ...
