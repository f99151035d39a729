"""Flower glue shared by the federated methods: tensors <-> `ArrayRecord`s, reply checks, FedAvg, and runners.

Three ways to run a `ServerApp` with its `ClientApp`s, all returning the same thing (see *Results* below):

* [`run_local`] / [`LocalGrid`]: in-process, deterministic, no Ray and no sockets; for fast tests.
* [`run_simulation`]: Flower's simulation engine (`flwr[simulation]`, Ray).
* [`run_deployment`] / [`LoopbackFederation`]: Flower's deployment engine, a SuperLink and N SuperNodes on
  127.0.0.1 driven by `flwr run`.

**Results.** The result of a run is the `ServerApp`'s `context.state` (a `RecordDict`) when the run ends. The
in-process runners read it directly. On the deployment engine the `ServerApp` runs in another process, so a
`ServerApp` must end its `main` with [`save_result`], which stores records in `context.state` and, when the runner
asked for it (environment variable `HF_EXT_FLWR_RESULT_DIR`), writes `context.state` to a file the runner reads back.
Calling [`save_result`] last makes an app behave the same on all three runners.

Bad input from a federated peer raises `ValueError` naming what is wrong (missing record, metric or key, shape or
dtype mismatch), so a method can refuse an update rather than silently average garbage. A server checks every reply
against its *own* reference and identifies senders by the transport's node id, never by a claimed name
([`reply_arrays`], [`reply_metric`]); [`require_rounds`] fails a run that aggregated too few rounds.

**One API per concern** (methods build on these and nothing else):

* [`GuardedStrategy`] (`strategy.py`): the one base strategy. FedAvg with the reply guard as hooks
  (`decode_reply` → `screen` → `aggregate_updates` → `round_metrics`): each reply checked against the server's own
  reference, a round nonce per node against replays ([`guarded_reply`] on the client side), robust screening
  ([`robust_screen`]: distance to the reference vs the round's median and the reference's norm), and every rejected
  or failed reply named by transport node id in the round's [`RoundRecord`]. Its module docstring says what the
  guard cannot detect.
* [`FlowerRunConfig`] (`run_config.py`): the one run-config parser: a frozen dataclass parsed from the flat Flower
  run config with strict types, **unknown keys refused by name**.
* [`reply_arrays`] / [`reply_metric`] (`guard.py`): the one reply-check API the hooks use.
"""

from hf_ext.core.federated.deployment import LoopbackFederation, _alive, _descendants, run_deployment  # noqa: F401 (used by the tests)
from hf_ext.core.federated.guard import (
    DEFAULT_MAX_ABS,
    TooFewRounds,
    array_problem,
    reply_arrays,
    reply_content,
    reply_metric,
    require_rounds,
    sender,
)
from hf_ext.core.federated.local import ClientAppError, LocalGrid, run_local
from hf_ext.core.federated.records import (
    adapter_state_to_arrays,
    arrays_to_state_dict,
    load_adapter_arrays,
    state_dict_to_arrays,
    weighted_average,
)
from hf_ext.core.federated.results import (
    RESULT_DIR_ENV,
    Record,  # noqa: F401 (public alias, not in __all__, as before)
    load_result,
    save_result,
)
from hf_ext.core.federated.run_config import FlowerRunConfig, convert_value, parse_run_config, run_config_keys
from hf_ext.core.federated.simulation import run_simulation
from hf_ext.core.federated.strategy import (
    GuardedStrategy,
    RoundRecord,
    Update,
    guarded_reply,
    instruction_nonce,
    robust_screen,
)

__all__ = [
    "FlowerRunConfig",
    "GuardedStrategy",
    "RoundRecord",
    "Update",
    "convert_value",
    "guarded_reply",
    "instruction_nonce",
    "parse_run_config",
    "robust_screen",
    "run_config_keys",
    "DEFAULT_MAX_ABS",
    "TooFewRounds",
    "array_problem",
    "reply_arrays",
    "reply_content",
    "reply_metric",
    "require_rounds",
    "ClientAppError",
    "LocalGrid",
    "LoopbackFederation",
    "RESULT_DIR_ENV",
    "adapter_state_to_arrays",
    "arrays_to_state_dict",
    "load_adapter_arrays",
    "load_result",
    "run_deployment",
    "run_local",
    "run_simulation",
    "save_result",
    "sender",
    "state_dict_to_arrays",
    "weighted_average",
]
