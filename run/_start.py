"""What every entry point under run/ does first, before absl or TensorFlow loads: the repository
on sys.path, TensorFlow's C++ start-up lines silenced, and Ctrl-C while the modules load said in
one line with exit status 130 (cli.main_wrapper takes over once the flags are parsed)."""
import os
import signal
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
signal.signal(signal.SIGINT, lambda *_: (print("interrupted", file=sys.stderr), os._exit(130)))
