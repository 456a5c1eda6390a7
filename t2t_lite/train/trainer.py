"""Training (§5): batches of about 25,000 target tokens, Adam on eq. 3, checkpoints, evaluation.

`train_and_evaluate` is the library entry point of `t2t-trainer`. The loop is written
out (tf.GradientTape, no `model.fit`) so the paper's batch, the loss normalisation
and the checkpoints are explicit:

* One optimizer step sees about `hparams.tokens_per_step` tokens (§5.1: "approximately
  25000 source tokens and 25000 target tokens"), counted as `batch_size` counts them:
  padded slots of each batch's longer side, so real tokens are somewhat fewer (97 % of
  those slots are real tokens on the WMT sample, docs/benchmarks.md). When replicas × `hparams.batch_size`
  is smaller, k = ceil(tokens_per_step / (replicas · batch_size)) micro-batches are
  accumulated first. The step's gradient is that of the summed loss divided by the
  non-padding target tokens of all k micro-batches on all replicas, so it equals the
  gradient of one big batch (`t2t_lite.train.train_step`).
* The step, the optimizer state, the position of the data and the dropout RNG state are
  all in the checkpoint, so a restarted command continues the interrupted run exactly.
  Each replica reads train shards of its own (`t2t_lite.train.replica_input`); batches of its
  epoch e come from `batched_dataset(..., seed=random_seed + e)` over those files, and
  the checkpoint holds each replica's (e, batches already taken from it).
* A NaN or infinite loss stops training before the next save, so the latest
  checkpoint stays a good one.

The estimated FLOPs of a step (`t2t_lite.train.flops`) are printed at the start.
"""

import contextlib
import dataclasses
import math
import os
import shutil
import time

import keras
import tensorflow as tf

from t2t_lite import cpu_features
from t2t_lite.data import datagen
from t2t_lite.run_dir import checkpoints, model_info, partial_writes, run_lock
from t2t_lite.run_dir.scalars import write_scalars
from t2t_lite.train import (
    best_checkpoint,
    distribution,
    early_stopping,
    evaluation,
    flops,
    guided_alignment,
    interruption,
    replica_input,
    run_length,
    warm_start,
)
from t2t_lite.train.progress import Progress
from t2t_lite.train.run_settings import RunSettings
from t2t_lite.train.schedule import adam_optimizer, decay_note, learning_rate_schedule
from t2t_lite.train.train_step import StepFunctions, UpdateSums, micro_batches_per_step


class TrainingError(RuntimeError):
    """Training cannot go on (a NaN or infinite loss); the latest checkpoint is the last good one."""


# -- The entry point ------------------------------------------------------------------------
@dataclasses.dataclass
class _Training:
    """What the loop works with, made once by `train_and_evaluate`."""

    problem: object
    hparams: object
    data_dir: str
    save_dir: str  # output_dir, or a non-chief worker's scratch directory
    steps: StepFunctions
    batches: replica_input.TrainingBatches
    manager: tf.train.CheckpointManager
    run_steps: run_length.RunLength
    vocab_size: int
    log: object
    judge: evaluation.Judge  # evaluations' metrics (dev_scorers' too), best/ and early stopping
    signals: interruption.StopSignals
    micro_batches: int = 1  # k of §5.1's ~25,000-token batches: micro-batches accumulated per update
    stopped_early: bool = False

    def evaluate_and_log(self, eval_steps: int) -> dict:
        step = int(self.steps.optimizer.iterations.numpy())
        metrics = evaluation.evaluate(
            self.steps, self.problem, self.data_dir, self.hparams, eval_steps, self.judge.dev_scorers
        )
        self.log(f"Eval at step {step}: " + ", ".join(f"{name} {value:.4f}" for name, value in metrics.items()))
        write_scalars(tf.summary.create_file_writer(os.path.join(self.save_dir, "eval")), step, metrics)
        return metrics


