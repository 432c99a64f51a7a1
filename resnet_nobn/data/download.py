"""Every network wait of a tfds download bounded, and the proxy it went through named.

tfds downloads with `requests` and no timeout: behind a proxy (or a server) that accepts the
connection and never answers, it waits for ever. `bounded()` gives each of tfds' requests a
timeout of `timeout()` seconds for connecting (the proxy's answer to CONNECT included) and for
each read. With the retries resnet_nobn/data/prepare.py allows (DOWNLOAD_RETRIES), a CIFAR
download behind a proxy that never answers ends after about six such waits and TensorFlow's
start-up. `explain(text, seconds)` names the proxy the host of a failed request goes through,
and the bound, for the user's one line.
"""
import contextlib
import os
import re

from resnet_nobn.errors import seconds_from_env

TIMEOUT = 10.0  # seconds: each network wait of a download (measured: 70 s in all, not 120)
TIMEOUT_VARIABLE = "RESNET_NOBN_DOWNLOAD_TIMEOUT"  # overrides TIMEOUT


def timeout(environ=None):
    """The seconds of TIMEOUT_VARIABLE, else TIMEOUT; UserError if it is not a positive number."""
    return seconds_from_env(TIMEOUT_VARIABLE, TIMEOUT, os.environ if environ is None else environ)


@contextlib.contextmanager
def bounded(seconds):
    """Inside the block, every request of tfds' downloader has a timeout of `seconds`."""
    # tfds has no public setting of a request's timeout (DownloadConfig has none), so its one
    # function that opens a request is wrapped, and restored after the block
    from tensorflow_datasets.core.download import downloader
    original = downloader._open_with_requests

    def with_timeout(url, **kwargs):
        return original(url, timeout=seconds, **kwargs)

    downloader._open_with_requests = with_timeout
    try:
        yield
    finally:
        downloader._open_with_requests = original


def explain(text, seconds):
    """What the one line adds to a failed download's requests error message `text`: the proxy
    the host it names (host='H') goes through, and the bound if a wait timed out; or ''."""
    waited = f"; no answer within {seconds:g} s" if re.search(r"(?i)timed? ?out", text) else ""
    return proxy_of(text) + waited


def proxy_of(text):
    """' through the proxy P (VARIABLE)' for the host named in a requests error message `text`
    (host='H') if the environment sends requests to it through a proxy; else ''."""
    import requests
    host = re.search(r"host='([^']+)'", text)
    scheme = "http" if re.search(r"\bHTTPConnectionPool", text) else "https"
    if not host:
        return ""
    proxies = requests.utils.get_environ_proxies(f"{scheme}://{host.group(1)}")
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy:
        return ""
    names = [f"{scheme.upper()}_PROXY", f"{scheme}_proxy", "ALL_PROXY", "all_proxy"]
    variable = next((v for v in names if os.environ.get(v) == proxy), "the environment")
    return f" through the proxy {proxy} ({variable})"
