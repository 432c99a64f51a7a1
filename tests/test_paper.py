"""The paper's facts in one place (resnet_nobn/paper.py): Table 2 as README.md and
docs/ablations_and_table2.md quote it, and the one test of "is this the paper's network"."""
import dataclasses
import os
import re

from helpers import ROOT

from resnet_nobn import paper, recipes

# README: "Paper: 6.38 (Ours), 6.43 (ResNet)"; the docs: "Ours" (6.38 / 24.64 / 35.29, ...)
_PAPER_LINE = re.compile(r"Paper: .*|\"Ours\" \([^)]*\)|\"ResNet\" row\s+\([^)]*\)")


def quoted(text):
    """The numbers (two decimals) the Table 2 lines of `text` quote."""
    return {n for line in _PAPER_LINE.findall(text) for n in re.findall(r"\d+\.\d\d", line)}


def table2_numbers(table2):
    return {f"{v:.2f}" for row in table2.values() for v in row.values()}


def _read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def test_readme_and_the_docs_quote_table2_as_paper_py_holds_it():
    for page in (_read("README.md"), _read("docs", "ablations_and_table2.md")):
        assert quoted(page) == table2_numbers(paper.TABLE2)


def test_a_table2_number_quoted_wrong_is_found():
    wrong = {**paper.TABLE2, "cifar10": {**paper.TABLE2["cifar10"], "ours": 6.83}}
    assert quoted(_read("README.md")) != table2_numbers(wrong)


def test_the_papers_network_is_its_shape_kind_and_real_data():
    cifar = recipes.cifar()
    config = cifar.to_json()
    assert paper.paper_shape(config) and paper.paper_network(config["model"])
    assert paper.paper_row(config) == ("Ours", paper.TABLE2["cifar10"]["ours"])
    twin = dataclasses.replace(cifar, model=dataclasses.replace(cifar.model, norm="batch",
                                                                 init="he")).to_json()
    assert not paper.paper_network(twin["model"])
    assert paper.paper_row(twin) == ("ResNet†", paper.TABLE2["cifar10"]["resnet"])
    shallow = dataclasses.replace(cifar, model=dataclasses.replace(cifar.model,
                                                                    blocks_per_stage=(1, 1, 1)))
    assert not paper.paper_shape(shallow.to_json()) and paper.paper_row(shallow.to_json()) is None
    synthetic = dataclasses.replace(cifar, use_synthetic_data=True).to_json()
    assert paper.paper_row(synthetic) is None and paper.paper_settings(config)
    imagenet = recipes.imagenet().to_json()
    assert paper.paper_shape(imagenet) and paper.paper_row(imagenet)[1] == 35.29


def test_departures_name_each_training_setting_off_the_recipe_and_a_short_run():
    """What keeps a run of the paper's network from Table 2's setup, which the report and the
    model card both say: its training settings off the recipe (the seed and the data's name
    aside, which paper_row judges) and fewer steps than the recipe's."""
    cifar = recipes.cifar()
    assert paper.departures(cifar.to_json(), cifar.train_steps) == []
    assert paper.departures(dataclasses.replace(cifar, seed=7).to_json(), 10**6) == []
    ran = dataclasses.replace(cifar, learning_rate=0.02, clip_norm=1.0, mixed_precision="float16",
                              train_steps=2000).to_json()
    assert paper.departures(ran, 2000) == [("learning_rate", 0.02, 0.05), ("clip_norm", 1.0, 0.0),
                                           ("mixed_precision", "float16", "float32"),
                                           ("train_steps", 2000, 60000)]
    assert paper.departures(ran) == paper.departures(ran, 2000)[:-1]  # its length not asked
    assert not paper.paper_settings(ran) and paper.paper_settings(cifar.to_json())
    imagenet = recipes.imagenet()
    assert paper.departures(dataclasses.replace(imagenet, batch_size=128).to_json(), 700_000) == [
        ("batch_size", 128, 256)]
