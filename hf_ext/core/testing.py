"""Helpers shared by the tests of every method: the contract fixture each method provides, and offline switches.

A method's `contract` entry point (see [`~hf_ext.core.registry.MethodSpec`]) returns a [`ContractFixture`]; the
shared contract test (`tests/test_method_contract.py`) runs the checks of the method's kind against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .offline import OFFLINE_ENV, set_offline_env  # noqa: F401  (re-exported for tests)
from .wheel import build_wheel  # noqa: F401  (re-exported for tests)


@dataclass
class ContractFixture:
    """What the shared contract test needs from one method, whatever its kind.

    Args:
        make_config (`Callable[[], Any]`): a tiny config (a `PreTrainedConfig` or a dataclass with
            `to_dict`/`from_dict`).
        make_artifact (`Callable[[Any], Any]`): builds the model / adapter / estimator / table builder from a config.
        example_inputs (`Callable[[], Any]`): inputs for [`outputs`].
        outputs (`Callable[[Any, Any], Mapping[str, Any]]`): named arrays or tensors computed from the artifact and
            the inputs in eval mode; compared before and after a save/load round trip.
        save (`Callable[[Any, Path], None]`): writes the artifact to a folder (defaults to `save_pretrained`).
        load (`Callable[[Path], Any]`): reads it back (for model kinds, through the registered Auto class).
        config_from_dict (`Callable[[dict], Any]`, *optional*): inverse of `config.to_dict()`; defaults to
            `type(config).from_dict`.
        make_trainer (`Callable[[Any, Path], Any]`, *optional*): a `transformers.Trainer` set up for one step on
            tiny data (kinds `model` and `adapter`).
        trainable_state (`Callable[[Any], Mapping[str, Any]]`, *optional*): the trainable parameters compared
            before and after the step (defaults to `requires_grad` parameters).
        fit (`Callable[[Any], Any]`, *optional*): fits an estimator on tiny data (kind `estimator`).
        fitted_state (`Callable[[Any], Mapping[str, Any]]`, *optional*): the state `fit` must set (kind
            `estimator`).
    """

    make_config: Callable[[], Any]
    make_artifact: Callable[[Any], Any]
    example_inputs: Callable[[], Any]
    outputs: Callable[[Any, Any], Mapping[str, Any]]
    save: Callable[[Any, Path], None] | None = None
    load: Callable[[Path], Any] | None = None
    config_from_dict: Callable[[dict], Any] | None = None
    make_trainer: Callable[[Any, Path], Any] | None = None
    trainable_state: Callable[[Any], Mapping[str, Any]] | None = None
    fit: Callable[[Any], Any] | None = None
    fitted_state: Callable[[Any], Mapping[str, Any]] | None = None

    def save_artifact(self, artifact: Any, path: Path) -> None:
        if self.save is not None:
            self.save(artifact, path)
        else:
            artifact.save_pretrained(path)

    def load_artifact(self, path: Path) -> Any:
        if self.load is None:
            raise ValueError("ContractFixture.load is required: load through the method's registered Auto class")
        return self.load(path)

    def config_roundtrip(self, config: Any) -> Any:
        from_dict = self.config_from_dict or type(config).from_dict
        return from_dict(config.to_dict())

    def trainable(self, artifact: Any) -> dict[str, np.ndarray]:
        if self.trainable_state is not None:
            state = self.trainable_state(artifact)
        else:
            state = {n: p for n, p in artifact.named_parameters() if p.requires_grad}
        return {k: to_numpy(v).copy() for k, v in state.items()}


def to_numpy(value: Any) -> np.ndarray:
    """Detached float64 numpy copy of a tensor, array or scalar (for comparisons in tests)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        if value.dtype.is_floating_point:
            value = value.double()
        value = value.numpy()
    return np.asarray(value)


def comparable_config_dict(config: Any) -> dict:
    """`config.to_dict()` without the fields that legitimately change on a save/load (library versions)."""
    d = dict(config.to_dict())
    for key in ("transformers_version", "_name_or_path", "architectures", "auto_map", "dtype", "torch_dtype"):
        d.pop(key, None)
    return d


def causal_lm_logits(model: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """`ContractFixture.outputs` for a causal LM (or a PEFT model around one): its logits in eval mode, no grad."""
    import torch

    model.eval()
    with torch.no_grad():
        return {"logits": model(**inputs).logits}


@dataclass
class BadInput:
    """One bad-input case of the fuzz suite (`tests/fuzz/`): a call that must fail with a clear error.

    Args:
        name (`str`): what is wrong with the input, e.g. `"empty batch"`, `"labels out of range"`.
        call (`Callable[[], Any]`): makes the call with the bad input (builds whatever it needs itself).
        error (`type[BaseException]` or `tuple`, *optional*, defaults to `ValueError`): the error type expected.
        match (`str`): a regular expression the message must match (case-insensitive); it names the problem, e.g. the
            field (`"input_ids"`) and the allowed range.
    """

    name: str
    call: Callable[[], Any]
    match: str
    error: Any = ValueError


def classify_bad_input(case: BadInput, timeout_s: float = 60.0) -> tuple[str, str]:
    """Runs `case` and says how it failed: `("clear", msg)` when the expected error type names the problem,
    `("deep", msg)` for any other exception (a crash from inside torch/numpy, or an unclear message),
    `("silent", "")` when nothing was raised, `("hang", "")` past `timeout_s` (the call is left running in a daemon
    thread). Used by the fuzz tests and `scripts/fuzz_report.py`."""
    import re
    import threading

    outcome: dict[str, BaseException | None] = {}

    def target():
        try:
            case.call()
            outcome["error"] = None
        except BaseException as exc:  # noqa: BLE001  (classifying every failure is the point)
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return "hang", ""
    exc = outcome["error"]
    if exc is None:
        return "silent", ""
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, case.error) and re.search(case.match, str(exc), flags=re.IGNORECASE):
        return "clear", message
    return "deep", message


def assert_clear_error(case: BadInput, timeout_s: float = 60.0) -> None:
    """Fails the test unless `case` raises its expected error with a message that names the problem."""
    verdict, message = classify_bad_input(case, timeout_s)
    assert verdict == "clear", (
        f"{case.name}: {verdict} ({message or 'no error raised'}); expected {case.error} matching {case.match!r}"
    )


def venv_reusing_site_packages(root: Path) -> Path:
    """A fresh venv under `root` whose site-packages sees this interpreter's packages except hf_ext, through a
    `.pth` line to a filtered view of symbolic links (seconds, not the minutes of a real install); returns its
    python. Installing the hf_ext wheel there with `--no-deps` then gives an hf_ext that knows nothing of the
    checkout."""
    import subprocess
    import sys
    import sysconfig

    view = root / "site-view"
    view.mkdir(parents=True)
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "hf_ext" in entry.name or entry.name.startswith("__editable__"):
            continue
        (view / entry.name).symlink_to(entry)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (Path(site) / "test-venv-packages.pth").write_text(str(view) + "\n")
    return python
