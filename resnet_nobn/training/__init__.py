"""One training run: the trainer (trainer.py), the hub that sequences it, and its spokes: the run
directory read once, written whole and locked (rundir.py), the start decided from it (resume.py),
the compiled steps (steps.py), checkpoints (checkpoints.py), results.json (results.py), and where
it trains (cluster.py, its TF_CONFIG read before TensorFlow: tf_config.py; several workers on
this machine: local_cluster.py); recovery from a divergence, from the NaN to the run going on
with its advice (recovery.py).

The library's `resnet_nobn.train(cfg)` is `trainer.train`.
"""
