"""Each residual block's Lipschitz bound ||C2||_2 * ||C1||_2 (times Fixup's/SkipInit's scalar),
and the `--max_branch_norm` constraint that keeps it at most tau.

Section 2 of Hardt & Ma proves that a linear residual network has no spurious critical point while
every block's ||A_j|| < 1 (Theorem 2.2); Section 5 conjectures the same for blocks with one ReLU.
The network's counterpart of ||A_j|| is the Lipschitz constant of the branch `C2 act(C1 h)`: the
leaky ReLU is 1-Lipschitz, so ||branch(h) - branch(h')|| <= |scale| ||C2||_2 ||C1||_2 ||h - h'||,
with ||C||_2 the spectral norm of the convolution as a linear operator on the block's feature map
(zero padding and stride included). It is estimated by power iteration on the convolution and its
adjoint (`tf.nn.conv2d`, `tf.nn.conv2d_transpose`) with one persistent vector per convolution
(Miyato et al. 2018): a warm-started iteration tracks the slowly changing weights, so two
iterations a step suffice after the first call's `warmup` iterations (an estimate from below:
the spectrum of a convolution is dense near its top, and 30 cold iterations still miss ~3%).

Power iteration estimates from below, and a warm-started one lags behind weights that move (measured:
26% below the true norm after 60 steps of a tiny net at lr 0.05, five iterations a step), so the
constraint does not use it: it uses an upper bound, the exact norm of the circular convolution on a
grid large enough to contain the zero-padded one (`circular_norm`, from the kernel's DFT).
The constraint (`project`) runs after every SGD update, inside the compiled training loop: where a
block's upper bound exceeds tau, both kernels are multiplied by c = sqrt(tau / bound), and so are their
SGD velocities (Keras SGD: `v <- m v - lr g; w <- w + v`), so that the next update continues in the
rescaled coordinates instead of undoing the projection.
"""
import tensorflow as tf

from resnet_nobn.model.blocks import ResidualBlock


def _normalize(x):
    return x / (tf.norm(x) + 1e-12)


def circular_norm(kernel, input_shape, squarings=6):
    """An upper bound of ||C||_2 for the 'SAME' convolution C with `kernel` [k, k, c_in, c_out]
    on an input of `input_shape` [1, H, W, c_in], any stride.

    The zero-padded convolution is a restriction of the circular convolution on an N x N grid,
    N = max(H, W) + k - 1 (the input embedded in the zeros of the larger grid, the output read on
    a window; a stride subsamples the output), so its norm is at most that one's, which is the
    largest singular value of the kernel's 2-D DFT over the grid, max_w ||K(w)||_2 (Sedghi et al.
    2019). Each ||K(w)||_2^2 = lambda_max(G), G = K(w)^H K(w), is bounded above without an SVD:
    lambda_max(G) <= trace(G^(2^j))^(1/2^j), after j squarings (each normalized by its Frobenius
    norm, kept in logs); the bound exceeds the norm by at most a factor min(c_in, c_out)^(1/2^(j+1))
    (6 squarings: 1.022 at 16 channels, 1.033 at 64). Real kernels: rfft2d, half the frequencies.
    """
    k = int(kernel.shape[0])
    n = max(int(input_shape[1]), int(input_shape[2])) + k - 1
    padded = tf.pad(tf.cast(kernel, tf.float32), [[0, n - k], [0, n - k], [0, 0], [0, 0]])
    spectrum = tf.signal.rfft2d(tf.transpose(padded, [2, 3, 0, 1]))  # [c_in, c_out, N, N/2+1]
    m = tf.reshape(tf.transpose(spectrum, [2, 3, 1, 0]), [-1] + spectrum.shape[1::-1].as_list())
    if m.shape[1] < m.shape[2]:
        m = tf.linalg.adjoint(m)  # the smaller Gram matrix: the same nonzero eigenvalues
    g = tf.matmul(m, m, adjoint_a=True)  # [frequencies, c, c], Hermitian, PSD
    log_lambda = tf.zeros([tf.shape(g)[0]], tf.float32)
    for i in range(squarings):
        scale = tf.norm(g, axis=[-2, -1])  # Frobenius, > 0 unless the kernel is 0 there
        scale = tf.maximum(tf.math.real(scale), 1e-30)
        log_lambda += 0.5 ** i * tf.math.log(scale)
        g = g / tf.complex(scale, 0.0)[:, None, None]
        g = tf.matmul(g, g)
    trace = tf.maximum(tf.math.real(tf.linalg.trace(g)), 1e-30)
    log_lambda += 0.5 ** squarings * tf.math.log(trace)
    return tf.exp(0.5 * tf.reduce_max(log_lambda))