def train_and_evaluate(
    problem, hparams, data_dir, output_dir, settings: RunSettings = None, *, log=print, dev_scorers=(), **changes
) -> dict:
    """Trains `settings.model_name` on `problem` into `output_dir`, resuming from its latest checkpoint.

    `settings` is a RunSettings (the defaults when None); fields given by name in `changes`
    replace its own (`train_and_evaluate(..., train_steps=8, schedule="train")`).

    One run at a time writes `output_dir` (`run_lock`). Resuming skips checkpoints that cannot
    be read, moving them to `output_dir/set_aside/`; `checkpoint_path` names an earlier checkpoint
    of the same run to resume from (the later ones are moved there too).

    `schedule` is "train", "evaluate" (the latest checkpoint, once) or "train_and_evaluate"
    (evaluate every `local_eval_frequency` steps and at the end). Training stops at
    `train_steps` or after `train_minutes` of wall-clock time (0 = no bound), with a final
    checkpoint; `fit_train_steps_to_minutes` chooses the step count (at most `train_steps`) so
    that the learning rate's linear decay ends within `train_minutes` (`t2t_lite.train.run_length`).
    Checkpoints are written every `save_checkpoints_steps` steps, or, when
    `save_checkpoints_secs` > 0, every that many seconds instead (§6.1 averages checkpoints
    "written at 10-minute intervals": 600). TensorBoard scalars (loss, learning rate,
    tokens/s) are written every `summary_steps` steps. Returns the last evaluation's
    metrics ({} if none ran).

    `warm_start_from` starts a new run from another run's weights (`t2t_lite.train.warm_start`);
    evaluations keep `output_dir/best/` and stop the run early (`t2t_lite.train.evaluation`);
    `dev_scorers` add metrics to them (`t2t_lite.decode.dev_bleu.DevBleu`); SIGINT and SIGTERM
    stop it with a checkpoint (`t2t_lite.train.interruption`).
    """
    settings = dataclasses.replace(settings or RunSettings(), **changes)
    distribution.check_clock_free(settings.train_minutes, settings.save_checkpoints_secs)
    run_length.check_fit(settings.fit_train_steps_to_minutes, settings.train_minutes, hparams.learning_rate_decay_steps)
    if settings.schedule != "train" and not datagen.complete_shards(data_dir, problem.base_name, "dev"):
        # Found now, not at the first evaluation hours into the run.
        raise ValueError(
            f"--schedule={settings.schedule} evaluates on the dev split, and --data_dir={data_dir} has none for "
            f"{problem.name} ({problem.filepattern(data_dir, 'dev')}). Generate one (translate_files: put "
            f"dev.src and dev.tgt in --tmp_dir and rerun t2t-datagen), or train with --schedule=train."
        )
    rule = settings.early_stopping
    evaluation.check_scorers(rule, dev_scorers)
    keras.utils.set_random_seed(settings.random_seed)
    with contextlib.ExitStack() as held:
        # Under TF_CONFIG: bounded until the first collectives (the variables' initial values) have passed.
        cluster_started = held.enter_context(distribution.cluster_start_deadline(settings.cluster_start_minutes))
        strategy = distribution.strategy_for(settings.worker_gpu)
        if hparams.clip_grad_norm and strategy.num_replicas_in_sync > 1:
            raise ValueError(
                f"hparam clip_grad_norm={hparams.clip_grad_norm} with {strategy.num_replicas_in_sync} "
                f"replicas: Keras clips each replica's share before the sum, not the global norm; "
                f"leave clip_grad_norm at 0 (the paper does not clip) or train on one device."
            )
        # The chief alone writes output_dir; an evaluation only reads it and writes eval/.
        writes_output_dir = distribution.is_chief(strategy) and settings.schedule != "evaluate"
        if writes_output_dir:
            held.enter_context(run_lock.directory_lock(output_dir, "t2t-trainer", log))
        vocabulary = problem.vocabulary(data_dir)
        vocab_size, fingerprint = vocabulary.vocab_size, getattr(vocabulary, "fingerprint", None)
        model_info.check_same_run(output_dir, hparams, problem.name, settings.model_name, vocab_size, fingerprint)
        if settings.schedule != "evaluate" and not datagen.complete_shards(data_dir, problem.base_name, "train"):
            raise FileNotFoundError(
                f"--data_dir={data_dir} has no train data for {problem.name} "
                f"({problem.filepattern(data_dir, 'train')}). Run t2t-datagen --problem={problem.base_name} "
                f"--data_dir={data_dir} --tmp_dir=<raw data dir>."
            )
        if settings.schedule != "evaluate":
            guided_alignment.check_data(problem, data_dir, hparams)
        source = None
        if settings.warm_start_from:  # checked before anything is built or written
            source = warm_start.source_checkpoint(settings.warm_start_from)
            changed = warm_start.check_source(source, output_dir, hparams, settings.model_name, vocab_size, fingerprint)
            if checkpoints.listed_checkpoints(output_dir):
                warm_start.check_resumed(output_dir, source)
        with strategy.scope():
            model = model_info.build_model(hparams, vocab_size, settings.model_name)
            run_steps = run_length.RunLength(
                settings.train_steps,
                hparams.learning_rate_decay_steps,
                settings.train_minutes,
                settings.fit_train_steps_to_minutes,
                hparams.learning_rate_warmup_steps,
            )
            optimizer = adam_optimizer(
                hparams, settings.train_steps if run_steps.variable is None else run_steps.variable
            )
            optimizer.build(model.trainable_variables)
        cluster_started()
        # SIGINT, SIGTERM: save, then stop. After the cluster formed: TensorFlow's preemption notifier takes SIGTERM.
        signals = held.enter_context(interruption.StopSignals())
        steps = StepFunctions(model, optimizer, hparams, strategy)
        batches = replica_input.TrainingBatches(problem, data_dir, hparams, settings.random_seed, strategy, log)
        held.push(batches.stopper())
        checkpoint = checkpoints.training_checkpoint(
            model, optimizer, data_epoch=batches.epoch, data_batches_taken=batches.batches_taken
        )
        best = early_stopping.BestSoFar()
        # Every worker saves (the collectives need them all), but only the chief into output_dir.
        save_dir = distribution.checkpoint_directory(strategy, output_dir)
        if save_dir != output_dir:  # a non-chief's copies: of no use once the run ends, however it ends
            held.callback(shutil.rmtree, save_dir, ignore_errors=True)
        if writes_output_dir:  # what a killed or failed save left unfinished
            partial_writes.clean_checkpoint_dir(output_dir, "checkpoint save", log)
        latest = checkpoints.restore_for_training(
            checkpoint,
            output_dir,
            settings.checkpoint_path,
            log,
            set_aside=writes_output_dir,
            optional={"early_stopping": best},
        )
        manager = checkpoints.checkpoint_manager(checkpoint, save_dir, settings.keep_checkpoint_max)
        if latest:
            log(f"Restored {latest} (step {int(optimizer.iterations.numpy())}).")
        elif settings.schedule == "evaluate":
            raise checkpoints.CheckpointError(f"--output_dir={output_dir}: no checkpoint to evaluate.")
        elif source:
            source_step = warm_start.restore(model, source, settings.model_name)
            log(
                f"Warm start from {source} (step {source_step}): its trained weights; a fresh optimizer, "
                f"dropout seeds, step 0 and eq. 3 from the start of its warm-up."
            )
            if writes_output_dir:
                warm_start.write_record(output_dir, source, changed)
        if settings.schedule != "evaluate":
            batches.peek()  # a damaged train shard is named now, before this run writes anything
        if writes_output_dir:
            run_steps.resume(output_dir, int(optimizer.iterations.numpy()), log)
        model_info.write_model_info(save_dir, hparams, problem.name, settings.model_name, vocab_size, fingerprint)

        best_checkpoint.complete(save_dir, log)  # a replacement of best/ that a kill interrupted
        judge = evaluation.Judge(rule, best, save_dir, distribution.is_chief(strategy), log, tuple(dev_scorers))
        training = _Training(
            problem, hparams, data_dir, save_dir, steps, batches, manager, run_steps, vocab_size, log, judge, signals
        )
        if settings.schedule == "evaluate":
            return training.evaluate_and_log(settings.eval_steps)
        training.micro_batches = micro_batches_per_step(hparams, strategy.num_replicas_in_sync)
        if training.micro_batches > 1:
            steps.build_accumulators()
        log(
            f"Model {settings.model_name}: {model.count_params():,} parameters; {strategy.num_replicas_in_sync} "
            f"replica(s) × {training.micro_batches} micro-batch(es) × {hparams.batch_size:,} tokens = about "
            f"{strategy.num_replicas_in_sync * training.micro_batches * hparams.batch_size:,} tokens per step "
            f"(padded, longer side)."
        )
        # On GPUs bfloat16 is the user's informed choice; on a CPU without its units it is a slowdown.
        gpu = tf.config.list_physical_devices("GPU")
        for note in (
            None if gpu else cpu_features.emulation_note(hparams.activation_dtype),
            decay_note(hparams, settings.train_steps, settings.train_minutes, settings.fit_train_steps_to_minutes),
        ):
            if note:
                log(note)
        if not latest:
            save_checkpoint(manager, 0)
        if strategy.num_replicas_in_sync > 1:
            steps.trace_once_for(batches.batch_spec())
        metrics = _train_loop(training, settings)
        if settings.schedule == "train_and_evaluate" and not metrics and not training.stopped_early:
            # already at train_steps: evaluate it
            metrics = training.evaluate_and_log(settings.eval_steps)
    distribution.leave_cluster()  # under TF_CONFIG: ends the process once every worker is done (lock released)
    return metrics


