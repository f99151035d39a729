"""H2Tune ServerApp (hf_ext.h2tune.server_app)."""

from hf_ext.h2tune import server_app as _impl

app = _impl.app
