"""Hardt & Ma, "Identity Matters in Deep Learning" (ICLR 2017): normalization-free residual networks."""
