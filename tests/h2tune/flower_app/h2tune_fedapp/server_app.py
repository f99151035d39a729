"""H2Tune ServerApp (the shipped `hf_ext.h2tune.server_app`, unchanged: the server has no test hooks; the test-only
run-config keys of the client app are removed before the shipped parser sees them)."""

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from h2tune_fedapp.client_app import split_test_keys
from hf_ext.h2tune.task import server_main

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    _, shipped = split_test_keys(context)
    server_main(grid, shipped)
