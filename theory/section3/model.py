"""The Keras model of Theorem 3.2's network (Hardt & Ma 2017, Section 3), from the weights that
theory.section3.expressivity constructs: [UnitNormalization] -> Dense(k) A_0 -> l blocks -> final block,
every block the project's `resnet_nobn.model.blocks.ResidualBlock` (`h + V ReLU(U h + s)`: first =
Dense(k, use_bias=True) holding U and s, second = Dense(k, use_bias=False) holding V).

The final block's skip R^k -> R^r, which the paper glosses over, is the fixed, parameter-free
`PadOrTruncate(r)`: [h; 0] when r >= k, the first r coordinates of h when r < k.  It has no
weights, so the count stays the paper's kd + l(2k^2 + k) + (kr + r^2 + r).

`run_float32` runs the model on many points at the cost of its arithmetic (hundreds of blocks
make one traced Keras call per layer the larger cost).
"""
import numpy as np

_shortcut_cls = None
_network_cls = None


def shortcut(h, r):
    """The final block's fixed skip R^k -> R^r in numpy, the same map as PadOrTruncate:
    [h; 0] if r >= k, else h[:, :r]."""
    k = h.shape[1]
    return h[:, :r] if k >= r else np.concatenate([h, np.zeros((h.shape[0], r - k), h.dtype)], 1)


def _pad_or_truncate_class():
    """The final block's skip R^k -> R^r, defined lazily so importing this module needs no Keras."""
    global _shortcut_cls
    if _shortcut_cls is None:
        import keras

        @keras.saving.register_keras_serializable(package="theory")
        class PadOrTruncate(keras.layers.Layer):
            """Fixed, parameter-free shortcut R^k -> R^r: [h; 0] if r >= k, else h[:r]."""

            def __init__(self, units, **kwargs):
                super().__init__(**kwargs)
                self.units = int(units)

            def call(self, h):
                k = h.shape[-1]
                if k >= self.units:
                    return h[..., :self.units]
                return keras.ops.pad(h, [[0, 0], [0, self.units - k]])

            def compute_output_shape(self, input_shape):
                return tuple(input_shape[:-1]) + (self.units,)

            def get_config(self):
                return {**super().get_config(), "units": self.units}

        _shortcut_cls = PadOrTruncate
    return _shortcut_cls


def _network_class():
    """The model class, defined lazily so importing this module needs no Keras."""
    global _network_cls
    if _network_cls is None:
        import keras

        class Theorem32Network(keras.Model):
            """[UnitNormalization] -> A_0 -> l ResidualBlocks -> final block, applied in order.
            A subclassed model: with hundreds of blocks, building a functional graph costs more
            than the weights themselves (one symbolic call per layer)."""

            def __init__(self, stages, **kwargs):
                super().__init__(**kwargs)
                self.stages = stages

            def call(self, x):
                for layer in self.stages:
                    x = layer(x)
                return x

        _network_cls = Theorem32Network
    return _network_cls


def build_model(a0, w, d, normalize=True):
    """The Keras model: [UnitNormalization] -> Dense(k) A_0 -> l ResidualBlocks -> final block.

    Each block is `resnet_nobn.model.blocks.ResidualBlock(Dense(k, use_bias=True), Dense(k,
    use_bias=False))`; the final one has Dense(r) layers and the PadOrTruncate(r) shortcut.  The
    Dense layers are created with initializers that return the construction's weights and are
    built directly (no symbolic call), so the model is ready without tracing anything.
    """
    import keras
    from resnet_nobn.model.blocks import ResidualBlock

    ell, k, _ = w["U"].shape
    r = w["Uf"].shape[0]

    def const(value):                 # initializer returning the construction's weights
        value = np.ascontiguousarray(value, dtype=np.float32)

        def init(shape, dtype=None):
            assert tuple(shape) == value.shape
            return value
        return init

    def dense(units, bias, name, fan_in, kernel, b=None):
        layer = keras.layers.Dense(units, use_bias=bias, kernel_initializer=const(kernel),
                                   bias_initializer=const(b) if bias else "zeros", name=name)
        layer.build((None, fan_in))
        return layer

    def block(first, second, name, shortcut=None):
        blk = ResidualBlock(first, second, shortcut=shortcut, name=name)
        blk.built = True       # its sublayers are built; nothing of its own to build
        return blk

    stages = [keras.layers.UnitNormalization(name="unit_norm")] if normalize else []
    stages.append(dense(k, False, "A0", d, a0.T))
    stages += [block(dense(k, True, f"U{b}", k, w["U"][b].T, w["s"][b]),
                     dense(k, False, f"V{b}", k, w["V"][b].T), f"block{b}") for b in range(ell)]
    stages.append(block(dense(r, True, "U_final", k, w["Uf"].T, w["sf"]),
                        dense(r, False, "V_final", r, w["Vf"].T), "final_block",
                        _pad_or_truncate_class()(r, name="pad_or_truncate")))
    model = _network_class()(stages, name=f"theorem_3_2_k{k}_l{ell}")
    model.built = True        # every stage is built
    return model


def run_float32(model, x32, batch_size=8192, sample=256, seed=0):
    """The float32 model on every row of x32, fast: the input layers and the final block are the
    model's own Keras layers; the l middle blocks run as one compiled loop over their own weights
    (read from the model's Dense layers) with the ops a ResidualBlock(Dense, Dense) performs,
    `h + (ReLU(h K_U + s) K_V)`, so the cost is the arithmetic, not one traced call per layer; the
    second product only for rows with a nonzero ReLU (the others add exact zeros).
    The Keras model itself also runs on `sample` random rows, and the loop must agree with it there
    (it checks that the loop is the model's function).  Returns (outputs, max |loop - model| on the
    sample)."""
    import tensorflow as tf
    from resnet_nobn.model.blocks import ResidualBlock

    blocks = [b for b in model.layers if isinstance(b, ResidualBlock)]
    middle, final = blocks[:-1], blocks[-1]
    KU = tf.constant(np.stack([b.first.kernel.numpy() for b in middle]))
    bU = tf.constant(np.stack([b.first.bias.numpy() for b in middle]))
    KV = tf.constant(np.stack([b.second.kernel.numpy() for b in middle]))
    names = {layer.name for layer in model.layers}
    first = [model.get_layer(name) for name in ("unit_norm", "A0") if name in names]

    @tf.function
    def loop(h):
        def body(j, h):           # rows whose ReLUs are all 0 add exact zeros: skip their V product
            a = tf.nn.relu(tf.matmul(h, KU[j]) + bU[j])
            rows = tf.where(tf.reduce_any(a > 0, axis=1))
            return j + 1, tf.tensor_scatter_nd_add(h, rows, tf.matmul(tf.gather_nd(a, rows), KV[j]))
        return tf.while_loop(lambda j, h: j < len(middle), body, (tf.constant(0), h))[1]

    out = []
    for lo in range(0, len(x32), batch_size):
        h = tf.constant(x32[lo:lo + batch_size])
        for layer in first:
            h = layer(h)
        out.append(final(loop(h)).numpy())
    out = np.concatenate(out)
    rows = np.sort(np.random.default_rng(seed).choice(len(x32), min(sample, len(x32)), replace=False))
    return out, float(np.abs(model(x32[rows]).numpy() - out[rows]).max())
