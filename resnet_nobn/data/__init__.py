"""The input of a run: the dataset table (datasets.py) and your own images' layout
(image_folder.py), both read before TensorFlow loads; CIFAR (cifar.py) and ImageNet
(imagenet.py) through tfds, an image folder's pipeline (folder_input.py), synthetic data, and a
prepared tfds directory checked (tfds_dir.py) and downloaded (download.py)."""
