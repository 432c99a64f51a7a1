"""What a run computes, compiled: the model and SGD optimizer, the learning-rate schedule of
Section 4, the training loop and the evaluation step.

Keras 3 `model.fit` fails under MultiWorkerMirroredStrategy (keras-team/keras#20585), so the step is
`strategy.run` inside a `tf.function`, over `distribute_datasets_from_function`, with Keras layers
and the Keras SGD optimizer. Each replica's loss is scaled by the *global* batch
(`tf.nn.compute_average_loss`); the step all-reduces the gradient once (`global_gradient`), bounds
it, and hands the sum to an SGD that does not all-reduce it again (`SummedSGD`): one gradient
all-reduce per step (`python bench/collectives.py` counts them). Single-device, multi-GPU and
multi-worker runs share this code.
"""
import keras
import tensorflow as tf

from resnet_nobn.config import TrainConfig
from resnet_nobn.model import lipschitz, network as model_lib
from resnet_nobn.schedule import StepSchedule


def learning_rate(step, cfg: TrainConfig):
    """The learning rate at `step` (a Python int or a tensor): the schedule of Section 4,
    resnet_nobn/schedule.py's StepSchedule, the one the optimizer follows."""
    return StepSchedule.of(cfg)(step)


class SummedSGD(keras.optimizers.SGD):
    """Keras SGD applying a gradient already summed over the replicas (`global_gradient`): Keras'
    own all-reduce of it (in `_backend_update_step`, keras/src/backend/tensorflow/optimizer.py;
    Keras 3 has no switch for it) is skipped, so a step all-reduces its gradient once. Each replica
    must pass the same, global gradient. Its checkpoints are SGD's (same variables, same names)."""

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)


def build(cfg: TrainConfig, strategy):
    """(model, optimizer) of `cfg`, made in the strategy's scope; the optimizer's slots are built.

    The layers take the global dtype policy when built; it is set for this build only, so it
    neither leaks into a later run in the same process nor inherits an earlier one's.
    """
    previous_policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_dtype_policy(
        "float32" if cfg.mixed_precision == "float32" else f"mixed_{cfg.mixed_precision}")
    try:
        with strategy.scope():
            model = model_lib.build_model(cfg.model, seed=cfg.seed,
                                             weight_decay=cfg.weight_decay)
    finally:
        keras.mixed_precision.set_dtype_policy(previous_policy)
    with strategy.scope():
        optimizer = SummedSGD(learning_rate=StepSchedule.of(cfg), momentum=cfg.momentum)
        if cfg.mixed_precision == "float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    return model, optimizer


def adaptive_clip(grad, weight, factor, floor=1e-3):
    """NFNets' adaptive gradient clipping (Brock et al. 2021) of one conv kernel [k, k, in, out]:
    each output unit's gradient G_i is scaled to norm at most factor * max(||W_i||, floor), norms
    over the spatial and input axes."""
    def unit_norms(x):
        return tf.sqrt(tf.reduce_sum(tf.square(x), axis=list(range(len(x.shape) - 1)),
                                     keepdims=True))

    w_norm = tf.maximum(unit_norms(tf.cast(weight, grad.dtype)), floor)
    g_norm = unit_norms(grad)
    limit = factor * w_norm
    return tf.where(g_norm > limit, grad * (limit / tf.maximum(g_norm, 1e-6)), grad)


def global_gradient(grads):
    """(the global batch's gradient, the number of replicas): this replica's part summed over
    every replica (one all-reduce, with several), the same on each of them."""
    ctx = tf.distribute.get_replica_context()
    replicas = ctx.num_replicas_in_sync if ctx is not None else 1
    return (ctx.all_reduce("SUM", grads) if replicas > 1 else grads), replicas


def bound_gradients(total, variables, kernels, cfg, norm, loss_scale=1.0):
    """(the global gradient `total` with its global norm `norm` clipped to --clip_norm, then each
    conv kernel's units clipped by --agc (`adaptive_clip`); whether either changed it).

    The bounds act on the *summed* gradient (`global_gradient`): Keras clips (`global_clipnorm`)
    before it all-reduces, i.e. per replica, which differs from one device. `kernels`: the conv
    kernels among `variables` (the head's dense kernel is not clipped). `loss_scale`: the float16
    loss scale the gradient carries (the bounds are scaled with it).
    """
    bound = tf.constant(False)
    if cfg.clip_norm > 0:
        bound = norm > cfg.clip_norm * loss_scale
        total, _ = tf.clip_by_global_norm(total, cfg.clip_norm * loss_scale, use_norm=norm)
    if cfg.agc > 0:
        is_kernel = {id(k) for k in kernels}
        clipped = [adaptive_clip(g, v, cfg.agc * loss_scale) if id(v) in is_kernel else g
                   for g, v in zip(total, variables)]
        bound = tf.logical_or(bound, tf.reduce_any(
            [tf.reduce_any(c != g) for c, g in zip(clipped, total)]))
        total = clipped
    return total, bound


