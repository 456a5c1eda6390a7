"""sacreBLEU of the dev split while training: the "bleu" metric of early stopping and of the best checkpoint.

tensor2tensor scored its dev set with an approximate BLEU on teacher-forced argmaxes; here the
dev split's first `lines` pairs are decoded as t2t-decoder would (§6.1's beam search with the
GNMT length penalty, `--decode_hparams`) and scored with sacreBLEU against their references,
both detokenized from ids (`Vocabulary.decode`, which stops at EOS). Only the first lines, so that an evaluation stays
affordable on a CPU (`--eval_bleu_lines`).
"""

import dataclasses

from t2t_lite.decode import batch_decoding
from t2t_lite.decode.decode_settings import DecodeHParams
from t2t_lite.decode.encoded_inputs import pad_batch
from t2t_lite.evaluate import bleu


class DevBleu:
    """`DevBleu(problem, data_dir, settings, lines)(model)` → {"bleu": sacreBLEU of those lines}."""

    def __init__(self, problem, data_dir: str, settings: DecodeHParams, lines: int):
        if lines < 1:
            raise ValueError(f"--eval_bleu_lines={lines}: must be at least 1.")
        self.vocabulary = problem.vocabulary(data_dir)
        self.batch_size = settings.batch_size
        # The search of t2t-decoder without XLA (the dev lines' lengths would each compile it again)
        # and without sampling: the metric judges the checkpoint's best translations.
        self.search = dataclasses.replace(settings.search, xla=False, sampling_method="argmax")
        examples = problem.dataset("dev", data_dir, shuffle_files=False).take(lines)
        pairs = [(example["inputs"].numpy().tolist(), example["targets"].numpy()) for example in examples]
        # Shortest first: batches of similar lengths pad least.
        pairs.sort(key=lambda pair: len(pair[0]))
        self.inputs = [inputs for inputs, _ in pairs]
        self.references = [self.vocabulary.decode(targets) for _, targets in pairs]

    def __call__(self, model) -> dict:
        translations = []
        size = self.batch_size
        for first in range(0, len(self.inputs), size):
            ids, _ = batch_decoding.decode_batch(model, pad_batch(self.inputs[first : first + size]), self.search)
            translations += [self.vocabulary.decode(row) for row in ids]
        return {"bleu": bleu.evaluate(translations, self.references).sacrebleu}
