"""algorithmic_reverse / algorithmic_identity: synthetic smoke-test problems."""

from t2t_lite import registry
from t2t_lite.data import datagen, input_pipeline
from t2t_lite.data.input_pipeline import batched_dataset
from t2t_lite.problems.algorithmic import AlgorithmicIdentity, AlgorithmicReverse


class SmallReverse(AlgorithmicReverse):
    num_examples = {"train": 300, "dev": 50, "test": 50}


class SmallIdentity(AlgorithmicIdentity):
    num_examples = {"train": 30, "dev": 5, "test": 5}


def test_identity_targets_are_the_inputs(tmp_path):
    datagen.generate(SmallIdentity(), str(tmp_path), str(tmp_path / "tmp"))
    examples = list(SmallIdentity().dataset("train", str(tmp_path)).as_numpy_iterator())
    assert len(examples) == 30
    for example in examples:
        assert list(example["targets"]) == list(example["inputs"]) and example["inputs"][-1] == 1


def test_targets_are_reversed_inputs(tmp_path):
    report = datagen.generate(SmallReverse(), str(tmp_path), str(tmp_path / "tmp"))
    assert report.written == {"train": 300, "dev": 50, "test": 50}
    problem = SmallReverse()
    assert problem.vocab_size(str(tmp_path)) == 12
    lengths = set()
    for example in problem.dataset("train", str(tmp_path)).as_numpy_iterator():
        inputs, targets = list(example["inputs"]), list(example["targets"])
        assert inputs[-1] == 1 and targets[-1] == 1
        assert targets[:-1] == inputs[-2::-1]
        assert all(2 <= i <= 11 for i in inputs[:-1])
        lengths.add(len(inputs) - 1)
    assert lengths == set(range(1, 9))
    vocabulary = problem.vocabulary(str(tmp_path))
    assert vocabulary.decode(vocabulary.encode("1 2 3")) == "1 2 3"


def test_registered_and_batchable(tmp_path, monkeypatch):
    monkeypatch.setattr(input_pipeline, "SHUFFLE_BUFFER", 100)  # a few hundred examples: no need for 10,000
    identity = registry.problem("algorithmic_identity")
    assert registry.problem("algorithmic_reverse").eval_metrics == ["sequence_accuracy"]
    datagen.generate(SmallReverse(), str(tmp_path), str(tmp_path / "tmp"))
    hparams = registry.hparams("transformer_tiny").replace(batch_size=64)
    batch = next(batched_dataset(SmallReverse(), "train", str(tmp_path), hparams, seed=3).as_numpy_iterator())
    assert batch["inputs"].shape == batch["targets"].shape == (8, 8)  # one bucket of length 8: 64 // 8 rows
    assert identity.decode_defaults()["beam_size"] == 1
