"""The input of a run: CIFAR (cifar.py) and ImageNet (imagenet.py) through tfds, synthetic data,
and a prepared tfds directory checked (tfds_dir.py) and downloaded (download.py)."""
