"""The datasets a run can train on: one table of their facts, which every module that names a
dataset reads (its classes, image size, recipe and entry point, what an export serves).

CIFAR-10/100 and ImageNet are Table 2's datasets. Fashion-MNIST is not the paper's: it is the real
images this project trains on offline (Debian ships it: resnet_nobn/data/fashion_mnist.py). It is
a dataset of its own, trained by the CIFAR recipe and network: its 28x28 grey images are
zero-padded to 32x32 and copied to 3 channels by the input pipeline (resnet_nobn/data/cifar.py
`to_network`), so every record of such a run says `fashion_mnist`, never CIFAR.

`image_folder` is your own images: a directory ROOT of ROOT/train/LABEL/* and ROOT/test/LABEL/*
(resnet_nobn/data/image_folder.py), trained by the CIFAR recipe and network, each image resized to
32x32x3 as it is read. Its classes are facts of ROOT, not of this table (`num_classes` None): the
run reads them once and records them in its config.json (TrainConfig.class_names).

No TensorFlow: the command line is checked against this table before TensorFlow loads.
"""
import dataclasses


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """One dataset. `image_size`: the network's input, image_size x image_size x 3. `stored`: the
    images as the dataset holds them and an export serves them, (height, width, channels) uint8
    pixels; None for ImageNet, whose JPEG files of every size its input decodes and crops.
    `recipe`: the function of resnet_nobn/recipes.py, and run/<recipe>_train.py, that train it.
    `label_names`: the classes of a genuine copy, in order (tfds' builder code does not name
    CIFAR's: it reads them from the downloaded files): how a tfds directory holding another
    dataset under this name is told (resnet_nobn/data/tfds_dir.py `provenance`). `folder`: a
    directory of image files (`image_folder`), not a tfds dataset: its classes and sizes (None
    here) are the directory's."""
    name: str
    title: str
    num_classes: int | None
    image_size: int
    num_train: int | None
    num_eval: int | None
    recipe: str
    stored: tuple | None
    label_names: tuple = ()
    folder: bool = False

    @property
    def entry_point(self):
        """The training command of the dataset's recipe."""
        return f"run/{self.recipe}_train.py"

    @property
    def pixels(self):
        """Whether its images are uint8 pixel arrays (held in memory by the CIFAR input, served
        as arrays by an export), not encoded files (ImageNet)."""
        return self.stored is not None


CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                 "truck")
CIFAR100_NAMES = tuple("""
apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus butterfly
camel can castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup
dinosaur dolphin elephant flatfish forest fox girl hamster house kangaroo keyboard lamp lawn_mower
leopard lion lizard lobster man maple_tree motorcycle mountain mouse mushroom oak_tree orange
orchid otter palm_tree pear pickup_truck pine_tree plain plate poppy porcupine possum rabbit raccoon
ray road rocket rose sea seal shark shrew skunk skyscraper snail snake spider squirrel streetcar
sunflower sweet_pepper table tank telephone television tiger tractor train trout tulip turtle
wardrobe whale willow_tree wolf woman worm""".split())

FASHION_MNIST_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                       "Sneaker", "Bag", "Ankle boot")  # tfds' fashion_mnist builder's

DATASETS = {d.name: d for d in (
    DatasetInfo("cifar10", "CIFAR-10", 10, 32, 50_000, 10_000, "cifar", (32, 32, 3),
                CIFAR10_NAMES),
    DatasetInfo("cifar100", "CIFAR-100", 100, 32, 50_000, 10_000, "cifar", (32, 32, 3),
                CIFAR100_NAMES),
    DatasetInfo("fashion_mnist", "Fashion-MNIST", 10, 32, 60_000, 10_000, "cifar", (28, 28, 1),
                FASHION_MNIST_NAMES),
    DatasetInfo("imagenet2012", "ImageNet", num_classes=1000, image_size=224,
                num_train=1_281_167, num_eval=50_000, recipe="imagenet", stored=None),
    DatasetInfo("image_folder", "an image folder", num_classes=None, image_size=32, num_train=None,
                num_eval=None, recipe="cifar", stored=(32, 32, 3), folder=True))}


def network_padding(height, width, size):
    """The zero rows and columns that make a height x width image the network's size x size, as
    ((top, bottom), (left, right)): even on both sides, the odd one at the bottom or right (as
    `tf.image.resize_with_crop_or_pad` pads; Fashion-MNIST's 28x28: 2 a side). The one rule of
    the input pipeline (resnet_nobn/data/cifar.py `to_network`) and of the model that takes raw
    images (resnet_nobn/model/classifier.py); a grey image's value goes to all 3 channels in
    both. ValueError for an image larger than size x size (resize it first). `height` and
    `width` may be tensors (a graph's unknown sizes): the same arithmetic, unchecked."""
    known = all(isinstance(d, int) for d in (height, width))
    if known and (height > size or width > size):
        raise ValueError(f"{height}x{width} images are larger than the network's {size}x{size}; "
                         f"resize them to {size}x{size} first (e.g. keras.layers.Resizing)")
    top, left = (size - height) // 2, (size - width) // 2
    return (top, size - height - top), (left, size - width - left)


def tfds_names():
    """The datasets read through tfds (all but `image_folder`): what run/prepare_data.py prepares."""
    return tuple(name for name, d in DATASETS.items() if not d.folder)


def of_recipe(recipe):
    """The names of the datasets `recipe` ("cifar", "imagenet") trains, in the table's order."""
    return tuple(name for name, d in DATASETS.items() if d.recipe == recipe)


def check_classes(name, class_names, num_classes):
    """ValueError unless a run's TrainConfig.class_names fit its dataset `name`: a folder's
    (`image_folder`) are its train/ class folders, sorted, one per class of the model (read by the
    command line: resnet_nobn/data/image_folder.py; config.json records them); the table's datasets
    have their own classes and none here."""
    if DATASETS[name].folder and (not class_names or len(class_names) != num_classes):
        raise ValueError(f"--dataset={name}: class_names must name each of the model's "
                         f"{num_classes} classes (resnet_nobn/data/image_folder.py class_names)")
    if class_names and not DATASETS[name].folder:
        raise ValueError(f"class_names are --dataset=image_folder's; {name} has its own classes")


def partial_evaluation(name, examples, global_batch, test_images=None):
    """Whether an evaluation of `examples` images of dataset `name`'s test split covered only its
    first `--eval_steps` global batches of `global_batch`, not the whole split: fewer images than
    the split holds, in whole batches (`test_images`: an image folder's count, results.json's
    `image_folder` record; a split of unknown size counts whole batches as partial). Told by the
    evaluation's own count: --eval_only may use another --eval_steps than the run's config."""
    info = DATASETS.get(name)
    held = test_images or (info.num_eval if info else None) or examples + 1
    return examples < held and examples % global_batch == 0


def shown(name, synthetic=False, mismatch=None, data_dir=None):
    """How a run's dataset is named wherever it is shown (report, plot, model card): its name, and
    what its data really was where that is not the dataset: `(synthetic)` for random images,
    `(not <title>: <directory>)` for another dataset's images under the name (`mismatch`: the
    line resnet_nobn/data/tfds_dir.py `provenance` wrote into results.json); an image folder with
    its directory, `image_folder (<data_dir>)`: runs on two folders are not one dataset."""
    if synthetic:
        return f"{name} (synthetic)"
    if name in DATASETS and DATASETS[name].folder:
        return f"{name} ({data_dir})"
    if mismatch:
        title = DATASETS[name].title if name in DATASETS else name
        return f"{name} (not {title}: {mismatch.split(' is not ')[0]})"
    return name
