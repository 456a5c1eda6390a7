"""The dev split while training: its metrics, and what is decided from them (best/, early stopping).

`evaluate` gives tensor2tensor's dev metrics from teacher-forced batches: the label-smoothed
loss per target token, neg_log_perplexity = (1/N) Σ log p(y_t | y_<t, x), perplexity,
accuracy (argmax = reference token) and accuracy_per_sequence (`t2t_lite.train.loss`);
`dev_scorers` add decoded ones (sacreBLEU: `t2t_lite.decode.dev_bleu`).

`Judge` acts on each evaluation: the best so far by the chosen metric is kept in `best/`
(`t2t_lite.train.best_checkpoint`), and the run stops once it has not improved for the
patience of `t2t_lite.train.early_stopping`.
"""

import dataclasses

import numpy as np

from t2t_lite.data import input_pipeline
from t2t_lite.train import best_checkpoint, early_stopping, loss


def evaluate(steps, problem, data_dir, hparams, eval_steps: int = 0, dev_scorers=()) -> dict:
    """Loss, perplexity and token/sequence accuracy on the dev split (`eval_steps` batches, 0 = all), and
    each of `dev_scorers`' metrics (callables model -> {name: value})."""
    dataset = input_pipeline.batched_dataset(problem, "dev", data_dir, hparams, shuffle=False, repeat=False)
    if eval_steps:
        dataset = dataset.take(eval_steps)
    totals = None
    for batch in dataset:
        sums = {name: value.numpy().astype(np.float64) for name, value in steps.eval_step(batch).items()}
        totals = sums if totals is None else {name: totals[name] + sums[name] for name in sums}
    if totals is None:
        raise ValueError(f"Problem {problem.name}: the dev split in {data_dir} gives no batches.")
    metrics = loss.eval_metrics(totals)
    for scorer in dev_scorers:
        metrics.update(scorer(steps.model))
    return metrics


def check_scorers(rule: early_stopping.EarlyStopping, dev_scorers) -> None:
    """A metric that decodes the dev split needs its scorer (t2t-trainer makes it); found before any work."""
    if rule.metric in early_stopping.DECODED_METRICS and not dev_scorers:
        raise ValueError(
            f"--eval_early_stopping_metric={rule.metric} decodes the dev split: give dev_scorers "
            f"(t2t_lite.decode.dev_bleu.DevBleu), as t2t-trainer does."
        )


@dataclasses.dataclass
class Judge:
    """Keeps best/ and stops the run by `rule`; its state `best` is part of the training checkpoint."""

    rule: early_stopping.EarlyStopping
    best: early_stopping.BestSoFar
    save_dir: str  # output_dir, or a non-chief worker's scratch directory
    is_chief: bool
    log: object
    dev_scorers: tuple = ()  # more dev metrics: callables model -> {name: value} (t2t_lite.decode.dev_bleu)

    def __call__(self, steps, step: int, metrics: dict) -> bool:
        """Keeps best/ when the evaluation at `step` is the best yet; returns whether the run stops here."""
        value = early_stopping.chief_value(steps.strategy, metrics[self.rule.metric], self.is_chief)
        if self.best.update(self.rule, step, value):
            prefix = best_checkpoint.keep(steps.model, self.save_dir, self.rule.metric, value, step)
            self.log(f"Best {self.rule.metric} so far ({value:.4f}): kept as {prefix}.")
        return self.best.stops(self.rule, step)

    def stopped_before(self, step: int) -> bool:
        """Whether a restored run at `step` had stopped early there (a rerun of it): says so."""
        if not self.best.stopped_before(self.rule, step):
            return False
        self.log(self.best.stop_line(self.rule, step) + " Nothing to train: raise --eval_early_stopping_steps.")
        return True

    def stop_line(self, step: int) -> str:
        return self.best.stop_line(self.rule, step)
