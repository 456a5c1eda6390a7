"""Data parallelism across devices (§5.2: "one machine with 8 NVIDIA P100 GPUs").

`--worker_gpu=N` (tensor2tensor's flag) mirrors the model on N local devices with
`tf.distribute.MirroredStrategy`: each replica takes its share of the global batch and
the gradients are summed across replicas before every update (see `train_step.StepFunctions`).
Beyond one machine, set `TF_CONFIG` (TensorFlow's standard cluster description) on every
worker and `MultiWorkerMirroredStrategy` spans them all (`tf_config` reads and writes it;
t2t-make-tf-configs writes one per task, as tensor2tensor's tool).

    t2t-trainer ... --worker_gpu=8                               # one machine, 8 GPUs
    TF_CONFIG='{"cluster": {"worker": ["host1:2222", "host2:2222"]},
                "task": {"type": "worker", "index": 0}}' t2t-trainer ... --worker_gpu=8
"""

import contextlib
import os
import re
import subprocess
import sys
import tempfile

import tensorflow as tf
from tensorflow.python.eager import context

from t2t_lite.train import tf_config

# + task type, index and process id: where a non-chief worker saves, deleted when it finishes.
_SCRATCH_PREFIX = "t2t_scratch_"
_EXIT_BARRIER_MS = 10 * 60 * 1000  # how long a finished worker waits for the others before leaving anyway
# What a collective raises on the surviving workers when a peer dies (connection reset,
# the coordination service's missed heartbeats, an aborted or timed-out collective).
WORKER_FAILURES = (
    tf.errors.UnavailableError,
    tf.errors.AbortedError,
    tf.errors.DeadlineExceededError,
    tf.errors.CancelledError,
)


def strategy_for(worker_gpu: int) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy under TF_CONFIG, MirroredStrategy for worker_gpu > 1, else the default.

    Under TF_CONFIG, call it once per process (`check_strategy` checks the settings without
    it): a second MultiWorkerMirroredStrategy restarts the server's collective executor, and a
    peer's first collective that reached the old one is never answered, so every worker waits
    forever (each blocked in the broadcast of the first variable's initial value).
    """
    check_strategy(worker_gpu)
    if tf_config.is_multi_worker():
        return tf.distribute.MultiWorkerMirroredStrategy()
    if worker_gpu == 1:
        return tf.distribute.get_strategy()
    return tf.distribute.MirroredStrategy(local_devices(worker_gpu))


def check_strategy(worker_gpu: int) -> None:
    """Stops on a bad --worker_gpu or TF_CONFIG (not JSON, or a task not in its cluster) before any work, without
    starting the cluster."""
    if worker_gpu < 1:
        raise ValueError(f"--worker_gpu={worker_gpu}: must be at least 1.")
    if not tf_config.is_multi_worker() and worker_gpu > 1:
        local_devices(worker_gpu)


def local_devices(count: int) -> list:
    """The first `count` logical GPUs, or logical CPUs where there is no GPU (as in the tests)."""
    gpus = tf.config.list_logical_devices("GPU")
    devices = gpus or tf.config.list_logical_devices("CPU")
    if len(devices) < count:
        kind = "GPUs" if gpus else "devices (no GPU found)"
        raise ValueError(
            f"--worker_gpu={count}: this machine has only {len(devices)} {kind}; "
            f"lower --worker_gpu or check CUDA_VISIBLE_DEVICES."
        )
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
    variables are synchronised by collectives), but only the chief's copy is kept: the
    others write into a temporary directory outside `output_dir` (so TensorBoard and
    t2t-avg-all see the chief's files only), deleted by the trainer when the run ends.
    """
    if is_chief(strategy):
        return output_dir
    resolver = strategy.cluster_resolver
    return tempfile.mkdtemp(prefix=f"{_SCRATCH_PREFIX}{resolver.task_type}_{resolver.task_id}_{os.getpid()}_")


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
        return tf.IndexedSlices(
            gradient.values + tf.cast(scalar, gradient.dtype), gradient.indices, gradient.dense_shape
        )
    return gradient + tf.cast(scalar, gradient.dtype)


def check_clock_free(train_minutes: float, save_checkpoints_secs: int) -> None:
    """Time bounds are per process: across workers they would stop or save at different steps.

    Every worker must take part in each update and each save, so a worker whose clock said
    "stop" or "save" one step before another's would leave the rest waiting on a collective.
    """
    if tf_config.is_multi_worker() and (train_minutes or save_checkpoints_secs):
        raise ValueError(
            "--train_minutes and --save_checkpoints_secs follow each worker's own clock, so under "
            "TF_CONFIG the workers would part ways; use --train_steps and --save_checkpoints_steps."
        )


# Run as a child process: a thread of the trainer's own could not run while TensorFlow starts
# the cluster, which holds Python's GIL as it waits for the other workers.
_START_WATCHDOG = """
import os, select, signal, sys
parent, seconds, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
if not select.select([sys.stdin], [], [], seconds)[0]:  # no word from the parent: it is still starting
    print(message, file=sys.stderr, flush=True)
    os.kill(parent, signal.SIGKILL)
"""


@contextlib.contextmanager
def cluster_start_deadline(minutes: float):
    """Under TF_CONFIG: kills the process unless the function it yields is called within `minutes`.

    Call it once the cluster has started and run its first collectives (each variable's
    initial value, broadcast by the chief); leaving the block calls it too. Until every
    worker has joined, the others wait there, inside TensorFlow (its coordination service,
    or a collective) with no limit a user can set. A watchdog process prints what to do and
    kills the worker (SIGKILL, as its main thread may be blocked in TensorFlow); a chief's
    lock left behind is taken over by its relaunch (`run_lock`). `minutes` 0, or no
    TF_CONFIG cluster: no bound.
    """
    if not tf_config.is_multi_worker() or not minutes:
        yield lambda: None
        return
    watchdog = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _START_WATCHDOG,
            str(os.getpid()),
            str(60.0 * minutes),
            f"t2t-trainer: {_start_timeout_message(minutes)}",
        ],
        stdin=subprocess.PIPE,
    )

    def started():
        if not watchdog.stdin.closed:
            watchdog.stdin.close()  # end of input: the watchdog leaves
            watchdog.wait()

    try:
        yield started
    finally:
        started()


