"""A cluster of training workers on this machine, on loopback (run/launch_local.py): free ports,
each worker's TF_CONFIG and environment, the workers started, watched (the first to fail, whichever
it is, named and the others stopped), and stopped on SIGTERM or Ctrl-C (a preemption: every worker
saves a checkpoint at a common step, TERM_GRACE seconds before SIGKILL; a second Ctrl-C kills
them at once). Each worker's output lines are prefixed with `[worker i]`.

Distributed TensorFlow is unauthenticated: anyone who can reach these ports can talk to the
workers. Loopback is private to this machine; on a cluster use a trusted network only.
"""
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

WORKERS_PER_CPU = 4     # each worker is a whole TensorFlow process: more only thrash the machine
TERM_GRACE = 300.0      # seconds the workers get to save a preemption checkpoint (SIGTERM, Ctrl-C)


def max_workers():
    """How many workers one machine may start: WORKERS_PER_CPU per CPU, at least 8."""
    return max(8, WORKERS_PER_CPU * (os.cpu_count() or 1))


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (free now; a race with other programs is possible)."""
    sockets, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


def tf_config(ports, index):
    """TF_CONFIG (a JSON string) of worker `index` of a loopback cluster on `ports`."""
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


def worker_env(ports, index, threads=None):
    """The environment of worker `index`; `threads` limits TensorFlow's thread pools."""
    env = dict(os.environ, TF_CONFIG=tf_config(ports, index), PYTHONUNBUFFERED="1")
    if threads:
        env.update(TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS=str(threads),
                   OMP_NUM_THREADS=str(threads))
    return env


def start_worker(command, ports, index, threads=None, cpus=None, **popen_kwargs):
    """Popen of worker `index` running `command` (a list: script and flags) with this Python."""
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    return subprocess.Popen([sys.executable] + list(command), env=worker_env(ports, index, threads),
                            cwd=popen_kwargs.pop("cwd", None), preexec_fn=preexec, **popen_kwargs)


def _pump(stream, prefix):
    for line in iter(stream.readline, b""):
        sys.stdout.write(f"{prefix} {line.decode(errors='replace')}")
        sys.stdout.flush()
    stream.close()


def status_of(returncode):
    """(exit status as the shell reports it, how the worker ended in words): a worker killed by
    signal N (Popen's returncode -N) has status 128+N, and the signal is named."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return 128 - returncode, f"was killed by {name} (status {128 - returncode})"
    return returncode, f"exited with status {returncode}"


class _Signals:
    """SIGINT (Ctrl-C) and SIGTERM, noted as they come (`got`) instead of raised: the launcher
    checks for them between waits, so that a second Ctrl-C while it stops the workers is one
    line, never a KeyboardInterrupt traceback. A SIGTERM after the first signal is not noted: a
    scheduler may send it to the launcher twice (directly and to its process group), and the
    workers' checkpoint must not be cut short."""

    def __init__(self):
        self.got = []
        signal.signal(signal.SIGINT, lambda *_: self.got.append(signal.SIGINT))
        signal.signal(signal.SIGTERM, lambda *_: self.got.append(signal.SIGTERM) if not self.got
                      else None)


def _watch(procs):
    """A queue that gets each worker's index as it exits, in the order they exit (one thread per
    worker waits for it), so that the first worker to fail is the one named, whichever it is."""
    exited = queue.Queue()

    def wait(i, p):
        p.wait()
        exited.put(i)
    for i, p in enumerate(procs):
        threading.Thread(target=wait, args=(i, p), daemon=True).start()
    return exited


def stop(procs, grace=10.0, signals=None, handled=0):
    """SIGTERM to the workers still running, SIGKILL after `grace` seconds, or at once when
    `signals` holds more than the `handled` signals already said (a second Ctrl-C); waits for
    all."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.time() + grace
    while any([p.poll() is None for p in procs]) and time.time() < deadline:
        if signals and len(signals.got) > handled:
            print("[launch] interrupted; killing the workers (SIGKILL)", flush=True)
            break
        time.sleep(0.1)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def launch(command, num_workers, threads_per_worker=0, pin_cpus=False, timeout=0):
    """Runs `command` (a list: the training script and its flags) as `num_workers` workers on
    127.0.0.1, worker 0 the chief, each with `threads_per_worker` TensorFlow threads (0:
    TensorFlow's default), worker i pinned to CPU i mod the number of CPUs with `pin_cpus`, all
    stopped after `timeout` seconds (0: no limit). Returns the launcher's exit status: the first
    failed worker's (128+N for one killed by signal N), 124 on the timeout, 128+N on signal N to
    the launcher, else 0."""
    signals = _Signals()
    ports = free_ports(num_workers)
    ncpu = os.cpu_count() or 1
    print(f"[launch] {num_workers} workers on 127.0.0.1 ports {ports}; worker 0 is the chief",
          flush=True)
    procs, pumps = [], []
    t0 = time.time()
    for i in range(num_workers):
        p = start_worker(command, ports, i, threads_per_worker or None,
                         {i % ncpu} if pin_cpus else None,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        procs.append(p)
        t = threading.Thread(target=_pump, args=(p.stdout, f"[worker {i}]"), daemon=True)
        t.start()
        pumps.append(t)
    exited, done = _watch(procs), 0
    status, grace, handled = 0, 10.0, 0  # a failed worker's peers: SIGKILL after 10 s
    while True:
        if signals.got:  # Ctrl-C is a preemption too: every worker saves a checkpoint and stops
            print("[launch] interrupted; stopping the workers, which save a checkpoint and stop "
                  "(Ctrl-C again kills them)" if signals.got[0] == signal.SIGINT else
                  "[launch] SIGTERM: forwarded to the workers, which save a checkpoint and stop",
                  flush=True)
            status, grace, handled = 128 + signals.got[0], TERM_GRACE, 1
            break
        if done == len(procs):
            break
        if timeout and time.time() - t0 > timeout:
            print(f"[launch] timeout after {timeout:.0f} s; stopping the workers", flush=True)
            status = 124
            break
        try:
            i = exited.get(timeout=0.2)
        except queue.Empty:
            continue
        done += 1
        if signals.got:  # a signal came while this worker exited (Ctrl-C in a terminal reaches
            continue     # every worker too): the signal is said
        if procs[i].returncode != 0:  # the first worker to fail, whichever it is
            status, said = status_of(procs[i].returncode)
            print(f"[launch] worker {i} {said}; stopping the others", flush=True)
            break
    stop(procs, grace, signals, handled)
    for t in pumps:
        t.join(timeout=5)
    print(f"[launch] done, status {status}", flush=True)
    return status
