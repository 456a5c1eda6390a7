"""Each replica reads training files of its own (data parallelism, §5.2), and resumes where it stopped.

With R replicas in sync (`--worker_gpu=R` in one process, or all the workers' under
TF_CONFIG), replica r reads the train shards r::R (in name order) through its own
`input_pipeline.batched_dataset`, in batches of `bucket_batch_sizes(hparams, 1)`
examples, so no worker reads or tokenizes another's files (t2t-datagen writes one shard
per 50,000 pairs for that). The pipelines are fed with `distribute_datasets_from_function`:
in one process one pipeline per replica (PER_REPLICA input), so two replicas of one
process read exactly what two one-replica workers read; under MultiWorkerMirroredStrategy
one dataset per worker, whose elements TensorFlow hands to the worker's local replicas in
turn (round-robin, `MultiDeviceIterator`), so that dataset alternates the pipelines of
those replicas (global replica ids `worker × local replicas + j`, as the strategy numbers
them). Fewer shards than replicas stop at the start: two replicas would read the same files.

Epochs are the pipelines' own: epoch e of replica r is its files shuffled and batched with
seed random_seed + e, and each pipeline runs on into its next epoch without the others
noticing, so every replica takes one batch per micro-step however many batches its files
make. Each batch comes tagged with its pipeline's position after it (epoch, batches taken
from that epoch); before each save the tags of all replicas are gathered (a collective
under TF_CONFIG, so the chief's checkpoint holds every pipeline's position) into the
checkpoint's `data_epoch` and `data_batches_taken`, one entry per replica. A resumed run
starts each pipeline at the batch it would have taken next, skipping within that epoch only.

One replica is exactly the single pipeline of earlier versions, whose checkpoints (scalar
`data_epoch`, `data_batches_taken`) resume exactly. Positions saved for another number of
replicas cannot be mapped onto these files: every pipeline then starts the epoch after the
furthest one begun (none is read again), and the run says so.
"""

import numpy as np
import tensorflow as tf

from t2t_lite.data import datagen, input_pipeline
from t2t_lite.train import tf_config

_LAST_EPOCH = np.iinfo(np.int64).max  # the pipelines are endless


