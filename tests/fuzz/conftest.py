"""The fuzz modules make scratch folders with `tempfile.mkdtemp` (a hypothesis example cannot take `tmp_path`): they
go under pytest's own temporary root, which pytest prunes, instead of accumulating in the system's."""

import tempfile

import pytest


@pytest.fixture(scope="session", autouse=True)
def _scratch_under_pytest_root(tmp_path_factory):
    before = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("fuzz_scratch"))
    yield
    tempfile.tempdir = before
