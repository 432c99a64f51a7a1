"""What every entry point under run/ does first, before absl or TensorFlow loads: the repository
on sys.path, TensorFlow's C++ log silenced up to its ERROR lines (TF_CPP_MIN_LOG_LEVEL=3 unless
the user sets it: the project says each failure in its own `error:` line, and a worker that dies
or hangs would otherwise have its peers print TensorFlow's abort lines before it), Ctrl-C while
the modules load said in one line with exit status 130 (cli.main_wrapper takes over once the
flags are parsed), an address-space limit (`ulimit -v`) too small for TensorFlow said in one
line (exit status 2) instead of TensorFlow's abort ("Fatal Python error" and a C stack dump) or
ImportError, and Keras' backend pinned to TensorFlow (`KERAS_BACKEND=tensorflow`, which also
overrides ~/.keras/keras.json): the trainer, its checkpoints and the export are TensorFlow's, so
a shell's KERAS_BACKEND=jax or torch (the library takes them: docs/backends.md) is said in one
`warning:` line and not used, where it ended in a traceback."""
import os
import resource
import signal
import sys

# The smallest `ulimit -v` with which a tiny run (run/cifar_train.py --use_synthetic_data
# --widths=8,8,8 --stem_width=8 --blocks_per_stage=1 --batch_size=8 --train_steps=2) started and
# trained, measured on a 2-CPU Linux machine with TensorFlow 2.21 (2,500,000 KiB failed, 1,000,000
# and 2,000,000 KiB did not even import TensorFlow). More CPUs need more (a stack per thread).
MIN_ADDRESS_SPACE_KIB = 3_000_000

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_backend = os.environ.get("KERAS_BACKEND", "tensorflow")
if _backend.strip().lower() != "tensorflow":
    print(f"warning: KERAS_BACKEND={_backend} ignored: {os.path.basename(sys.argv[0])} runs on "
          "TensorFlow (the library's network runs on other backends: docs/backends.md)",
          file=sys.stderr, flush=True)
os.environ["KERAS_BACKEND"] = "tensorflow"  # before Keras loads
signal.signal(signal.SIGINT, lambda *_: (print("interrupted", file=sys.stderr), os._exit(130)))

_limit = resource.getrlimit(resource.RLIMIT_AS)[0]
if _limit != resource.RLIM_INFINITY and _limit < MIN_ADDRESS_SPACE_KIB * 1024:
    print(f"error: the address-space limit (ulimit -v) is {_limit // 1024:,} KiB; TensorFlow needs "
          f"at least {MIN_ADDRESS_SPACE_KIB:,} KiB to start: raise it (ulimit -v unlimited)",
          file=sys.stderr, flush=True)
    sys.exit(2)
