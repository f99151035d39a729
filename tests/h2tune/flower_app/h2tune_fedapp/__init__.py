"""H2Tune Flower app (re-exports hf_ext.h2tune's apps)."""
