"""Starts N training workers on this machine, on loopback, each with its own TF_CONFIG.

    python run/launch_local.py --num_workers=2 -- run/imagenet_train.py --use_synthetic_data \
        --widths=8,8,16,16 --stem_width=8 --blocks_per_stage=1 --batch_size=8 --train_steps=20 \
        --model_dir=/tmp/mw

For trying multi-worker training out and for tests; a real cluster runs the training command once
per machine (docs/imagenet_and_multiworker.md). Every worker gets a free 127.0.0.1 port and the
same cluster; worker 0 is the chief. Each output line is prefixed with `[worker i]`. The first
worker to fail, whichever it is, is named and the others are stopped; the launcher exits with its
status (128+N for a worker killed by signal N, as the shell says it), or 0 when all succeed.
SIGTERM or Ctrl-C is a preemption: every worker saves a checkpoint at a common step and stops
(TERM_GRACE seconds before SIGKILL); a second Ctrl-C kills them at once. Exit status 143 or 130.
Re-running the same command resumes from the last checkpoint in --model_dir.

Distributed TensorFlow is unauthenticated: anyone who can reach these ports can talk to the
workers. Loopback is private to this machine; on a cluster use a trusted network only.
"""
import argparse
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


class _OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line on stderr and exit status 2, as in every entry point (argparse's
    own error prints the usage first)."""

    def error(self, message):
        print(f"error: {message} (--help lists the flags)", file=sys.stderr, flush=True)
        sys.exit(2)


def main(argv=None):
    parser = _OneLineParser(
        description=__doc__.split("\n\n")[0], allow_abbrev=False,  # --num_worker: a typo
        usage="%(prog)s [--num_workers=N] [--threads_per_worker=T] [--pin_cpus] [--timeout=S] "
              "-- SCRIPT [FLAGS...]")
    parser.add_argument("--num_workers", type=int, default=2, metavar="N",
                        help="how many workers to start, worker 0 the chief (default: 2; at most "
                             f"{max_workers()} on this machine)")
    parser.add_argument("--threads_per_worker", type=int, default=0, metavar="T",
                        help="limit each worker's TensorFlow thread pools (0: TensorFlow's default)")
    parser.add_argument("--pin_cpus", action="store_true",
                        help="pin worker i to CPU i mod the number of CPUs")
    parser.add_argument("--timeout", type=float, default=0, metavar="S",
                        help="stop all workers after this many seconds (0: no limit)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- then the training script and its flags")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the training command after --, e.g. -- run/imagenet_train.py "
                     "--use_synthetic_data")
    if not 1 <= args.num_workers <= max_workers():
        print(f"error: --num_workers={args.num_workers}: give 1 to {max_workers()} on this machine "
              f"({WORKERS_PER_CPU} per CPU, each worker is a whole TensorFlow process); a real "
              "cluster runs one worker per machine (docs/imagenet_and_multiworker.md)",
              file=sys.stderr, flush=True)
        return 2

    signals = _Signals()
    ports = free_ports(args.num_workers)
    ncpu = os.cpu_count() or 1
    print(f"[launch] {args.num_workers} workers on 127.0.0.1 ports {ports}; worker 0 is the chief",
          flush=True)
    procs, pumps = [], []
    t0 = time.time()
    for i in range(args.num_workers):
        p = start_worker(command, ports, i, args.threads_per_worker or None,
                         {i % ncpu} if args.pin_cpus else None,
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
        if args.timeout and time.time() - t0 > args.timeout:
            print(f"[launch] timeout after {args.timeout:.0f} s; stopping the workers", flush=True)
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


if __name__ == "__main__":
    sys.exit(main())
