"""TF_CONFIG and the timeouts of a multi-worker run, checked before TensorFlow starts: one
UserError line for a TF_CONFIG that is not set or not JSON, has no cluster or task or more than
one chief, names a task that is not in the cluster (or by an index that is no integer), gives an
entry that is not an ASCII host:port or one host:port to two tasks, a task whose port is already
in use, and a timeout that is not a number of seconds. No TensorFlow: resnet_nobn/training/cluster.py
runs the cluster.
"""
import json
import os
import re
import socket

from resnet_nobn.errors import UserError, seconds_from_env

TIMEOUTS = {"RESNET_NOBN_CONNECT_TIMEOUT": 180.0, "RESNET_NOBN_HEARTBEAT_TIMEOUT": 30.0}  # seconds


def timeouts(environ=None):
    """(connect, heartbeat) timeouts in seconds from the environment, read when a multi-worker run
    starts; UserError naming the variable if one is not a positive number of seconds."""
    environ = os.environ if environ is None else environ
    return tuple(seconds_from_env(name, default, environ) for name, default in TIMEOUTS.items())


def parse_tf_config(text=None):
    """(cluster dict, task_type, task_id) from TF_CONFIG; UserError with the reason if malformed."""
    text = os.environ.get("TF_CONFIG", "") if text is None else text
    if not text.strip():
        example = ('{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
                   '"task": {"type": "worker", "index": 0}}')
        raise UserError(f"TF_CONFIG is not set: --strategy=multi_worker needs it in every worker's "
                        f"environment (e.g. export TF_CONFIG='{example}', "
                        "docs/imagenet_and_multiworker.md), or start the workers on this machine "
                        "with run/launch_local.py")
    try:
        cfg = json.loads(text)
    except ValueError as e:
        raise UserError(f"TF_CONFIG is not valid JSON ({e}): {text[:120]!r}") from None
    if not isinstance(cfg, dict):
        raise UserError(f"TF_CONFIG must be a JSON object with 'cluster' and 'task', got {text[:120]!r}")
    cluster, task = cfg.get("cluster"), cfg.get("task")
    example = ('e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
               '"task": {"type": "worker", "index": 0}}')
    if not isinstance(cluster, dict) or not cluster:
        raise UserError(f"TF_CONFIG has no 'cluster' mapping job names to host:port lists; {example}")
    for job, addresses in cluster.items():
        if job not in ("chief", "worker"):
            raise UserError(f"TF_CONFIG cluster job {job!r} is not supported by "
                            "MultiWorkerMirroredStrategy; use 'worker' (and optionally 'chief')")
        if not isinstance(addresses, list) or not addresses:
            raise UserError(f"TF_CONFIG cluster[{job!r}] must be a non-empty list of host:port")
        for a in addresses:
            _split_address(a, job)
    if len(cluster.get("chief", [])) > 1:  # TensorFlow's ValueError, after it loaded
        raise UserError(f"TF_CONFIG cluster['chief'] lists {len(cluster['chief'])} tasks; a "
                        "cluster has at most one chief: list the others under 'worker'")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise UserError(f"TF_CONFIG has no 'task' with 'type' and 'index' (which task this process "
                        f"is); {example}")
    task_type, task_id = task["type"], task["index"]
    if not isinstance(task_type, str) or task_type not in cluster:
        raise UserError(f"TF_CONFIG task type {task_type!r} is not a job of the cluster "
                        f"({', '.join(cluster)})")
    count = f"the cluster has {len(cluster[task_type])} {task_type} task(s): give 0 to " \
            f"{len(cluster[task_type]) - 1}"
    if isinstance(task_id, str):
        raise UserError(f"TF_CONFIG task index {task_id!r} is a string; give a number ({count})")
    if not isinstance(task_id, int) or isinstance(task_id, bool):
        raise UserError(f"TF_CONFIG task index {task_id!r} is not an integer ({count})")
    if not 0 <= task_id < len(cluster[task_type]):
        raise UserError(f"TF_CONFIG task index {task_id!r} is out of range: {count}")
    seen = {}
    for job, addresses in cluster.items():
        for i, a in enumerate(addresses):
            if a in seen:  # two tasks cannot listen on one port: the second would wait for good
                raise UserError(f"TF_CONFIG lists {a} twice ({seen[a]} and {job} {i}); give each "
                                "task a host:port of its own")
            seen[a] = f"{job} {i}"
    return cluster, task_type, task_id


# A host name (RFC 1123 labels), an IPv4 address or an [IPv6] address, in ASCII: what TensorFlow's
# gRPC server takes.
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
                   r"|\[[0-9A-Fa-f:.]+\]")


def _split_address(address, job="?"):
    """(host, port) of a TF_CONFIG entry; UserError naming what is wrong with it."""
    said = f"TF_CONFIG cluster[{job!r}] entry {address!r}"
    if not isinstance(address, str):
        raise UserError(f"{said} is not a \"host:port\" string")
    if "://" in address or "/" in address:
        raise UserError(f"{said} is a URL; give host:port only (e.g. 10.0.0.1:12345)")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port:
        raise UserError(f"{said} is not host:port (e.g. 10.0.0.1:12345)")
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise UserError(f"{said}: the port {port!r} is not a number 1 to 65535 in ASCII digits")
    if not _HOST.fullmatch(host):
        raise UserError(f"{said}: {host!r} is not a host name or IP address (ASCII letters, "
                        "digits, '-' and '.'; an IPv6 address in [ ])")
    return host.strip("[]"), int(port)


def this_task():
    """(cluster dict, task_type, task_id) from TF_CONFIG (`parse_tf_config`), this task's port
    checked free (`check_port_free`): what a multi-worker run checks before TensorFlow starts."""
    cluster, task_type, task_id = parse_tf_config()
    check_port_free(cluster[task_type][task_id])
    return cluster, task_type, task_id


def check_port_free(address):
    """UserError if this task's port cannot be bound (another process listens on it)."""
    _, port = _split_address(address)
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        try:
            # SO_REUSEADDR: a port left in TIME_WAIT by a killed worker is free for its restart.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
        except OSError as e:
            if family == socket.AF_INET6 and e.errno in (97, 99):  # no IPv6 here
                continue
            raise UserError(f"port {port} of this task ({address}) is in use ({e.strerror}); stop "
                            "the process using it or give this task another port in TF_CONFIG") from None
        finally:
            s.close()
