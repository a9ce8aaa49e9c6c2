"""Fixtures of the Python package's tests: one Sandlot for the whole run, as a
program would make it, from the environment (runtimes installed by tests/run.sh)."""

import pytest

import sandlot


@pytest.fixture(scope="session")
def host():
    with sandlot.Sandlot() as host:
        yield host


@pytest.fixture
def python(host):
    with host.session("python", backend="wasm") as session:
        yield session
