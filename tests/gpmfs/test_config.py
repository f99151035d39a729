import pytest

from hf_ext.gpmfs.config import GPMFSConfig


def test_defaults_and_round_trip():
    cfg = GPMFSConfig(budget=7, theta=0.3, k_personal=2)
    d = cfg.to_dict()
    assert d["model_type"] == "hf_ext_gpmfs"
    assert GPMFSConfig.from_dict(d) == cfg
    assert GPMFSConfig.from_dict(GPMFSConfig().to_dict()) == GPMFSConfig()


@pytest.mark.parametrize(
    "field,value",
    [
        ("alpha", -1.0),
        ("beta", float("nan")),
        ("gamma", "x"),
        ("lam", float("inf")),
        ("k_neighbors", 0),
        ("k_neighbors", 2.5),
        ("sigma", 0.0),
        ("fit_intercept", 1),
        ("max_iter", 0),
        ("tol", 0.0),
        ("eps", -1e-8),
        ("budget", 0),
        ("budget", 1.5),
        ("budget", 0.0),
        ("budget", True),
        ("theta", -0.1),
        ("theta", 1.01),
        ("k_personal", -1),
        ("k_personal", 1.5),
        ("equal_budget", "yes"),
        ("seed", 0.5),
    ],
)
def test_bad_field_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        GPMFSConfig(**{field: value})


def test_budget_resolution_and_budget_larger_than_d():
    assert GPMFSConfig(budget=0.2).budget_for(103) == 21
    assert GPMFSConfig(budget=0.001).budget_for(103) == 1  # at least one feature
    assert GPMFSConfig(budget=5).budget_for(5) == 5
    with pytest.raises(ValueError, match="budget"):
        GPMFSConfig(budget=6).budget_for(5)


def test_personal_cap():
    cfg = GPMFSConfig(k_personal=0.25)
    assert cfg.personal_cap_for(20) == 5
    assert GPMFSConfig(k_personal=50).personal_cap_for(20) == 19  # the global core keeps one feature
    assert GPMFSConfig(k_personal=0).personal_cap_for(20) == 0


def test_from_dict_rejects_unknown_and_foreign_model_type():
    with pytest.raises(ValueError, match="unknown"):
        GPMFSConfig.from_dict({"alpha": 1.0, "alhpa": 2.0})
    with pytest.raises(ValueError, match="model_type"):
        GPMFSConfig.from_dict({"model_type": "bert"})