def per_example_cross_entropy(labels, logits):
    """(each example's softmax cross-entropy, its class for top-k): labels are classes, or
    --mixup's mixed one-hot rows lam e_y + (1 - lam) e_y', whose cross-entropy is
    lam CE(y) + (1 - lam) CE(y') (the cross-entropy is linear in the label), and whose class for
    top-k is the larger share."""
    if labels.shape.rank == 2:
        return (tf.nn.softmax_cross_entropy_with_logits(labels, logits),
                tf.argmax(labels, -1, output_type=tf.int32))
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits), labels


def top_k_hits(labels, logits, k):
    """1.0 for each example whose class `labels` is among the `k` classes that tf.math.top_k ranks
    first in its `logits` row, else 0.0 (also where the row is not finite). Ties go to the lower
    class index, as the export's `classes` (export/serving.py) and the 2016 fork's argmax: with
    tf.math.in_top_k every class tied at the boundary counts, so a network whose logits are equal
    (a flat image through the bias-free net, a collapsed net) was scored 0% error."""
    top = tf.math.top_k(logits, k).indices
    hit = tf.reduce_any(tf.equal(top, tf.cast(labels, top.dtype)[:, None]), axis=-1)
    return tf.cast(hit & tf.reduce_all(tf.math.is_finite(logits), axis=-1), tf.float32)


def scale_scalar_gradients(grads, variables, scalars, factor):
    """The gradient of each of `scalars` (model.scalar_parameters: Fixup's biases and multipliers,
    SkipInit's alpha) times `factor`: with SGD and momentum (and no weight decay on them) that is
    their learning rate times `factor`, as Fixup's reference code trains them at lr/10."""
    scalars = {id(v) for v in scalars}
    return [g * factor if id(v) in scalars else g for g, v in zip(grads, variables)]


# What the training loop sums over its steps, by name and in the order of its summed vector:
# cross-entropy, loss (with the weight decay), top-1 hits, top-5 hits, the global gradient's norm
# before any bound, 1 for each step whose gradient --clip_norm or --agc changed, and the global
# batch's `pooled_spread` and `logit_norm` (`batch_statistics`).
LOOP_SUMS = ("cross_entropy", "loss", "top1_hits", "top5_hits", "grad_norm", "bounded_steps",
             "pooled_spread", "logit_norm")


def named_sums(vector):
    """{LOOP_SUMS name: float} of the vector a compiled `train_loop` returns."""
    return dict(zip(LOOP_SUMS, (float(v) for v in vector)))


def batch_moments(pooled, logits):
    """This replica's sums for `batch_statistics`: [sum p, sum p^2 (per feature), sum |p|, images,
    sum logit^2] of its pooled features p [batch, features] and logits; summed over replicas
    they are the global batch's."""
    p, logits = tf.cast(pooled, tf.float32), tf.cast(logits, tf.float32)
    return tf.concat([tf.reduce_sum(p, 0), tf.reduce_sum(tf.square(p), 0), tf.stack([
        tf.reduce_sum(tf.abs(p)), tf.cast(tf.shape(p)[0], tf.float32),
        tf.reduce_sum(tf.square(logits))])], 0)


def batch_statistics(moments, num_classes):
    """(pooled_spread, logit_norm) of a batch from its `batch_moments`: the between-image standard
    deviation of each pooled feature over the batch, averaged over features, divided by the mean
    magnitude mean |p| of the pooled features; the root-mean-square logit."""
    features = (moments.shape[0] - 3) // 2
    total, squares = moments[:features], moments[features:2 * features]
    magnitude, n, logit_squares = moments[-3], moments[-2], moments[-1]
    variance = tf.maximum(squares / n - tf.square(total / n), 0.0)
    spread = tf.math.divide_no_nan(tf.reduce_mean(tf.sqrt(variance)), magnitude / (n * features))
    return spread, tf.sqrt(logit_squares / (n * num_classes))


