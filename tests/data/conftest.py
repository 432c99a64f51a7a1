"""Shared by the data tests: an environment without network."""
import os
import socket

import pytest


@pytest.fixture
def no_network():
    """Environment in which every HTTP(S) request goes to a local port that refuses connections
    (a socket bound there but not listening): no download can succeed, whatever this machine's
    network."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    proxy = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
    env.update({k: proxy for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")})
    try:
        yield env
    finally:
        sock.close()
