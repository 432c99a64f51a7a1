"""Fixup's CIFAR ResNet and its SGD step, written again in JAX, for experiments/stability/fixup_parity.py.

An independent implementation of what Fixup's reference code (hongyi-zhang/Fixup,
cifar/models/fixup_resnet_cifar.py and cifar/cifar_train.py; Zhang et al. 2019) computes: its own
convolution (jax.lax.conv_general_dilated), activation, shortcut, loss and momentum SGD; nothing of
the project's model, loss or training step. Parameters carry the project's variable names
(`layout`), so that the project's initial weights load by name. The network:

    x = act(conv(images) + bias1)                       stem, its scalar bias, the activation
    per block: out = conv2(act(conv1(h + bias1a) + bias1b) + bias2a) * scale + bias2b
               h = act(out + shortcut(h)); the last block's act is the one before the pool
    logits = (mean over pixels of h + bias2) @ W + b    a trained classifier, zero at init

`Options` has one switch for each place where the harness (resnet_nobn/model/network.py, blocks.py,
train/steps.py) deliberately differs from the reference; the defaults are the harness's, the
reference's values are named in each field's comment.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

SHORTCUTS = ("pool_pad", "reference")
PADDINGS = ("same", "symmetric")
DECAYED = ("kernels", "all")
MOMENTUM_FORMS = ("keras", "torch")


@dataclasses.dataclass(frozen=True)
class Options:
    """The harness's settings by default; the reference's in the comments."""
    leakiness: float = 0.0  # slope of act below 0; the reference's nn.ReLU: 0 (the fork's: 0.1)
    # where a block changes shape: 'pool_pad' (Table 1: 2x2 average pool of h, zero channels on
    # both sides); the reference: 'reference' (h + bias1a taken every 2nd pixel, zeros appended)
    shortcut: str = "pool_pad"
    # the stride-2 convs' padding: 'same' (TensorFlow's SAME: 0 before, 1 after on 32 pixels);
    # the reference's padding=1: 'symmetric' (1 on each side)
    padding: str = "same"
    # weight decay on: 'kernels' (conv kernels only); the reference (torch SGD's weight_decay on
    # every parameter, the classifier, biases and scales too): 'all'
    decayed: str = "kernels"
    # 'keras': v <- m v - lr g, w <- w + v (Keras SGD); the reference's torch SGD: 'torch',
    # b <- m b + g, w <- w - lr b (the same while the rate is constant)
    momentum_form: str = "keras"
    weight_decay: float = 1e-4  # the reference's --decay default
    momentum: float = 0.9  # the reference's
    scalar_lr_factor: float = 0.1  # every `bias` and `scale` at lr/10, the reference's


@dataclasses.dataclass(frozen=True)
class Arch:
    """The shape: channels and blocks per stage (the reference: 16,32,64; 18 blocks for
    ResNet-110), the stem as wide as the first stage, strides 1,2,2."""
    widths: tuple = (16, 32, 64)
    blocks: int = 3
    num_classes: int = 10
    strides: tuple = (1, 2, 2)


def block_names(arch):
    """[(name, stage index, block index)] in order: `stage{s}_block{b}`, counted from 1."""
    return [(f"stage{s + 1}_block{b + 1}", s, b) for s in range(len(arch.widths))
            for b in range(arch.blocks)]


def layout(arch):
    """{parameter name: (shape, role)}, role one of conv, scalar, fc_weight, fc_bias; the names
    are the project's variable paths."""
    out = {"stem/kernel": ((3, 3, 3, arch.widths[0]), "conv"), "stem_bias/bias": ((), "scalar")}
    in_ch = arch.widths[0]
    for name, s, _ in block_names(arch):
        width = arch.widths[s]
        for scalar in ("bias1a", "bias1b", "bias2a", "bias2b", "branch_scale"):
            out[f"{name}/{scalar}"] = ((), "scalar")
        out[f"{name}/{name}_conv1/kernel"] = ((3, 3, in_ch, width), "conv")
        out[f"{name}/{name}_conv2/kernel"] = ((3, 3, width, width), "conv")
        in_ch = width
    out["classifier_bias/bias"] = ((), "scalar")
    out["head/kernel"] = ((in_ch, arch.num_classes), "fc_weight")
    out["head/bias"] = ((arch.num_classes,), "fc_bias")
    return out