class TrainingBatches:
    """Endless training batches, one per replica per `next()`, each replica from its own train files."""

    def __init__(self, problem, data_dir, hparams, random_seed, strategy, log=print):
        self.problem, self.data_dir, self.hparams = problem, data_dir, hparams
        self.random_seed, self.strategy, self.log = random_seed, strategy, log
        self.num_replicas = strategy.num_replicas_in_sync
        self.num_files = len(datagen.complete_shards(data_dir, problem.base_name, "train"))
        if 0 < self.num_files < self.num_replicas:
            raise ValueError(
                f"--data_dir={data_dir} holds {self.num_files} train shards of {problem.name}, but training has "
                f"{self.num_replicas} replicas, and each replica reads shards of its own. Regenerate the data with at "
                f"least {self.num_replicas} train shards (t2t-datagen writes one per {datagen.PAIRS_PER_SHARD:,} "
                f"pairs, at least the problem's num_shards['train']), or train with fewer replicas (--worker_gpu, "
                f"the workers of TF_CONFIG)."
            )
        # Per replica; any shape, so a checkpoint with scalars (one pipeline, earlier versions) restores too.
        zeros = tf.zeros([self.num_replicas], tf.int64)
        self.epoch = tf.Variable(zeros, shape=tf.TensorShape(None), trainable=False, name="data_epoch")
        self.batches_taken = tf.Variable(zeros, shape=tf.TensorShape(None), trainable=False, name="data_batches_taken")
        self._iterator = self._tags = self._peeked = None

    # -- Where each pipeline starts --------------------------------------------------------
    def _start_positions(self) -> list:
        """(epoch, batches to skip) of each replica, from the restored variables."""
        epochs, taken = np.atleast_1d(self.epoch.numpy()), np.atleast_1d(self.batches_taken.numpy())
        if len(epochs) == self.num_replicas:
            return list(zip(epochs.tolist(), taken.tolist()))
        start = int(max(epochs + (taken > 0)))
        self.log(
            f"The checkpoint holds the data positions of {len(epochs)} input pipeline(s), and this run has "
            f"{self.num_replicas} replicas reading other files: every replica starts epoch {start} of its own "
            f"train shards (no epoch already begun is read again)."
        )
        return [(start, 0)] * self.num_replicas

    def _pipeline(self, replica: int, start_epoch: int, start_taken: int) -> tf.data.Dataset:
        """Replica `replica`'s endless (batch, [[replica, epoch, batches taken from it]]) from its own files."""
        share = (replica, self.num_replicas)

        # Plain Python that builds datasets, with no tensor-dependent branch: AutoGraph would rewrite it and all it
        # calls (the input pipeline's builders) in every new process, seconds of CPU for nothing.
        @tf.autograph.experimental.do_not_convert
        def epoch_batches(epoch):
            batches = input_pipeline.batched_dataset(
                self.problem,
                "train",
                self.data_dir,
                self.hparams,
                shuffle=True,
                repeat=False,
                seed=self.random_seed + epoch,
                share=share,
            )
            skip = tf.where(epoch == start_epoch, tf.constant(start_taken, tf.int64), tf.constant(0, tf.int64))
            taken = batches.enumerate(start=1).skip(skip)
            tagged = taken.map(lambda count, batch: (batch, position(epoch, count)))
            # An end marker (count -1): an epoch after another that gave no batch would loop forever unnoticed.
            empty = tf.nest.map_structure(
                lambda spec: tf.zeros([0] * spec.shape.rank, spec.dtype), batches.element_spec
            )
            return tagged.concatenate(tf.data.Dataset.from_tensors((empty, position(epoch, -1))))

        def position(epoch, count):
            return tf.stack([tf.constant(replica, tf.int64), epoch, tf.cast(count, tf.int64)])[None]

        def check(state, element):
            """state: [end markers passed, batches since the last]; a second empty epoch in a row stops."""
            end = element[1][0, 2] < 0
            empty_again = tf.logical_and(end, tf.logical_and(state[0] > 0, state[1] == 0))
            assertion = tf.debugging.Assert(
                tf.logical_not(empty_again),
                [
                    f"Problem {self.problem.name}: train shards {replica}::{self.num_replicas} in {self.data_dir} give "
                    f"no batches (every example longer than max_length?)."
                ],
            )
            with tf.control_dependencies([assertion]):
                state = tf.where(end, tf.stack([state[0] + 1, 0]), state + [0, 1])
            return state, element

        epochs = tf.data.Dataset.range(start_epoch, _LAST_EPOCH).flat_map(epoch_batches)
        checked = epochs.scan(tf.zeros([2], tf.int64), check)
        return checked.filter(lambda batch, tag: tag[0, 2] >= 0)

    def _dataset(self, input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        """The batches of the replicas this input pipeline feeds, alternating as their devices take them."""
        local = self.num_replicas // input_context.num_input_pipelines
        replicas = [input_context.input_pipeline_id * local + j for j in range(local)]
        if self.num_replicas > 1:
            who = (
                f"worker {input_context.input_pipeline_id} of {input_context.num_input_pipelines}"
                if tf_config.is_multi_worker()
                else f"replica {replicas[0]} of {self.num_replicas}"
            )
            shards = sum(len(range(replica, self.num_files, self.num_replicas)) for replica in replicas)
            which = f" (replica{'s' * (local > 1)} {', '.join(map(str, replicas))})" * tf_config.is_multi_worker()
            self.log(f"{who} reads {shards} of {self.num_files} train shards{which}.")
        pipelines = [self._pipeline(replica, *self._starts[replica]) for replica in replicas]
        if len(pipelines) == 1:
            return pipelines[0].prefetch(tf.data.AUTOTUNE)
        turns = tf.data.Dataset.range(local).repeat()
        return tf.data.Dataset.choose_from_datasets(pipelines, turns).prefetch(tf.data.AUTOTUNE)

    # -- Taking batches, recording positions -------------------------------------------------
    def batch_spec(self):
        """The type spec of what `next()` returns (per replica: int32 [None, None] inputs and targets)."""
        self._start()
        return self._iterator.element_spec[0]

    def next(self):
        """The next batch of every replica (a distributed value when there are several).

        A shard that cannot be read (cut short, overwritten) stops training with its name
        (`datagen.DamagedShardError`): TensorFlow's read error names no file.
        """
        if self._peeked is not None:
            batch, self._peeked = self._peeked, None
            return batch
        self._start()
        try:
            batch, self._tags = next(self._iterator)
        except tf.errors.DataLossError as error:
            datagen.check_shards(datagen.complete_shards(self.data_dir, self.problem.base_name, "train"))
            raise datagen.DamagedShardError(
                f"Reading the train shards of {self.problem.name} in {self.data_dir} failed ({type(error).__name__}), "
                f"yet each reads to its end now: rerun to resume from the last checkpoint."
            ) from None
        return batch

    def peek(self) -> None:
        """Takes the first batch now, which the next `next()` returns: an unreadable shard is then named
        before the run writes anything (its ckpt-0)."""
        if self._peeked is None:
            self._peeked = self.next()

    def _start(self):
        """The input pipelines, from the positions restored (so called after the restore)."""
        if self._iterator is None:
            self._starts = self._start_positions()
            options = None
            if self.num_replicas > 1 and not tf_config.is_multi_worker():  # one pipeline per local replica
                # Replicas on CPU devices read host memory already. Prefetching "to the device" would add a
                # MultiDeviceIterator whose destruction, at the end of a run, waited 0-30 s for an idle thread.
                on_cpus = all("CPU" in device.upper() for device in self.strategy.extended.worker_devices)
                options = tf.distribute.InputOptions(
                    experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
                    experimental_fetch_to_device=not on_cpus,
                )
            self._iterator = iter(self.strategy.distribute_datasets_from_function(self._dataset, options))

    def stopper(self):
        """An ExitStack callback that stops the input pipelines, unless a TF_CONFIG worker finished.

        Such a worker ends at `distribution.leave_cluster`'s os._exit right after, which stops them
        too, whereas stopping them here waits for their prefetching to wind down: up to seconds at
        the end of a short run, while every other worker waits for it at the exit barrier. A worker
        that stops on an error, and a run without TF_CONFIG, stop them here.
        """

        def stop(error_type, error, traceback):
            if error_type is not None or not tf_config.is_multi_worker():
                self.close()

        return stop

    def close(self) -> None:
        """Stops the input pipelines now: their prefetching threads end here, not at some later garbage collection.

        The pipelines' functions refer back to this object, so without this the iterator lives in a
        reference cycle, its threads running, until Python's next full collection.
        """
        self._iterator = self._tags = self._peeked = None

    def record_positions(self) -> None:
        """Every replica's position into `epoch` and `batches_taken` (call on every worker before a save)."""
        if self._tags is None:  # nothing taken since the restore: the restored positions stand
            return
        if tf_config.is_multi_worker():  # other workers hold the other replicas' tags
            tags = self.strategy.gather(self._tags, axis=0).numpy()
        else:
            tags = np.concatenate([tag.numpy() for tag in self.strategy.experimental_local_results(self._tags)])
        tags = tags[np.argsort(tags[:, 0])]
        self.epoch.assign(tags[:, 1])
        self.batches_taken.assign(tags[:, 2])