class BranchBounds:
    """Every residual block's bound: estimated by power iteration on its two convolutions
    (`bounds`, for the summaries), bounded above (`upper_bounds`) and kept at most tau (`project`).

    The persistent vectors are created in the current (strategy) scope, mirrored, updated only in
    cross-replica context; they start from a fixed stateless random draw (`seed`), so making them
    consumes no random state of the run.
    """

    def __init__(self, model, seed=0, warmup=200, per_call=5, estimate=True):
        self.blocks = [l for l in model.layers if isinstance(l, ResidualBlock)]
        self.warmup, self.per_call = warmup, per_call
        self.convs = []  # per block: ((conv, input shape [1, H, W, C]), ...) for C1 and C2
        for b in self.blocks:
            shape1 = (1,) + tuple(b.input.shape[1:])
            shape2 = (1,) + tuple(b.first.compute_output_shape(shape1)[1:])
            self.convs.append(((b.first, shape1), (b.second, shape2)))
        self.vectors = []
        if not estimate:  # only `upper_bounds` and `project`: no power-iteration state
            return
        for i, pair in enumerate(self.convs):
            for j, (conv, shape) in enumerate(pair):
                init = _normalize(tf.random.stateless_normal(shape, [seed, 2 * i + j]))
                self.vectors.append(tf.Variable(
                    init, trainable=False, name=f"power_{conv.name}",
                    synchronization=tf.VariableSynchronization.ON_WRITE,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA))
        self.calls = tf.Variable(0, trainable=False, dtype=tf.int64, name="power_calls",
                                 aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    @staticmethod
    def _apply(conv, kernel, x):
        return tf.nn.conv2d(x, kernel, conv.strides, "SAME")

    @staticmethod
    def _adjoint(conv, kernel, y, shape):
        return tf.nn.conv2d_transpose(y, kernel, shape, conv.strides, "SAME")

    def _sigmas(self, iterations):
        """The spectral norm of every convolution (C1, C2 of each block, in order) by `iterations`
        power iterations from its persistent vector (updated): one loop for all of them, each
        vector iterated on its own convolution alone."""
        convs = [pair for block in self.convs for pair in block]
        kernels = [tf.cast(conv.kernel, tf.float32) for conv, _ in convs]

        def iteration(i, *vs):
            return (i + 1, *[_normalize(self._adjoint(conv, k, self._apply(conv, k, v), shape))
                             for (conv, shape), k, v in zip(convs, kernels, vs)])
        iterations = tf.convert_to_tensor(iterations)
        _, *vs = tf.while_loop(lambda i, *_: i < iterations, iteration,
                               (tf.zeros([], iterations.dtype),
                                *[vector.read_value() for vector in self.vectors]))
        for vector, v in zip(self.vectors, vs):
            vector.assign(v)
        return [tf.norm(self._apply(conv, k, v)) for (conv, _), k, v in zip(convs, kernels, vs)]

    def bounds(self, iterations=None):
        """[|scale| ||C2||_2 ||C1||_2 per block], each norm from `iterations` power iterations
        (default: `warmup` at the first call, `per_call` after). Cross-replica context."""
        if iterations is None:
            iterations = tf.where(self.calls == 0, self.warmup, self.per_call)
        self.calls.assign_add(1)
        sigmas = self._sigmas(iterations)
        out = []
        for j, b in enumerate(self.blocks):
            bound = sigmas[2 * j] * sigmas[2 * j + 1]
            if getattr(b, "branch_scale", None) is not None:
                bound = bound * tf.abs(tf.cast(b.scale, tf.float32))
            out.append(bound)
        return out

    def upper_bounds(self):
        """[|scale| * ub(C2) * ub(C1) per block], ub(C) = `circular_norm`: never below the
        true bound, so keeping it at most tau keeps the true bound at most tau (no estimate)."""
        out = []
        for b, ((c1, s1), (c2, s2)) in zip(self.blocks, self.convs):
            bound = circular_norm(c1.kernel, s1) * circular_norm(c2.kernel, s2)
            if getattr(b, "branch_scale", None) is not None:
                bound = bound * tf.abs(tf.cast(b.scale, tf.float32))
            out.append(bound)
        return out

    def project(self, tau, optimizer):
        """Rescales, where a block's bound exceeds `tau`, its two kernels and their SGD velocities
        by sqrt(tau / bound), the bound from `upper_bounds`: afterwards every block's
        |scale| ||C2||_2 ||C1||_2 is at most tau."""
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        momentums = getattr(inner, "momentums", None) or []
        for ((c1, _), (c2, _)), bound in zip(self.convs, self.upper_bounds()):
            factor = tf.sqrt(tf.minimum(1.0, tau / tf.maximum(bound, 1e-30)))
            for conv in (c1, c2):
                conv.kernel.assign(conv.kernel * tf.cast(factor, conv.kernel.dtype))
                if momentums:
                    velocity = momentums[inner._get_variable_index(conv.kernel)]
                    velocity.assign(velocity * tf.cast(factor, velocity.dtype))
