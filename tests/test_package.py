"""The package: `import resnet_nobn` loads no TensorFlow, its finder (which registers the
project's Keras classes as Keras loads) is gone once Keras has loaded, and a model.keras loads
with the documented custom_objects too."""
import json
import os
import re
import subprocess
import sys
import tomllib

import numpy as np
import pytest

from resnet_nobn.config import ModelConfig
from resnet_nobn.model import network as model_lib
from tests.helpers import ROOT

FRESH = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import resnet_nobn
assert not {"keras", "tensorflow"} & set(sys.modules), "import resnet_nobn loaded TensorFlow"
import numpy as np
import keras
# its finder, which registers the project's Keras classes as Keras loads, is gone once it has
ours = [f for f in sys.meta_path if type(f).__module__.split(".")[0] == "resnet_nobn"]
assert not ours, f"resnet_nobn's finder stayed on sys.meta_path after Keras loaded: {ours}"
assert "resnet_nobn.model" in sys.modules, "Keras loaded, the project's classes not registered"
from resnet_nobn.model import custom_objects
model = keras.saving.load_model(sys.argv[1] + "/model.keras", custom_objects=custom_objects())
x = np.random.default_rng(0).standard_normal((2, 32, 32, 3)).astype("float32")
print(json.dumps(np.asarray(model(x)).tolist()))
"""


@pytest.mark.slow
def test_model_keras_loads_with_custom_objects_and_the_package_import_loads_nothing(tmp_path):
    cfg = ModelConfig(widths=(8, 16, 32), blocks_per_stage=(1, 1, 1), stem_width=8, norm="batch",
                      init="he")
    model = model_lib.build_model(cfg, seed=1)
    model.save(tmp_path / "model.keras")
    x = np.random.default_rng(0).standard_normal((2, 32, 32, 3)).astype("float32")
    # -I: the project only through the path given; from another directory
    p = subprocess.run([sys.executable, "-I", "-c", FRESH, str(tmp_path), ROOT], cwd=tmp_path,
                       capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert p.returncode == 0, p.stderr[-3000:]
    logits = json.loads(p.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(logits, np.asarray(model(x)), rtol=1e-5, atol=1e-6)


def _pins():
    """{package: version} of requirements.txt's pins."""
    with open(os.path.join(ROOT, "requirements.txt")) as f:
        return dict(re.findall(r"^([\w.-]+)==([\w.]+)", f.read(), flags=re.M))


def test_the_package_metadata_agrees_with_the_tested_pins_and_the_readme():
    """pyproject.toml's Python is the README's (the pinned numpy, scipy, keras and matplotlib need
    it), and its `test` extra installs what the tests run, JAX too, at requirements.txt's pins."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = re.search(r"^Python (3\.\d+)\.", f.read(), flags=re.M).group(1)
    assert project["requires-python"] == f">={readme}", (project["requires-python"], readme)
    pins, test = _pins(), project["optional-dependencies"]["test"]
    for package in ("jax", "jaxlib"):  # tests/model/test_backends.py: KERAS_BACKEND=jax
        assert f"{package}=={pins[package]}" in test, (package, test)