def _train_loop(training: _Training, settings: RunSettings) -> dict:
    """Updates until the run's end (or train_minutes); a line and TensorBoard scalars every summary_steps."""
    steps, run_steps, log = training.steps, training.run_steps, training.log
    optimizer = steps.optimizer
    eval_frequency = settings.local_eval_frequency if settings.schedule == "train_and_evaluate" else 0
    saving = checkpoints.SaveEvery(
        steps=settings.save_checkpoints_steps, seconds=settings.save_checkpoints_secs, last_time=time.time()
    )
    step = start_step = saved_step = int(optimizer.iterations.numpy())
    progress = Progress(step, settings.train_minutes, tf.summary.create_file_writer(training.save_dir), log)
    started, metrics, evaluated_step = progress.started, {}, None
    run_steps.start_clock(started)
    if training.judge.stopped_before(step):  # a rerun of a run that stopped early
        training.stopped_early = True
        return {}
    while step < run_steps.end:
        if training.signals.received:  # SIGINT or SIGTERM: the step reached is saved, then the run stops
            if step != saved_step:
                _save(steps, training.batches, training.manager, step)
            training.signals.stop(step, training.manager.latest_checkpoint)
        # Checked before an update, not after: a bound that runs out during an evaluation or a save
        # stops the run at the step just saved, not one update later with a second checkpoint and evaluation.
        out_of_time = bool(settings.train_minutes) and time.time() - started >= 60.0 * settings.train_minutes
        if not out_of_time:
            step = _update(training, progress, step, start_step, settings)
        finished = step >= run_steps.end or out_of_time
        # Evaluated before the save, so that the checkpoint of an evaluated step holds its judgement.
        stopped_early = False
        if eval_frequency and (step % eval_frequency == 0 or finished) and step != evaluated_step:
            with progress.pause():
                metrics = training.evaluate_and_log(settings.eval_steps)
                stopped_early = training.judge(steps, step, metrics)
            evaluated_step = step
        # Saved after the step's scalars: a run killed in between redoes the step and logs it
        # again, never resuming past a step whose scalars were lost.
        if step != saved_step and (saving.due(step, time.time()) or finished or stopped_early):
            with progress.pause():
                _save(steps, training.batches, training.manager, step)
            saved_step = step
            saving.saved(time.time())
        if stopped_early:
            log(training.judge.stop_line(step) + f" Saved {training.manager.latest_checkpoint}.")
            training.stopped_early = True
            break
        if out_of_time:
            log(
                f"Stopped after {settings.train_minutes:g} minutes at step {step}; "
                f"saved {training.manager.latest_checkpoint}."
            )
            for warning in run_steps.stopped_by_the_clock(step):
                log(warning)
            break
    return metrics


