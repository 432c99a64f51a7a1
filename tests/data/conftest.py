"""Shared by the data tests: an environment without network."""
import os

import pytest

from tests.helpers import no_network_env


@pytest.fixture
def no_network():
    """This environment, with every HTTP(S) request sent to a local port that refuses connections
    (tests.helpers.no_network_env): no download can succeed, whatever this machine's network."""
    with no_network_env() as proxies:
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
        yield {k: v for k, v in {**env, **proxies}.items() if v is not None}
