"""The paper's results and setup, which a run is held against: Table 2's top-1 errors, whether a
network is the paper's (Table 1, or the ImageNet variant of Section 4.2; norm none, identity init,
random head), and whether a run trains with the paper's recipe. README.md and
docs/ablations_and_table2.md quote TABLE2 (tests/test_paper.py holds them to it).
"""
import json

from resnet_nobn import recipes
from resnet_nobn.config import SCIENTIFIC_FIELDS, differences
from resnet_nobn.data.datasets import DATASETS

# Table 2 of the paper (top-1 error, %): the "Ours" and "ResNet" rows.
TABLE2 = {
    "cifar10": {"ours": 6.38, "resnet": 6.43},
    "cifar100": {"ours": 24.64, "resnet": 25.16},
    "imagenet2012": {"ours": 35.29, "ours_top5": 14.17, "resnet": 19.38},
}

# The fields that make a network the paper's shape (Table 1 or the ImageNet variant), whatever
# its norm, init and head.
SHAPE = ("widths", "blocks_per_stage", "strides", "stem_width", "stem_kernel", "stem_stride")
# The fields that say which images a run trains on (`paper_row` decides on them).
_THE_DATA = ("dataset", "class_names", "use_synthetic_data")


def recipe_of(dataset):
    """The recipe of the entry point that trains `dataset` (resnet_nobn/data/datasets.py):
    `recipes.cifar()` or `recipes.imagenet()`, whose values are that entry point's defaults."""
    return {"cifar": recipes.cifar, "imagenet": recipes.imagenet}[DATASETS[dataset].recipe]()


def _norm_json(v):
    return json.loads(json.dumps(v))


def paper_shape(config):
    """Whether the network of `config` (a config.json object) has the paper's shape for its
    dataset (SHAPE as in Table 1, or the ImageNet variant of Section 4.2), whatever its norm,
    init and head."""
    m, paper = config.get("model", {}), recipe_of(config["dataset"]).model
    return all(_norm_json(m.get(k)) == _norm_json(getattr(paper, k)) for k in SHAPE)


def paper_network(model):
    """Whether a network (a config.json `model` object) is the paper's kind: no normalization,
    the identity init and the fixed random-projection head, no `logit_gain` (its shape:
    `paper_shape`)."""
    return (model.get("norm"), model.get("init"), model.get("head"),
            bool(model.get("logit_gain"))) == ("none", "identity", "random", False)


def paper_row(config):
    """('Ours', top-1 %) or ('ResNet', top-1 %) of Table 2 if `config` is the paper's setup, else None.

    'Ours' needs the paper's network (norm none, identity init, random head, Table 1 / the ImageNet
    variant) on the real dataset; a BN twin of that shape gets the paper's ResNet row as a
    reference (a published ResNet, not this exact network).
    """
    ds = config.get("dataset")
    if ds not in TABLE2 or config.get("use_synthetic_data"):
        return None
    m = config.get("model", {})
    if not paper_shape(config):
        return None
    if paper_network(m):
        return "Ours", TABLE2[ds]["ours"]
    if m.get("norm") == "batch" and not m.get("logit_gain"):
        return "ResNet†", TABLE2[ds]["resnet"]
    return None


def departures(config, step=None):
    """[(field, the run's value, the recipe's value)] where a run leaves the paper's recipe for its
    dataset in a training setting: each of SCIENTIFIC_FIELDS (resnet_nobn/config.py) but the seed
    and the data's identity, and the precision (the paper's is float32), then ("train_steps",
    `step`, the recipe's) if `step` (how far the run trained; None: not asked) is short of the
    recipe's length. `config`: a config.json object.
    The network's own differences are `paper_shape` and `paper_network`'s; a run on synthetic or
    another dataset's images has no Table 2 value at all (`paper_row`)."""
    recipe = recipe_of(config["dataset"]).to_json()
    out = [d for d in differences(config, recipe)
           if d[0] in SCIENTIFIC_FIELDS + ("mixed_precision",)
           and d[0] not in _THE_DATA + ("seed",)]
    if step is not None and step < recipe["train_steps"]:
        out.append(("train_steps", step, recipe["train_steps"]))
    return out


def paper_settings(config):
    """Whether `config` (a run's, as started) trains with the paper's recipe for its dataset, its
    length aside: no `departures` (its network is the paper's: `paper_row`)."""
    return not departures(config)