def _update(training: _Training, progress: Progress, step: int, start_step: int, settings: RunSettings) -> int:
    """One update, its checks and, every summary_steps or at the run's end, its line; returns the new step."""
    steps, run_steps = training.steps, training.run_steps
    sums, length = _one_update(steps, training.batches, training.micro_batches)
    if step == start_step:
        flops_per_step = flops.flops_per_step(training.hparams, training.vocab_size, sums.target_tokens, length)
        training.log(
            f"Estimated {flops_per_step:.3g} FLOPs per step "
            f"(first step: {sums.target_tokens:,.0f} target tokens, padded length {length})."
        )
    # A float16 step with overflowing gradients is skipped by the loss scaler: same step again.
    step = int(steps.optimizer.iterations.numpy())
    step_loss = sums.loss / max(sums.target_tokens, 1.0)
    if not math.isfinite(step_loss):
        raise TrainingError(
            f"Loss is {step_loss} at step {step}; stopped without saving, so "
            f"{training.manager.latest_checkpoint} is the last good checkpoint. Lower learning_rate, raise "
            f"learning_rate_warmup_steps or set clip_grad_norm (--hparams), then rerun to resume from it."
        )
    now = time.time()
    past_bound = bool(settings.train_minutes) and now - progress.started >= 60.0 * settings.train_minutes
    if not past_bound:
        run_steps.measure(step, now, training.save_dir, training.log)  # no fit from an update past the bound
    progress.updated(step, sums.target_tokens, run_steps.end, now)
    if step % settings.summary_steps == 0 or step >= run_steps.end or past_bound:
        # The rate update `step` used: after it the optimizer's own reads eq. 3 at step + 1.
        rate = learning_rate_schedule(training.hparams, run_steps.end)(step - 1)
        progress.line(step, run_steps.end, step_loss, float(rate))
    return step


