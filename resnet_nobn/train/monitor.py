"""What the trainer records about the network at each log step, besides the loss.

Per stage, the norm of the conv kernels (`weight_norm/`) and of their last update relative to it
(`update_ratio/`); per block, ||branch(h)|| / ||shortcut(h)|| on a fixed batch of test images
(`branch_norm/`): how far each block is from the identity, the network's counterpart of ||A_j|| in
Section 2 of the paper; and beside it, for the normalization-free nets, the bound the theory speaks
of, |scale| ||C2||_2 ||C1||_2 (`branch_bound/`, resnet_nobn/model/lipschitz.py, by a power
iteration of its own, warm-started at each log step). TensorBoard scalars in model_dir/train/.
"""
import keras
import tensorflow as tf

from resnet_nobn.model import lipschitz, network as model_lib
from resnet_nobn.model.blocks import ResidualBlock


class Monitor:
    """The scalars of one model and its optimizer; `probe_images()` gives the fixed test batch."""

    def __init__(self, model, optimizer, probe_images):
        self.model, self.optimizer, self._probe_images = model, optimizer, probe_images
        self.stages = model_lib.stage_kernels(model)
        self._probe = self._bounds = None

    def stage_norms(self):
        return {name: float(tf.linalg.global_norm(ks)) for name, ks in self.stages.items()}

    def update_ratios(self):
        """{stage: ||last update|| / ||weights||} of its conv kernels. With momentum the last SGD
        update is exactly the velocity (`w += v`), so no copy of the weights is needed."""
        inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        velocities = getattr(inner, "momentums", None) or []
        if len(velocities) != len(self.model.trainable_variables):
            return {}
        velocity = {v.path: m for v, m in zip(self.model.trainable_variables, velocities)}
        return {name: float(tf.linalg.global_norm([velocity[k.path] for k in ks])
                           / tf.linalg.global_norm(ks))
                for name, ks in self.stages.items()}

    def branch_norms(self):
        """{block: ||branch(h)|| / ||shortcut(h)||} on the fixed batch of test images."""
        if self._probe is None:
            blocks = [l for l in self.model.layers if isinstance(l, ResidualBlock)]
            inputs = keras.Model(self.model.inputs, [b.input for b in blocks])
            images = self._probe_images()

            @tf.function
            def probe():
                out = []
                for b, h in zip(blocks, inputs(images)):
                    skip = h if b.shortcut is None else b.shortcut(h)
                    out.append(tf.norm(tf.cast(b.branch(h), tf.float32))
                               / tf.norm(tf.cast(skip, tf.float32)))
                return out
            self._probe = (blocks, probe)
        blocks, probe = self._probe
        return {b.name: float(r) for b, r in zip(blocks, probe())}

    def branch_bounds(self):
        """{block: |scale| ||C2||_2 ||C1||_2}, for blocks without normalization layers (with BN
        between them the product bounds nothing); 100 power iterations at the first call, 10 after.
        """
        if self._bounds is None:
            bounds = lipschitz.BranchBounds(self.model, seed=1, warmup=100)
            names = [b.name for b in bounds.blocks]
            plain = all(b.norm1 is None and b.norm2 is None for b in bounds.blocks)
            compute = tf.function(lambda: bounds.bounds(tf.where(bounds.calls == 0, 100, 10)))
            self._bounds = (names if plain else [], compute)
        names, compute = self._bounds
        return {name: float(v) for name, v in zip(names, compute())} if names else {}

    def scalars(self):
        """All of them, as {TensorBoard tag: value}."""
        return {**{f"weight_norm/{k}": v for k, v in self.stage_norms().items()},
                **{f"update_ratio/{k}": v for k, v in self.update_ratios().items()},
                **{f"branch_norm/{k}": v for k, v in self.branch_norms().items()},
                **{f"branch_bound/{k}": v for k, v in self.branch_bounds().items()}}
