"""Training (§5): the step, label-smoothed loss, Adam with eq. 3, checkpoints, averaging, many devices.

`trainer.train_and_evaluate` is `t2t-trainer`'s work; the model directory's files (checkpoints,
hparams.json, problem.json) and its one-writer lock live here too.
"""