def _one_update(steps, batches, micro_batches) -> tuple:
    """One optimizer update from `micro_batches` micro-batches; returns its UpdateSums and a padded length."""
    batch = batches.next()
    length = _padded_length(batch)
    if micro_batches == 1:
        return UpdateSums.of(steps.train_step(batch)), length
    total = steps.accumulate_step(batch).numpy()
    for _ in range(micro_batches - 1):
        total = total + steps.accumulate_step(batches.next()).numpy()
    steps.apply_step()
    return UpdateSums.of(total), length


def _padded_length(batch) -> int:
    targets = batch["targets"]
    local = targets.values[0] if hasattr(targets, "values") else targets
    return int(local.shape[1])


def _save(steps, batches, manager, step):
    if not steps.all_finite():
        raise TrainingError(
            f"Weights are not finite at step {step}; stopped without saving, so {manager.latest_checkpoint} is the "
            f"last good checkpoint. Lower learning_rate or set clip_grad_norm (--hparams), then rerun."
        )
    batches.record_positions()
    save_checkpoint(manager, step)


def save_checkpoint(manager, step: int) -> None:
    """`manager.save` at `step`; a save that fails (a full disk) removes its own files, so the last complete
    checkpoint stays the one a rerun resumes from."""
    try:
        manager.save(checkpoint_number=step)
    except BaseException:
        partial_writes.remove_unlisted(os.path.join(manager.directory, f"{checkpoints.CHECKPOINT_NAME}-{step}"))
        raise