def _start_timeout_message(minutes: float) -> str:
    cluster, own = tf_config.own_task()
    tasks = [(job, index, address) for job in ("chief", "worker") for index, address in enumerate(cluster.get(job, []))]
    me = next((f"{job} {index} ({address})" for job, index, address in tasks if (job, index) == own), "this task")
    others = ", ".join(f"{job} {index} ({address})" for job, index, address in tasks if (job, index) != own)
    return (
        f"the TF_CONFIG cluster did not come together within --cluster_start_minutes={minutes:g}: {me} "
        f"waited for {others}. Check that each was started with its own TF_CONFIG and can reach the "
        f"others' host:port; then stop every worker and relaunch all of them with the same command."
    )


def leave_cluster() -> None:
    """Ends a worker of a TF_CONFIG run once every worker has finished training (no-op otherwise).

    Called by `trainer.train_and_evaluate` before it returns, because what follows would
    hang: destroying the input iterator of a MultiWorkerMirroredStrategy run, and the
    strategy's own teardown, wait on threads and heartbeats of workers that are leaving
    too, for seconds to minutes, and log errors about them (tensorflow/tensorflow#58434).
    By now everything of the run is on disk (checkpoints are written synchronously,
    summaries flushed, a non-chief's scratch directory removed by the trainer), so after a
    barrier that every worker reaches, the process exits at once, with status 0.
    """
    if not tf_config.is_multi_worker():
        return
    try:
        context.context().wait_at_barrier("t2t_trainer_finished", _EXIT_BARRIER_MS)
    except tf.errors.OpError as error:  # a worker that died after the last save: our part is done
        print(f"t2t-trainer: finished, but not every worker reached the end ({type(error).__name__}).", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def lost_worker_message(error: Exception, output_dir: str) -> str:
    """What to do when a collective failed because another worker stopped: name it, relaunch all.

    MultiWorkerMirroredStrategy cannot continue with fewer workers (each update needs
    every replica's gradients), so the survivors stop rather than wait forever.
    """
    cluster, own = tf_config.own_task()
    peers = [(job, int(index)) for job, index in re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", str(error))]
    lost = sorted({peer for peer in peers if peer != own and peer[0] in cluster and peer[1] < len(cluster[peer[0]])})
    named = ", ".join(f"{job} {index} ({cluster[job][index]})" for job, index in lost) or "another worker"
    latest = tf.train.latest_checkpoint(output_dir)
    resume = f"from {latest}" if latest else f"from the start (no checkpoint in {output_dir} yet)"
    # The first line of TensorFlow's message, without the {{function_node ...}} of the op that failed.
    reason = re.sub(r"\{\{[^}]*\}\}\s*", "", (str(error).strip().splitlines() or [""])[0]) or "no detail"
    return (
        f"lost {named} of the TF_CONFIG cluster ({type(error).__name__}: {reason}). Training cannot go on "
        f"with fewer workers: stop every worker, then relaunch all of them with the same command and their "
        f"own TF_CONFIG; they resume {resume}."
    )
