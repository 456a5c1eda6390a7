"""Early stopping on a dev metric, with tensor2tensor's --eval_early_stopping_* flags.

Not the paper (§5 trains for a fixed 100,000 or 300,000 steps); what a researcher adapting a
model to a small corpus needs. After each evaluation at step s, the chosen metric's value v
is compared with the best so far b, reached at step s_b. It improves when

    v < b − δ   (a metric to minimize: loss, perplexity)
    v > b + δ   (one to maximize: neg_log_perplexity, accuracy, accuracy_per_sequence, bleu)

and then b, s_b ← v, s. The run stops at the first evaluation where s − s_b ≥ `steps`
(tensor2tensor's "no improvement in `eval_early_stopping_steps` steps").

`BestSoFar` holds (b, s_b) and the step of the last evaluation as variables of the training
checkpoint, so a run killed and resumed stops at exactly the step the uninterrupted run
stops at, and a rerun of a run that stopped early says so instead of training on. The same b
chooses the checkpoint kept in `<output_dir>/best/` (`t2t_lite.train.best_checkpoint`).
"""

import dataclasses
import math

import tensorflow as tf

from t2t_lite.hparam import setting
from t2t_lite.train import tf_config

# Each metric the trainer can judge by, and whether lower is better.
LOWER_IS_BETTER = {
    "loss": True,
    "perplexity": True,
    "neg_log_perplexity": False,
    "accuracy": False,
    "accuracy_per_sequence": False,
    "bleu": False,  # sacreBLEU of the dev split's first lines, decoded (t2t_lite.decode.dev_bleu)
}

DECODED_METRICS = ("bleu",)  # not from the teacher-forced evaluation: the trainer needs a dev scorer


@dataclasses.dataclass(frozen=True)
class EarlyStopping:
    """The metric that chooses the best checkpoint and, with `steps` > 0, stops the run."""

    metric: str = setting(
        "loss",
        "The dev metric that chooses --output_dir/best/ and stops early; bleu decodes the dev split's first "
        "--eval_bleu_lines lines with --decode_hparams.",
        flag="eval_early_stopping_metric",
        choices=sorted(LOWER_IS_BETTER),
    )
    steps: int = setting(
        0,
        "Stop when --eval_early_stopping_metric has not improved for this many steps (evaluated every "
        "--local_eval_frequency); 0 = never stop early.",
        flag="eval_early_stopping_steps",
    )
    delta: float = setting(
        0.0, "The least change of the metric that counts as an improvement.", flag="eval_early_stopping_metric_delta"
    )
    minimize: bool = setting(
        None,
        "Whether lower is better; default: the metric's own (loss, perplexity lower; the others higher).",
        flag="eval_early_stopping_metric_minimize",
    )

    def __post_init__(self):
        if self.metric not in LOWER_IS_BETTER:
            raise ValueError(
                f"--eval_early_stopping_metric={self.metric}: use one of {', '.join(sorted(LOWER_IS_BETTER))}."
            )
        if self.steps < 0 or not self.delta >= 0 or not math.isfinite(self.delta):
            raise ValueError(
                f"--eval_early_stopping_steps={self.steps} and --eval_early_stopping_metric_delta={self.delta}: "
                f"both must be zero or positive."
            )

    @property
    def lower_is_better(self) -> bool:
        return LOWER_IS_BETTER[self.metric] if self.minimize is None else self.minimize

    def improves(self, value: float, best: float) -> bool:
        """Whether `value` beats `best` by more than delta (NaN never improves; anything beats no best)."""
        if math.isnan(value):
            return False
        if math.isnan(best):
            return True
        return value < best - self.delta if self.lower_is_better else value > best + self.delta


class BestSoFar(tf.Module):
    """(metric, best value, its step, the last evaluated step): checkpointed with the run."""

    def __init__(self):
        super().__init__(name="early_stopping")
        self.metric = tf.Variable("", dtype=tf.string, trainable=False)
        self.value = tf.Variable(math.nan, dtype=tf.float64, trainable=False)
        self.step = tf.Variable(-1, dtype=tf.int64, trainable=False)
        self.evaluated_step = tf.Variable(-1, dtype=tf.int64, trainable=False)

    @property
    def best(self) -> tuple:
        return float(self.value.numpy()), int(self.step.numpy())

    def update(self, rule: EarlyStopping, step: int, value: float) -> bool:
        """Records the evaluation at `step`; returns whether it is the new best."""
        self.evaluated_step.assign(step)
        if self.metric.numpy().decode() != rule.metric:  # a rerun judged by another metric: its best starts here
            self.metric.assign(rule.metric)
            self.value.assign(math.nan)
            self.step.assign(-1)
        if not rule.improves(value, float(self.value.numpy())):
            return False
        self.value.assign(value)
        self.step.assign(step)
        return True

    def stops(self, rule: EarlyStopping, step: int) -> bool:
        """Whether the run stops at `step` (an evaluated step `steps` or more after the best one)."""
        best_step = int(self.step.numpy())
        return bool(rule.steps) and best_step >= 0 and step - best_step >= rule.steps

    def stopped_before(self, rule: EarlyStopping, step: int) -> bool:
        """Whether a restored run at `step` had already stopped there (its last evaluation said so)."""
        same_metric = self.metric.numpy().decode() == rule.metric
        return same_metric and int(self.evaluated_step.numpy()) == step and self.stops(rule, step)

    def stop_line(self, rule: EarlyStopping, step: int) -> str:
        value, best_step = self.best
        return (
            f"Early stopping at step {step}: {rule.metric} has not improved by more than {rule.delta:g} in "
            f"{step - best_step} steps (--eval_early_stopping_steps={rule.steps}); best {rule.metric} "
            f"{value:.4f} at step {best_step}."
        )


def chief_value(strategy, value: float, is_chief: bool) -> float:
    """Under TF_CONFIG, the chief's `value` on every worker, so that all of them decide alike.

    Each worker evaluates the same dev batches with the same weights; sharing the chief's
    figure keeps their decisions (and so the step they stop at) equal even where hosts round
    differently. A sum over all replicas in which only the chief's replicas count (each a
    1/replicas share of it). One process: `value` itself.
    """
    if not tf_config.is_multi_worker():
        return value
    share = value / len(strategy.extended.worker_devices) if is_chief else 0.0
    return float(_all_reduce_sum(strategy, tf.constant(share, tf.float64)).numpy())


@tf.function
def _all_reduce_sum(strategy, value):
    def replica_fn():
        # A copy on the replica's own device: the all-reduce sends from and to the replicas' devices.
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, tf.identity(value))

    return strategy.experimental_local_results(strategy.run(replica_fn))[0]
