"""The generator families of `hf-ext reproduce orca`: the spurious-shortcut generator (no premise: the control) and
the CTR-reliance generator (ORCA's premise built in), behind one interface the sweep reads (fields, post-click
fields, vocabulary sizes, the splits of one cell, the log and its exact oracle)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FAMILIES = ("spurious", "reliance")


@dataclass(frozen=True)
class Family:
    """One generator family.

    Args:
        name (`str`): `"spurious"` or `"reliance"`.
        field_names (`tuple[str, ...]`), post_click_fields (`tuple[str, ...]`): the model's fields and the masked
            ones.
        make_config (`Callable`): `(num_users, num_items, num_impressions, strength, seed) -> config`.
        test_config (`Callable`): `(config, num_impressions, seed, strength) -> config` of the same population.
        generate (`Callable`): `config -> datasets.Dataset`.
        oracle (`Callable`): `(config, columns) -> {"click_probs", "dt_probs"}`, the exact posterior.
        vocab_sizes (`Callable`): `config -> list[int]`.
        verdict_test (`str`): the test set the verdict rules read (`"shifted"` or `"iid"`).
        description (`str`): one line for results.json and the card.
    """

    name: str
    field_names: tuple[str, ...]
    post_click_fields: tuple[str, ...]
    make_config: Callable[..., Any]
    test_config: Callable[..., Any]
    generate: Callable[[Any], Any]
    oracle: Callable[[Any, Any], dict]
    vocab_sizes: Callable[[Any], list[int]]
    verdict_test: str
    description: str


def get_family(name: str) -> Family:
    """The [`Family`] called `name` (a `ValueError` names `--family` for anything else)."""
    if name == "spurious":
        from . import spurious_generator as g

        return Family(
            name="spurious",
            field_names=g.SPURIOUS_FIELD_NAMES,
            post_click_fields=g.SPURIOUS_POST_CLICK_FIELDS,
            make_config=lambda users, items, n, s, seed: g.SpuriousOrcaConfig(
                num_users=users, num_impressions=n, shortcut_strength=s, seed=seed
            ),
            test_config=g.shifted_test_config,
            generate=g.generate_spurious,
            oracle=g.oracle_posterior,
            vocab_sizes=g.spurious_vocab_sizes,
            verdict_test="shifted",
            description="spurious-shortcut generator (hf_ext.orca.spurious_generator): hidden clickbait seen through "
            "a noisy proxy, impulse noise shared by click and dwell; the control without the paper's premise",
        )
    if name == "reliance":
        from . import reliance_generator as g

        return Family(
            name="reliance",
            field_names=g.RELIANCE_FIELD_NAMES,
            post_click_fields=g.RELIANCE_POST_CLICK_FIELDS,
            make_config=lambda users, items, n, s, seed: g.RelianceOrcaConfig(
                num_users=users, num_items=items, num_impressions=n, shortcut_strength=s, seed=seed
            ),
            test_config=g.reliance_test_config,
            generate=g.generate_reliance,
            oracle=g.reliance_oracle,
            vocab_sizes=g.reliance_vocab_sizes,
            verdict_test="iid",
            description="CTR-reliance generator (hf_ext.orca.reliance_generator): click propensity from item bait and "
            "user x category affinity, moderate dwell from an item depth the click does not reveal; the paper's "
            "premise built in",
        )
    raise ValueError(f"--family must be one of {FAMILIES}, got {name!r}")


__all__ = ["FAMILIES", "Family", "get_family"]
