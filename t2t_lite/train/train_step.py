"""One optimizer update of §5: the gradient of about `tokens_per_step` target tokens, however they arrive.

§5.1 batches "approximately 25000 source tokens and 25000 target tokens". A step's loss is the
label-smoothed cross-entropy summed over its non-padding target tokens T, divided by their count:

    L = (1/|T|) · Σ_{t∈T} ℓ_t,    ∇L = Σ_replicas Σ_{i=1..k} ∇(Σ_{t∈T_i} ℓ_t) / |T|

When replicas × `hparams.batch_size` is smaller than `tokens_per_step`, each replica accumulates
k = ceil(tokens_per_step / (replicas · batch_size)) micro-batches T_i before one update, and the
sum is divided by the token count of all of them: the update equals that of one big batch.
With hparams.guided_alignment_weight = λ > 0 each ℓ-sum also holds λ times the batch's alignment term
(t2t_lite/train/guided_alignment.py), divided by the same |T|.
`t2t_lite.train.trainer` drives these functions; the benchmarks (bench/train.py) time them alone.
"""

import math
import typing

import keras
import tensorflow as tf

from t2t_lite.data.word_alignment import ALIGNMENT
from t2t_lite.train import distribution, guided_alignment, loss


class UpdateSums(typing.NamedTuple):
    """What a step returns, summed over its micro-batches and replicas: the vector [loss, NLL, tokens]."""

    loss: float  # Σ label-smoothed cross-entropy ℓ_t over the non-padding target tokens
    negative_log_likelihood: float  # Σ −log p(y_t), without label smoothing
    target_tokens: float  # |T|, the non-padding target tokens

    @classmethod
    def of(cls, vector) -> "UpdateSums":
        return cls(*(float(value) for value in getattr(vector, "numpy", lambda: vector)()))


TARGET_TOKENS = UpdateSums._fields.index("target_tokens")  # the position of |T| in a step's summed vector


# -- Sizes the user sees at start ------------------------------------------------------
def micro_batches_per_step(hparams, num_replicas: int) -> int:
    """k of gradient accumulation: micro-batches per optimizer update (1 = none)."""
    per_micro_batch = num_replicas * hparams.batch_size
    if not hparams.tokens_per_step or hparams.tokens_per_step <= per_micro_batch:
        return 1
    return math.ceil(hparams.tokens_per_step / per_micro_batch)


# -- The step functions ----------------------------------------------------------------
def _gradients(model, optimizer, batch, hparams, scale):
    """Gradients of scale × (summed smoothed loss), and the batch's (loss sum, NLL sum, tokens)."""
    with tf.GradientTape() as tape:
        loss_sum, nll_sum, tokens = _loss_sums(model, batch, hparams)
        scaled = loss_sum * scale
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            scaled = optimizer.scale_loss(scaled)
    gradients = tape.gradient(scaled, model.trainable_variables)
    return gradients, tf.stack([loss_sum, nll_sum, tokens])


def _loss_sums(model, batch, hparams):
    """(smoothed loss sum, NLL sum, tokens) of a training batch, projecting real target tokens only.

    The pre-softmax projection and the softmax over the vocabulary are the largest
    per-token cost of the step (d_model × V per token), so padding positions skip them:
    the decoder's output is gathered at the non-padding targets first. XLA needs static
    shapes, so under `xla_compile` every position is projected and padding masked in the loss.
    """
    targets = batch["targets"]
    guided = guided_alignment.is_on(hparams)
    if hparams.xla_compile and not guided:
        return loss.padded_cross_entropy(model(batch, training=True), targets, hparams.label_smoothing)
    if hparams.xla_compile:
        logits, attention = model(_sides(batch), training=True, return_attention=True)
        sums = loss.padded_cross_entropy(logits, targets, hparams.label_smoothing)
        return _with_alignment_loss(sums, attention, batch, hparams)
    hidden, attention = model.decoder_hidden(_sides(batch), training=True, return_attention=guided)
    real = tf.where(tf.not_equal(targets, loss.PADDING_ID))
    logits = model.logits(tf.gather_nd(hidden, real))
    sums = loss.padded_cross_entropy(logits, tf.gather_nd(targets, real), hparams.label_smoothing)
    return _with_alignment_loss(sums, attention, batch, hparams) if guided else sums


def _sides(batch):
    """The model's features of a batch: its inputs and targets, without the links a guided batch carries."""
    return {"inputs": batch["inputs"], "targets": batch["targets"]}


def _with_alignment_loss(sums, attention, batch, hparams):
    """(smoothed loss sum + λ·L_a's sum, NLL sum, tokens): the guided-alignment term joins the loss that is
    divided by the step's tokens (t2t_lite/train/guided_alignment.py); the NLL stays the translation's."""
    loss_sum, nll_sum, tokens = sums
    return loss_sum + guided_alignment.weighted_loss_sum(attention, batch, hparams), nll_sum, tokens


def _target_tokens(batch):
    return tf.reduce_sum(tf.cast(tf.not_equal(batch["targets"], loss.PADDING_ID), tf.float32))


