"""Tiny synthetic problems for smoke tests: copy or reverse a sequence of symbols.

tensor2tensor's algorithmic_* problems in miniature. Each example is a random
sequence of 1..`max_length` symbols out of `num_symbols` (ids 2..num_symbols+1;
0 is padding, 1 is EOS); the target is the sequence reversed (`algorithmic_reverse`)
or unchanged (`algorithmic_identity`). With 10 symbols and lengths up to 8,
`transformer_tiny` learns either to near-perfect sequence accuracy in a few
hundred steps on a CPU. There is no vocabulary file: `SymbolVocabulary` is fixed.
"""

import abc
import random

from t2t_lite.data import datagen
from t2t_lite.data.vocabulary import EOS_ID, NUM_RESERVED_IDS, SymbolVocabulary
from t2t_lite.problem import Problem
from t2t_lite.registry import register_problem


class AlgorithmicProblem(Problem):
    """Random symbol sequences; a subclass says how the target follows from the input."""

    eval_metrics = ["sequence_accuracy"]
    num_symbols = 10
    max_length = 8  # Longest input, in symbols (EOS not counted).
    num_examples = {"train": 20000, "dev": 500, "test": 500}
    num_shards = {"train": 2, "dev": 1, "test": 1}
    seeds = {"train": 1, "dev": 2, "test": 3}  # One stream per split, so splits differ and reruns agree.

    def decode_defaults(self) -> dict:
        return {"beam_size": 1, "alpha": 0.0, "extra_length": 2}

    def vocabulary(self, data_dir: str) -> SymbolVocabulary:
        return SymbolVocabulary(self.num_symbols)

    @abc.abstractmethod
    def target_symbols(self, symbols: list) -> list:
        """The target ids for input ids `symbols` (both without EOS)."""

    def examples(self, split: str):
        rng = random.Random(self.seeds[split])
        for _ in range(self.num_examples[split]):
            length = rng.randint(1, self.max_length)
            symbols = [rng.randrange(self.num_symbols) + NUM_RESERVED_IDS for _ in range(length)]
            yield symbols + [EOS_ID], self.target_symbols(symbols) + [EOS_ID]

    def generate_data(self, data_dir: str, tmp_dir: str) -> datagen.DatagenReport:
        report = datagen.DatagenReport(self.base_name)
        for split in datagen.SPLITS:
            if datagen.complete_shards(data_dir, self.base_name, split):
                report.reused.append(split)
                continue
            report.written[split] = datagen.write_shuffled_shards(
                datagen.with_progress(self.examples(split), "pairs generated"),
                data_dir,
                self.base_name,
                split,
                self.num_shards[split],
                f"{self.base_name} {split}",
            )
        return report


@register_problem
class AlgorithmicReverse(AlgorithmicProblem):
    """Target = the input reversed."""

    def target_symbols(self, symbols: list) -> list:
        return symbols[::-1]


@register_problem
class AlgorithmicIdentity(AlgorithmicProblem):
    """Target = the input unchanged."""

    def target_symbols(self, symbols: list) -> list:
        return list(symbols)