def build_train_loop(cfg: TrainConfig, strategy, model, optimizer):
    """The compiled training loop: `train_loop(iterator, n)` runs n steps on the device and
    returns the vector of the sums over them of the `LOOP_SUMS` values, in that order (`named_sums`
    names them).

    As in TF Model Garden's Orbit: the `tf.range` loop around `strategy.run` is one
    tf.function; each replica adds its step's values to its own slot of an on-read summed
    variable; reading it once at the end is the loop's only reduction (one collective). With
    --xla the whole replica step, optimizer update included, is compiled on one device; with
    several replicas, only the forward and backward pass (the step all-reduces the gradient).
    With --max_branch_norm=tau > 0, every step ends, in cross-replica context (the same on every
    replica), with the projection of resnet_nobn/model/lipschitz.py: no block's bound exceeds tau.
    The step runs `model`'s layers through a second Keras model that also outputs the `pool`
    layer's features (for `batch_statistics`; `model` itself stays logits-only): the same
    computation, the same weights. Their sums travel in the gradient's all-reduce.
    """
    global_batch = cfg.batch_size
    variables = model.trainable_variables
    kernels = model_lib.conv_kernels(model)
    scalars = model_lib.scalar_parameters(model)
    whole_step_xla = cfg.xla and strategy.num_replicas_in_sync == 1
    num_classes = model.output.shape[-1]
    with strategy.scope():
        with_pool = keras.Model(model.inputs, [model.output, model.get_layer("pool").output])
        sums = tf.Variable(tf.zeros([len(LOOP_SUMS)]), trainable=False, name="loop_sums",
                           synchronization=tf.VariableSynchronization.ON_READ,
                           aggregation=tf.VariableAggregation.SUM)
        bounds = (lipschitz.BranchBounds(model, estimate=False) if cfg.max_branch_norm > 0
                  else None)

    def gradients(images, labels):
        with tf.GradientTape() as tape:
            logits, pooled = with_pool(images, training=True)
            logits = tf.cast(logits, tf.float32)
            per_example, labels = per_example_cross_entropy(labels, logits)
            cross_entropy = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            # the weight decay the model carries (build_model's kernel regularizers, as fit adds)
            decay = tf.add_n([tf.cast(term, tf.float32) for term in model.losses] + [0.0])
            loss = cross_entropy + tf.nn.scale_regularization_loss(decay)
            scaled = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, variables)
        top1 = top_k_hits(labels, logits, 1)
        top5 = top_k_hits(labels, logits, min(5, logits.shape[-1]))
        return grads, tf.stack([cross_entropy, loss, tf.reduce_sum(top1), tf.reduce_sum(top5)]), \
            batch_moments(pooled, logits)

    if cfg.xla and not whole_step_xla:
        # Compiled on its own only then: a nested tf.function cannot hold the all-reduce
        # (`merge_call`) of the BN twin's synchronized batch norm under several replicas.
        gradients = tf.function(gradients, jit_compile=True)

    def step_fn(images, labels):
        grads, values, moments = gradients(images, labels)
        loss_scale = getattr(optimizer, "dynamic_scale", 1.0)
        total, replicas = global_gradient(list(grads) + [moments])  # one all-reduce
        total, moments = total[:-1], total[-1]
        norm = tf.linalg.global_norm(total)  # before any bound, as the loss scale carries it
        bound = tf.constant(False)
        if cfg.clip_norm > 0 or cfg.agc > 0:
            total, bound = bound_gradients(total, variables, kernels, cfg, norm, loss_scale)
        # each replica adds its share of the step's values (`sums` is summed over replicas), and
        # gives SummedSGD the global gradient itself (no second all-reduce)
        grads = total
        values = tf.concat([values, tf.stack([norm / tf.cast(loss_scale, tf.float32),
                                              tf.cast(bound, tf.float32),
                                              *batch_statistics(moments, num_classes)]) / replicas],
                           0)
        if cfg.scalar_lr_factor != 1:
            grads = scale_scalar_gradients(grads, variables, scalars, cfg.scalar_lr_factor)
        optimizer.apply_gradients(zip(grads, variables))
        return values

    if whole_step_xla:
        step_fn = tf.function(step_fn, jit_compile=True)

    def add(values):
        sums.assign_add(values)

    @tf.function
    def train_loop(iterator, steps):
        strategy.run(lambda: sums.assign(tf.zeros([len(LOOP_SUMS)])))
        for _ in tf.range(steps):
            strategy.run(lambda images, labels: add(step_fn(images, labels)), args=next(iterator))
            if bounds is not None:
                bounds.project(cfg.max_branch_norm, optimizer)
        return sums.read_value()

    return train_loop


EVAL_SUMS = ("top1_hits", "top5_hits", "examples", "cross_entropy")  # an evaluation step's sums


def build_eval_step(strategy, model):
    """The compiled evaluation step: `eval_step(iterator)` returns the sums over one global batch
    of the `EVAL_SUMS` values, in that order, padding weighted 0."""

    def step_fn(images, labels, weights):
        logits = tf.cast(model(images, training=False), tf.float32)
        top1 = top_k_hits(labels, logits, 1) * weights
        top5 = top_k_hits(labels, logits, min(5, logits.shape[-1])) * weights
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits) * weights
        return tf.reduce_sum(top1), tf.reduce_sum(top5), tf.reduce_sum(weights), tf.reduce_sum(ce)

    @tf.function
    def eval_step(iterator):
        out = strategy.run(step_fn, args=next(iterator))
        return [strategy.reduce("SUM", t, axis=None) for t in out]

    return eval_step