class StepFunctions:
    """The compiled `train_step` (k = 1) or `accumulate_step` + `apply_step` (k > 1), and `eval_step`.

    Each replica computes gradients of its summed loss; the Keras optimizer sums them over
    replicas, so dividing by the token count of the whole step (all replicas, all k
    micro-batches) gives the big batch's mean-loss gradient. Steps return the sums
    [loss, NLL, tokens] of what they saw, reduced over replicas.
    """

    def __init__(self, model, optimizer, hparams, strategy):
        self.model, self.optimizer, self.hparams, self.strategy = model, optimizer, hparams, strategy
        # XLA compiles forward and backward; the optimizer and the all-reduce stay outside it.
        # Traced without autograph: the steps use TensorFlow's own control flow, and autograph would rewrite
        # every function they call (Keras' layers and optimizer) at each trace, a second of every run's start.
        self._gradients = tf.function(
            _gradients, jit_compile=hparams.xla_compile, reduce_retracing=True, autograph=False
        )
        with strategy.scope():
            on_read = dict(
                trainable=False,
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.SUM,
            )
            self._accumulated = None
            self._accumulated_sums = tf.Variable(tf.zeros([3]), **on_read)
            self._on_read = on_read
        # Batches come in a few dozen shapes; one trace with unknown dimensions serves them all.
        # Distributed batches have no plain TensorSpec, so there TensorFlow generalizes after a retrace.
        batch_spec = {name: tf.TensorSpec([None, None], tf.int32) for name in ("inputs", "targets")}
        training_spec = dict(batch_spec)  # guided alignment: training batches carry their links, dev batches not
        if guided_alignment.is_on(hparams):
            training_spec[ALIGNMENT] = tf.TensorSpec([None, None, None], tf.bool)
        compile_step = (
            (lambda fn: tf.function(fn, reduce_retracing=True, autograph=False))
            if strategy.num_replicas_in_sync > 1
            else (lambda fn: tf.function(fn, input_signature=[training_spec], autograph=False))
        )
        self.train_step = compile_step(self._train_step)
        self.accumulate_step = compile_step(self._accumulate_step)
        self.apply_step = tf.function(self._apply_step, autograph=False)
        self.eval_step = tf.function(self._eval_step, input_signature=[batch_spec], autograph=False)

    def trace_once_for(self, batch_spec) -> None:
        """Several replicas: one trace for batches of any shape, `batch_spec` being the distributed batches' spec.

        Retraced as shapes come, a replica's graph would depend on the shapes its peers brought
        (one trace covers all local replicas), so one process and separate workers would round
        differently on the same batches; one device already has a single trace.
        """
        self.train_step = tf.function(self._train_step, input_signature=[batch_spec], autograph=False)
        self.accumulate_step = tf.function(self._accumulate_step, input_signature=[batch_spec], autograph=False)

    def _reduce(self, per_replica):
        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def _train_step(self, batch):
        def replica_step(batch):
            context = tf.distribute.get_replica_context()
            step_tokens = context.all_reduce(tf.distribute.ReduceOp.SUM, _target_tokens(batch))
            gradients, sums = self._gradients(
                self.model, self.optimizer, batch, self.hparams, 1.0 / tf.maximum(step_tokens, 1.0)
            )
            self.optimizer.apply_gradients(zip(self._agreed(gradients), self.model.trainable_variables))
            return sums

        return self._reduce(self.strategy.run(replica_step, args=(batch,)))

    def _agreed(self, gradients):
        """float16 on several replicas: an overflow on any replica skips the step on all of them."""
        if self.hparams.activation_dtype != "float16" or self.strategy.num_replicas_in_sync == 1:
            return gradients
        return distribution.skip_together(gradients)

    def build_accumulators(self):
        """Zero gradient sums, one per trainable variable, local to each replica (k > 1 only)."""
        with self.strategy.scope():
            self._accumulated = [
                tf.Variable(tf.zeros(v.shape, v.dtype), **self._on_read) for v in self.model.trainable_variables
            ]

    def _accumulate_step(self, batch):
        def replica_step(batch):
            # Dividing by the micro-batch's token budget keeps float16 sums in range.
            gradients, sums = self._gradients(
                self.model, self.optimizer, batch, self.hparams, 1.0 / self.hparams.batch_size
            )
            for accumulated, gradient in zip(self._accumulated, gradients):
                accumulated.assign_add(tf.convert_to_tensor(gradient))
            self._accumulated_sums.assign_add(sums)
            return sums

        return self._reduce(self.strategy.run(replica_step, args=(batch,)))

    def _apply_step(self):
        def replica_step():
            context = tf.distribute.get_replica_context()
            step_tokens = context.all_reduce(
                tf.distribute.ReduceOp.SUM, self._accumulated_sums.read_value()[TARGET_TOKENS]
            )
            scale = self.hparams.batch_size / tf.maximum(step_tokens, 1.0)
            gradients = [accumulated.read_value() * scale for accumulated in self._accumulated]
            self.optimizer.apply_gradients(zip(self._agreed(gradients), self.model.trainable_variables))
            for accumulated in self._accumulated + [self._accumulated_sums]:
                accumulated.assign(tf.zeros_like(accumulated))

        self.strategy.run(replica_step)

    def _eval_step(self, batch):
        logits = self.model(batch, training=False)
        return loss.eval_sums(logits, batch["targets"], self.hparams.label_smoothing)

    def all_finite(self) -> bool:
        """Whether every model weight is finite (checked before each save)."""
        return bool(tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in self.model.trainable_variables]))
