"""bench/paired_gap.py: the gap between two networks' test errors, paired image by image, and its
interval, as scipy's paired t test gives it; and over seeds."""
import numpy as np
from scipy import stats

from bench import paired_gap


def test_the_paired_interval_is_scipys_paired_t_interval_on_the_seed_means():
    rng = np.random.default_rng(0)
    a = (rng.random((2, 1000)) < 0.15).astype(np.float64)  # two seeds, 1,000 images
    b = (rng.random((2, 1000)) < 0.10).astype(np.float64)
    gap, low, high = paired_gap.paired_interval(a, b)
    ref = stats.ttest_rel(a.mean(0), b.mean(0)).confidence_interval(0.95)
    np.testing.assert_allclose([gap, low, high],
                               [a.mean() - b.mean(), ref.low, ref.high], rtol=1e-9)
    assert low < gap < high


def test_the_same_networks_have_no_gap_and_a_seed_interval_needs_two_seeds():
    w = (np.random.default_rng(1).random((1, 50)) < 0.3).astype(np.float32)
    assert paired_gap.paired_interval(w, w)[0] == 0.0
    assert paired_gap.seed_interval([0.1], [0.2]) is None
    gap, low, high = paired_gap.seed_interval([0.15, 0.13], [0.10, 0.09])
    np.testing.assert_allclose(gap, 0.045)
    ref = stats.ttest_rel([0.15, 0.13], [0.10, 0.09]).confidence_interval(0.95)
    np.testing.assert_allclose([low, high], [ref.low, ref.high])
