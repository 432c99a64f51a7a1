"""ImageNet (ILSVRC 2012) for Section 4.2: the dataset, its tfds input pipeline and the model.

The model. The paper trains "an all-convolutional variant of the 34-layer ResNet" with 35.7M
trainable parameters and does not say how it gets there. ResNet-34 (He et al. 2015) is a 7x7/2 conv,
a 3x3/2 max pool and stages of 3, 4, 6, 3 basic blocks of 64, 128, 256, 512 channels. Our variant:

  * stem: one standard 7x7/2 conv (He init), as in ResNet-34;
  * the max pool is replaced by stride 2 in the first block of stage 1 (all-convolutional; the
    shortcut there is the 2x2 average pool of the CIFAR model), so the feature maps are 112, 56,
    28, 14, 7 pixels as in ResNet-34;
  * 3, 4, 6, 3 identity-parameterized blocks `x + C2(ReLU(C1 x))` (32 residual convs, 33 convs in
    all), no normalization, residual convs N(0, sigma^2) with sigma = 1/(k^2 c);
  * every width scaled by 21/16: stem and stages 84, 168, 336, 672 channels; global average pool;
    fixed random projection 672 x 1000 (not trained).

Trainable parameters (all conv kernels): 36,336,636, 1.8% above the paper's 35.7M. At ResNet-34's
own widths the same network has 21,095,616; parameters grow with width^2, so matching 35.7M needs
a factor sqrt(35.7 / 21.1) = 1.30; 84 = 64 * 1.3125 is the nearest multiple of 4 (80 gives 32.96M,
88 gives 39.88M). `recipes.imagenet()` (resnet_nobn/recipes.py) holds these.

The data. tfds `imagenet2012`, prepared once from the two ILSVRC archives placed in tfds' manual
directory (`<data_dir>/downloads/manual/`; resnet_nobn/data/prepare.py). Training: each worker reads
its own subset of the 1,024 training files (`tfds.ReadConfig(input_context=...)`), shuffles, and
applies the standard augmentation: a random crop covering 8%-100% of the image with aspect ratio
3/4-4/3 (Inception / TF ResNet preprocessing), resized to 224x224, random horizontal flip.
Evaluation: resize the shorter side to 256 (224 / 0.875), central 224x224 crop. Pixels are scaled to
[0, 1] and normalised with the usual ImageNet channel mean and standard deviation.

Resuming. ImageNet is not held in memory, so the training stream is not a function of the step as
for CIFAR: a run resumed at step s reshuffles with a seed derived from (seed, s), so it does not
replay the first batches of the run. Evaluation is exact and deterministic: every worker reads the
validation split in order and keeps its contiguous part of every global batch (as for CIFAR); the
last global batch is padded with weight-0 examples.
"""
import tensorflow as tf

from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.data import prepare
from resnet_nobn.data.pipeline import Input, batch_and_prefetch, num_batches, pipeline_part

NAME = prepare.IMAGENET
INFO = DATASETS[NAME]

_MEAN = (0.485, 0.456, 0.406)
_STD = (0.229, 0.224, 0.225)
_EVAL_RESIZE = 256          # shorter side before the central 224 crop (224 / 0.875)
_SHUFFLE_BUFFER = 10_000    # images, per worker


def _normalize(image):
    image = tf.cast(image, tf.float32) / 255.0
    return (image - _MEAN) / _STD


def preprocess_train(encoded, seed, size=INFO.image_size):
    """Random resized crop (8-100% of the area, aspect 3/4-4/3) to size x size + random flip.

    Crops before decoding (`decode_and_crop_jpeg`), as the TF ResNet code does. `seed`: 2 ints.
    """
    seeds = tf.random.experimental.stateless_split(seed, 2)
    shape = tf.image.extract_jpeg_shape(encoded)
    begin, crop_size, _ = tf.image.stateless_sample_distorted_bounding_box(
        shape, bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
        seed=seeds[0], min_object_covered=0.1, aspect_ratio_range=(3 / 4, 4 / 3),
        area_range=(0.08, 1.0), max_attempts=10, use_image_if_no_bounding_boxes=True)
    y, x, _ = tf.unstack(begin)
    h, w, _ = tf.unstack(crop_size)
    image = tf.image.decode_and_crop_jpeg(encoded, tf.stack([y, x, h, w]), channels=3)
    image = tf.image.resize(image, [size, size], method="bilinear")
    image = tf.image.stateless_random_flip_left_right(image, seed=seeds[1])
    return _normalize(image)


