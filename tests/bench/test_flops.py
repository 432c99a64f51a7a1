"""bench/flops.py: the training FLOPs per image that README's "Reproduce Table 2" states, counted by
TensorFlow's profiler, checked against a count from the network's shapes."""
import dataclasses

import pytest

from bench import flops
from resnet_nobn import recipes


@pytest.mark.timeout(300)
def test_profiled_training_flops_of_the_table1_net_are_three_forward_passes_of_its_convolutions():
    model = recipes.cifar().model  # Table 1: 55 convolutions, 13.5M parameters
    forward = flops.conv_forward_flops(model)
    assert forward == pytest.approx(3.9456e9, rel=1e-4)
    profiled = flops.profiled_flops(model, training=True)
    # forward + the two backward convolutions of each (no input gradient of the stem), plus
    # the elementwise ops: within 0.5% of three forward passes
    assert profiled == pytest.approx(3 * forward, rel=5e-3)
    assert flops.profiled_flops(model, training=False) == pytest.approx(forward, rel=5e-3)


def test_a_rows_flops_are_its_runs_training_and_evaluations():
    recipe = dataclasses.replace(recipes.cifar(), train_steps=100, batch_size=10, eval_every=50)
    per_image, total, runs = flops.row_cost(
        recipe, ("none", "batch"), 3, count=lambda m, training: (3 if training else 1) *
        (2 if m.norm == "batch" else 1))
    assert per_image == {"none": 3, "batch": 6} and runs == 6
    # per run: 100 steps x 10 images x training FLOPs + 2 evaluations x 10,000 test images
    assert total == 3 * (1000 * 3 + 2 * 10_000 * 1) + 3 * (1000 * 6 + 2 * 10_000 * 2)


def test_the_estimates_one_assumption_is_the_fraction_of_peak_the_papers_k40_run_reached():
    """50k steps x 128 images x 11.84 GFLOPs in 24 h on a 4.29 TFLOP/s K40: about 20%."""
    assert flops.paper_fraction(11.839e9) == pytest.approx(0.2044, abs=1e-4)
    assert flops.paper_fraction(2 * 11.839e9) == pytest.approx(2 * 0.2044, abs=2e-4)


@pytest.mark.parametrize("flag, said", [
    ("--fraction_of_peak=0", "give a fraction in (0, 1]"),  # was read as "not given": the K40's
    ("--fraction_of_peak=1.5", "give a fraction in (0, 1]"),
    ("--gpu_tflops=-19.5", "give the GPU's peak, a positive number")])
def test_a_peak_or_fraction_that_is_no_estimate_is_refused(flag, said):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, flops.__file__, flag], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and said in proc.stderr and proc.stdout == "", proc.stderr
