"""H2Tune ClientApp (hf_ext.h2tune.client_app)."""

from hf_ext.h2tune import client_app as _impl

app = _impl.app