def eval_shorter_side(size=INFO.image_size):
    """The shorter side evaluation resizes an image to before its central size x size crop."""
    return size * _EVAL_RESIZE / INFO.image_size


def preprocess_eval(encoded, size=INFO.image_size):
    """Resize the shorter side to 256/224 * size, then the central size x size crop."""
    image = tf.io.decode_jpeg(encoded, channels=3)
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    scale = eval_shorter_side(size) / tf.reduce_min(shape)
    new = tf.cast(tf.round(shape * scale), tf.int32)
    image = tf.image.resize(image, new, method="bilinear")
    top, left = (new[0] - size) // 2, (new[1] - size) // 2
    image = image[top:top + size, left:left + size]
    image = tf.ensure_shape(image, [size, size, 3])
    return _normalize(image)


class TfdsInput(Input):
    """ImageNet read through tfds."""

    def __init__(self, builder, seed, info=INFO, eval_split="validation", num_eval=None):
        """`num_eval`: size of `eval_split` (default: from the builder; tests with mock data,
        whose builder has no split sizes, pass it)."""
        self.builder, self.seed, self.info, self.eval_split = builder, seed, info, eval_split
        self._num_eval = num_eval or builder.info.splits[eval_split].num_examples

    def _read(self, split, read_config, shuffle_files):
        import tensorflow_datasets as tfds
        return self.builder.as_dataset(
            split=split, shuffle_files=shuffle_files, read_config=read_config,
            decoders={"image": tfds.decode.SkipDecoding()})

    def train_dataset(self, ctx: tf.distribute.InputContext, global_batch, start_step):
        import tensorflow_datasets as tfds
        # A resumed run reshuffles rather than replaying the first batches (see the docstring).
        seed = (self.seed * 1_000_003 + start_step) % (2 ** 31)
        worker_seed = seed + 7919 * ctx.input_pipeline_id
        read_config = tfds.ReadConfig(input_context=ctx, shuffle_seed=worker_seed,
                                      interleave_cycle_length=16, try_autocache=False)
        ds = self._read("train", read_config, shuffle_files=True).repeat()
        ds = ds.shuffle(_SHUFFLE_BUFFER, seed=worker_seed)
        ds = tf.data.Dataset.zip((ds, tf.data.Dataset.range(2 ** 62)))

        def load(example, i):
            image = preprocess_train(example["image"], tf.stack(
                [tf.constant(worker_seed, tf.int64), i]), self.info.image_size)
            return image, tf.cast(example["label"], tf.int32)

        return batch_and_prefetch(ds, load, ctx, global_batch)

    def num_eval_batches(self, global_batch):
        return num_batches(self._num_eval, global_batch)

    def eval_dataset(self, ctx: tf.distribute.InputContext, global_batch):
        """The validation split padded to whole global batches; padding has weight 0."""
        n = self._num_eval
        total = self.num_eval_batches(global_batch) * global_batch
        ds = self._read(self.eval_split, None, shuffle_files=False)
        ds = ds.map(lambda ex: (ex["image"], tf.cast(ex["label"], tf.int32), 1.0))
        first = ds.take(1)
        pad = first.map(lambda im, lab, w: (im, lab, 0.0)).repeat(total - n)
        ds = pipeline_part(ds.concatenate(pad), global_batch, ctx)  # before decoding

        def load(encoded, label, weight):
            return preprocess_eval(encoded, self.info.image_size), label, weight

        return batch_and_prefetch(ds, load, ctx, global_batch)


def make_input(cfg):
    """The ImageNet input of `cfg` (UserError naming the archives if they are missing)."""
    return TfdsInput(prepare.imagenet_builder(cfg.data_dir), cfg.seed)
