"""Ablation studies: the grid and its run directories (grid.py), running it (launcher.py), the
TensorBoard HParams (hparams.py), the table (report.py) and plot (curves.py); runs continued with
their retry advice are read back through resnet_nobn/training/recovery.py."""
