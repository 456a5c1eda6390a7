"""The run directory that every stage reads and writes: checkpoints, hparams.json, its lock, averages.

A model directory (`--output_dir`) holds `ckpt-<step>` checkpoints and their recovery
(`checkpoints`), the `hparams.json` / `problem.json` that rebuild the model they hold
(`model_info`), the one-writer lock (`run_lock`), averaged checkpoints (`averaging`, §6.1) and
TensorBoard scalars (`scalars`). Training writes it; decoding, serving, evaluation and the tools
read it, so it sits below all of them and imports none.
"""
