"""One training run: the trainer (trainer.py), its compiled steps (steps.py), which checkpoint
(checkpoints.py), the run directory (rundir.py), what is recorded (monitor.py), and where it
trains (cluster.py, multiworker.py)."""