def conv(x, kernel, stride, padding):
    """A 3x3 (any k x k) convolution, NHWC and HWIO, no bias, with `padding` (Options.padding)."""
    k = kernel.shape[0]
    if padding == "same":
        pads = []
        for size in x.shape[1:3]:
            total = max((-(-size // stride) - 1) * stride + k - size, 0)
            pads.append((total // 2, total - total // 2))
    else:
        pads = [(k // 2, k // 2)] * 2
    return jax.lax.conv_general_dilated(x, kernel, (stride, stride), pads,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def act(x, leakiness):
    """x where x > 0, else leakiness * x. Its derivative at exactly 0 is `leakiness` (0 for the
    ReLU), as in TensorFlow's and torch's ReLU; it matters here: a Fixup block's sum is its input
    at init, already a ReLU's output, so exact zeros meet the next ReLU."""
    return jnp.where(x > 0, x, leakiness * x)


def shortcut(h, bias1a, stride, out_ch, kind):
    """The skip path of a block whose shape changes (`Options.shortcut`)."""
    extra = out_ch - h.shape[-1]
    if kind == "reference":  # downsample(x + bias1a), AvgPool2d(1, stride); cat with zeros
        h = (h + bias1a)[:, ::stride, ::stride, :]
        return jnp.pad(h, [(0, 0), (0, 0), (0, 0), (0, extra)])
    if stride > 1:  # 2x2 average pool, VALID
        n, rows, cols, c = h.shape
        rows, cols = rows // stride, cols // stride
        h = h[:, :rows * stride, :cols * stride].reshape(n, rows, stride, cols, stride, c)
        h = h.mean(axis=(2, 4))
    return jnp.pad(h, [(0, 0), (0, 0), (0, 0), (extra // 2, extra - extra // 2)])


def logits(params, images, arch, opts):
    """The network's logits for float32 NHWC `images`."""
    a = opts.leakiness
    x = act(conv(images, params["stem/kernel"], 1, opts.padding) + params["stem_bias/bias"], a)
    in_ch = arch.widths[0]
    blocks = block_names(arch)
    for i, (name, s, b) in enumerate(blocks):
        p = lambda key: params[f"{name}/{key}"]  # noqa: E731
        stride, width = (arch.strides[s] if b == 0 else 1), arch.widths[s]
        out = conv(x + p("bias1a"), p(f"{name}_conv1/kernel"), stride, opts.padding)
        out = act(out + p("bias1b"), a)
        out = conv(out + p("bias2a"), p(f"{name}_conv2/kernel"), 1, opts.padding)
        out = out * p("branch_scale") + p("bias2b")
        skip = (x if stride == 1 and in_ch == width
                else shortcut(x, p("bias1a"), stride, width, opts.shortcut))
        x = out + skip
        if i < len(blocks) - 1:
            x = act(x, a)
        in_ch = width
    pooled = act(x, a).mean(axis=(1, 2))
    return (pooled + params["classifier_bias/bias"]) @ params["head/kernel"] + params["head/bias"]


def cross_entropy(params, images, labels, arch, opts):
    """The batch's mean softmax cross-entropy."""
    z = logits(params, images, arch, opts)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - jnp.log(jnp.exp(z).sum(axis=1, keepdims=True))
    return -jnp.take_along_axis(log_p, labels[:, None], axis=1).mean()


def learning_rate(step, base, boundaries, factor=0.1):
    """The rate at 0-based `step`: `base` times `factor` per boundary reached."""
    return base * factor ** sum(step >= b for b in boundaries)


def make_step(arch, opts):
    """`step(params, velocity, images, labels, lr) -> (params, velocity, cross-entropy, loss)`,
    one SGD step, jitted; cross-entropy and loss (with the weight decay) before the update."""
    roles = {k: role for k, (_, role) in layout(arch).items()}
    decayed = {k for k, role in roles.items() if opts.decayed == "all" or role == "conv"}
    slow = {k for k, role in roles.items() if role in ("scalar", "fc_bias")}

    @jax.jit
    def step(params, velocity, images, labels, lr):
        ce, grads = jax.value_and_grad(cross_entropy)(params, images, labels, arch, opts)
        decay = 0.5 * opts.weight_decay * sum(jnp.sum(params[k] ** 2) for k in sorted(decayed))
        new_params, new_velocity = {}, {}
        for k, w in params.items():
            g = grads[k] + (opts.weight_decay * w if k in decayed else 0.0)
            rate = lr * (opts.scalar_lr_factor if k in slow else 1.0)
            if opts.momentum_form == "keras":
                v = opts.momentum * velocity[k] - rate * g
                new_params[k] = w + v
            else:
                v = opts.momentum * velocity[k] + g
                new_params[k] = w - rate * v
            new_velocity[k] = v
        return new_params, new_velocity, ce, ce + decay

    return step


def start(weights, arch):
    """(params, zero velocity) from {name: numpy array}; ValueError naming the first parameter
    that is missing or of another shape."""
    params = {}
    for k, (shape, _) in layout(arch).items():
        if k not in weights or tuple(weights[k].shape) != shape:
            got = "missing" if k not in weights else f"shape {tuple(weights[k].shape)}"
            raise ValueError(f"initial weight {k}: {got}, expected shape {shape}")
        params[k] = jnp.asarray(np.asarray(weights[k], np.float32))
    return params, {k: jnp.zeros_like(v) for k, v in params.items()}
