"""Translating one file with every checkpoint of a run: tensor2tensor's t2t-translate-all.

BLEU after each checkpoint is how §6 picks a model and how a run is watched; the dev
perplexity the trainer logs is only a proxy for it. `translate_all` decodes the source
with each checkpoint of `model_dir` (from `min_steps` on) into one file per step,

    translations_dir/<source basename>-<step>            e.g. val.en-4000
    translations_dir/<source basename>-avg<N>-<step>     the average of the last N checkpoints

which `t2t-bleu --translations_dir` scores. A step whose file exists is skipped (and said
so), and each file is written to a temporary name and renamed, so a killed run never
leaves a half file that a rerun would take as done. With `wait_minutes` it keeps polling
for new checkpoints while training runs, and stops after that long without one.

The model is built once; each checkpoint's weights are restored into it, so the decoder's
compiled tf.function (traced once per model) is reused for every step.
"""

import os
import time

import tensorflow as tf

from t2t_lite.decode import decode_files, decode_settings, model_loading, translation
from t2t_lite.run_dir import averaging, checkpoints

POLL_SECONDS = 30  # how often to look for a new checkpoint while waiting


def translation_path(translations_dir: str, source_path: str, step: int, average_of: int = 0) -> str:
    """The file that holds the source's translation by the checkpoint of `step` (or an average)."""
    average = f"-avg{average_of}" if average_of else ""
    return os.path.join(translations_dir, f"{os.path.basename(source_path)}{average}-{step}")


class CheckpointTranslator:
    """One model, loaded on first use, whose weights each checkpoint replaces in turn."""

    def __init__(self, problem, hparams, data_dir: str, model_name: str, settings: decode_settings.DecodeHParams):
        self.problem, self.hparams, self.data_dir, self.model_name = problem, hparams, data_dir, model_name
        self.settings = settings
        self.vocabulary = problem.vocabulary(data_dir)
        self.model = None

    def translate(self, checkpoint_path: str, lines: list) -> list:
        """The best hypothesis of each line, decoded with the weights of `checkpoint_path`."""
        # The first load also checks problem.json against the problem and vocabulary. A quantized
        # model has int8 or bfloat16 variables where a checkpoint has float32 ones: it is loaded anew each time.
        if self.model is None or self.settings.quantize:
            self.model = model_loading.load_model_for_decoding(
                self.problem, self.hparams, self.data_dir, checkpoint_path, self.model_name, self.settings.quantize
            )
        else:
            checkpoints.restore_weights(self.model, checkpoint_path)  # every checkpoint of a run: one architecture
        translations = translation.translate(self.model, self.vocabulary, lines, self.settings, progress=False)
        return [translation.line(self.settings.writes_several) for translation in translations]


def translate_all(
    translator: CheckpointTranslator,
    model_dir: str,
    source_path: str,
    lines: list,
    translations_dir: str,
    *,
    min_steps: int = 0,
    wait_minutes: float = 0,
    average_last_n: int = 0,
    log=print,
) -> list:
    """Decodes `lines` with every checkpoint of `model_dir`; returns the paths written by this call.

    Waits up to `wait_minutes` after the last new checkpoint for another one (0: one pass
    over the checkpoints there now). Then, if `average_last_n` > 0, averages the last N
    checkpoints into translations_dir/avg<N>/ and decodes with that too.
    """
    os.makedirs(translations_dir, exist_ok=True)
    written, seen = [], set()
    deadline = time.time() + wait_minutes * 60
    while True:
        new = [path for path in checkpoints.all_checkpoints(model_dir) if path not in seen]
        seen.update(new)
        for path in new:
            output = _translate_checkpoint(translator, path, source_path, lines, translations_dir, min_steps, log)
            written += [output] if output else []
        if new:
            deadline = time.time() + wait_minutes * 60
        elif time.time() >= deadline:
            break
        else:
            time.sleep(min(POLL_SECONDS, max(deadline - time.time(), 0)))
    if average_last_n:
        output = _translate_average(translator, model_dir, source_path, lines, translations_dir, average_last_n, log)
        written += [output] if output else []
    return written


def _translate_checkpoint(translator, path, source_path, lines, translations_dir, min_steps, log):
    step = checkpoints.checkpoint_step(path)
    name = os.path.basename(path)
    if step < min_steps:
        log(f"{name}: below --min_steps={min_steps}, skipped.")
        return None
    output = translation_path(translations_dir, source_path, step)
    if os.path.exists(output):
        log(f"{name}: {output} exists already, skipped.")
        return None
    # The trainer's --keep_checkpoint_max may delete a checkpoint after it was listed: before
    # decoding starts (no .index any more) or while its weights are being read.
    try:
        if tf.io.gfile.exists(path + ".index"):
            return _translate_to(translator, path, name, lines, output, log)
    except tf.errors.NotFoundError:
        pass
    log(f"{name}: deleted by the trainer (--keep_checkpoint_max) before it could be translated, skipped.")
    return None


def _translate_average(translator, model_dir, source_path, lines, translations_dir, n, log):
    """Averages the last `n` checkpoints into a directory of translations_dir and decodes with it."""
    step = checkpoints.checkpoint_step(averaging.last_checkpoints(model_dir, n)[-1])
    output = translation_path(translations_dir, source_path, step, average_of=n)
    if os.path.exists(output):
        log(f"average of the last {n} up to step {step}: {output} exists already, skipped.")
        return None
    average_dir = os.path.join(translations_dir, f"avg{n}")
    prefix = os.path.join(average_dir, f"{checkpoints.CHECKPOINT_NAME}-{step}")
    if tf.io.gfile.exists(prefix + ".index"):  # averaged by an earlier run killed before it finished decoding
        log(f"Using {prefix}, averaged by an earlier run.")
    else:
        averaging.average_checkpoints(model_dir, average_dir, n)
    return _translate_to(translator, prefix, f"average of the last {n} up to step {step}", lines, output, log)


def _translate_to(translator, checkpoint_path, label, lines, output, log) -> str:
    start = time.time()
    translations = translator.translate(checkpoint_path, lines)
    decode_files.write_lines(output, translations)
    seconds = time.time() - start
    log(f"{label}: {len(lines)} lines in {seconds:.0f} s ({len(lines) / max(seconds, 1e-9):.1f} lines/s) -> {output}")
    return output
