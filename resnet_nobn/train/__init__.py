"""One training run: the trainer (trainer.py), the hub that sequences it, and its spokes: the run
directory read once (rundir.py) and the start decided from it (resume.py, rollback.py), the
compiled steps (steps.py), checkpoints (checkpoints.py), results.json (results.py), and where it
trains (cluster.py, tf_config.py, multiworker.py)."""
