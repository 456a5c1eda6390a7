"""Data parallelism across devices (§5.2: "one machine with 8 NVIDIA P100 GPUs").

`--worker_gpu=N` (tensor2tensor's flag) mirrors the model on N local devices with
`tf.distribute.MirroredStrategy`: each replica takes its share of the global batch and
the gradients are summed across replicas before every update (see `trainer.StepFunctions`).
Beyond one machine, set `TF_CONFIG` (TensorFlow's standard cluster description) on every
worker and `MultiWorkerMirroredStrategy` spans them all.

    t2t-trainer ... --worker_gpu=8                               # one machine, 8 GPUs
    TF_CONFIG='{"cluster": {"worker": ["host1:2222", "host2:2222"]},
                "task": {"type": "worker", "index": 0}}' t2t-trainer ... --worker_gpu=8
"""

import json
import os

import tensorflow as tf


def strategy_for(worker_gpu: int) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy under TF_CONFIG, MirroredStrategy for worker_gpu > 1, else the default."""
    if worker_gpu < 1:
        raise ValueError(f"--worker_gpu={worker_gpu}: must be at least 1.")
    if _cluster_workers() > 1:
        return tf.distribute.MultiWorkerMirroredStrategy()
    if worker_gpu == 1:
        return tf.distribute.get_strategy()
    return tf.distribute.MirroredStrategy(local_devices(worker_gpu))


def local_devices(count: int) -> list:
    """The first `count` logical GPUs, or logical CPUs where there is no GPU (as in the tests)."""
    gpus = tf.config.list_logical_devices("GPU")
    devices = gpus or tf.config.list_logical_devices("CPU")
    if len(devices) < count:
        kind = "GPUs" if gpus else "devices (no GPU found)"
        raise ValueError(f"--worker_gpu={count}: this machine has only {len(devices)} {kind}; "
                         f"lower --worker_gpu or check CUDA_VISIBLE_DEVICES.")
    return [device.name for device in devices[:count]]


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes the model directory (always, unless it is a non-chief worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def checkpoint_directory(strategy: tf.distribute.Strategy, output_dir: str) -> str:
    """Where this process saves: `output_dir` for the chief, a private scratch directory otherwise.

    Under MultiWorkerMirroredStrategy every worker must take part in each save (the
    variables are synchronised by collectives), but only the chief's copy is kept.
    """
    if is_chief(strategy):
        return output_dir
    resolver = strategy.cluster_resolver
    return os.path.join(output_dir, f"{resolver.task_type}_{resolver.task_id}_scratch")


def skip_together(gradients):
    """Poisons every replica's gradients (NaN) when those of any replica are not finite.

    Keras' LossScaleOptimizer checks each replica's own gradients before the sum and acts
    on the first replica's verdict, so an overflow on another replica went into the summed
    update (and the weights) while the loss scale stayed. Made non-finite everywhere, the
    step is skipped on every replica and the scale halved, as on one device.
    """
    context = tf.distribute.get_replica_context()
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(_values(gradient))) for gradient in gradients])
    # ReduceOp has SUM and MEAN only: count the replicas that overflowed.
    every_finite = context.all_reduce(tf.distribute.ReduceOp.SUM, 1.0 - tf.cast(finite, tf.float32)) == 0
    poison = tf.where(every_finite, 0.0, float("nan"))
    return [_add_to_values(gradient, poison) for gradient in gradients]


def _values(gradient):
    return gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient


def _add_to_values(gradient, scalar):
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values + tf.cast(scalar, gradient.dtype), gradient.indices,
                                gradient.dense_shape)
    return gradient + tf.cast(scalar, gradient.dtype)


def check_clock_free(train_minutes: float, save_checkpoints_secs: int) -> None:
    """Time bounds are per process: across workers they would stop or save at different steps.

    Every worker must take part in each update and each save, so a worker whose clock said
    "stop" or "save" one step before another's would leave the rest waiting on a collective.
    """
    if _cluster_workers() > 1 and (train_minutes or save_checkpoints_secs):
        raise ValueError("--train_minutes and --save_checkpoints_secs follow each worker's own clock, so under "
                         "TF_CONFIG the workers would part ways; use --train_steps and --save_checkpoints_steps.")


def _cluster_workers() -> int:
    config = os.environ.get("TF_CONFIG")
    if not config:
        return 0
    try:
        cluster = json.loads(config).get("cluster", {})
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}); see tf.distribute.cluster_resolver.") from None
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))
