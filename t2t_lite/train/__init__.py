"""Training (§5): the step, label-smoothed loss, Adam with eq. 3, many devices, early stopping, best/.

`trainer.train_and_evaluate` is `t2t-trainer`'s work. The model directory it writes
(checkpoints, hparams.json, the lock) is `t2t_lite.run_dir`'s, shared with decoding.
"""
