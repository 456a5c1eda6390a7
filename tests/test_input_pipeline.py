"""Token-bucketed batches (§5.1), checked on generated data of known lengths."""

import random
import re

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data import datagen, input_pipeline
from t2t_lite.data.input_pipeline import batched_dataset, bucket_batch_sizes, bucket_boundaries, bucket_lengths
from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.problems.algorithmic import AlgorithmicProblem
from t2t_lite.train import replica_input


class Lengths(AlgorithmicProblem):
    """Examples whose longer side is uniform in 10..200, plus a few over max_length=256."""

    num_shards = {"train": 2, "dev": 1, "test": 1}
    too_long = {"train": 7, "dev": 3, "test": 0}
    num_examples = {"train": 600, "dev": 200, "test": 10}

    def target_symbols(self, symbols):
        return symbols

    def examples(self, split):
        rng = random.Random(self.seeds[split])
        lengths = [rng.randint(10, 200) for _ in range(self.num_examples[split])]
        lengths += [rng.randint(257, 400) for _ in range(self.too_long[split])]
        for length in lengths:
            shorter = max(1, length - rng.randint(0, 2))
            sides = [[2] * (length - 1) + [EOS_ID], [3] * (shorter - 1) + [EOS_ID]]
            rng.shuffle(sides)
            yield sides[0], sides[1]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("lengths"))
    datagen.generate(Lengths(), directory, directory)
    return directory


# The data are 600 examples: a buffer of 1,000 mixes them as 10,000 would, faster.
SMALL_SHUFFLE_BUFFER = 1000


@pytest.fixture(autouse=True)
def small_shuffle_buffer(monkeypatch):
    monkeypatch.setattr(input_pipeline, "SHUFFLE_BUFFER", SMALL_SHUFFLE_BUFFER)


def base_hparams():
    return registry.hparams("transformer_base").replace(batch_size=2048, max_length=256)


@pytest.fixture()
def hparams():
    return base_hparams()


def one_pass(data_dir, mode, **settings):
    """The batches of one pass over `mode` (training's shuffled with seed 1), with the small shuffle buffer."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(input_pipeline, "SHUFFLE_BUFFER", SMALL_SHUFFLE_BUFFER)
        hparams = base_hparams().replace(**settings)
        return list(batched_dataset(Lengths(), mode, data_dir, hparams, seed=1, repeat=False).as_numpy_iterator())


# Each pass costs seconds of tf.data's start-up: the tests that only read an epoch's batches share one.
@pytest.fixture(scope="module")
def train_epoch(data_dir):
    """One epoch of training batches (seed 1), shared by the tests that only read it."""
    return one_pass(data_dir, "train")


@pytest.fixture(scope="module")
def dev_batches(data_dir):
    """The dev split's batches, shared by the tests that only read them."""
    return one_pass(data_dir, "dev")


def test_bucket_boundaries_are_tensor2tensors():
    # t2t's _bucket_boundaries(256, 8, 1.1), worked by hand: +1 while 1.1x rounds down to x, then x1.1.
    assert bucket_boundaries(256, 8, 1.1) == [
        8,
        9,
        10,
        11,
        12,
        13,
        14,
        15,
        16,
        17,
        18,
        19,
        20,
        22,
        24,
        26,
        28,
        30,
        33,
        36,
        39,
        42,
        46,
        50,
        55,
        60,
        66,
        72,
        79,
        86,
        94,
        103,
        113,
        124,
        136,
        149,
        163,
        179,
        196,
        215,
        236,
    ]


def test_batch_sizes_hold_batch_size_tokens_per_replica(hparams):
    lengths, sizes = bucket_lengths(hparams), bucket_batch_sizes(hparams)
    assert lengths[-1] == 256 and sizes[0] == 2048 // 8 and sizes[-1] == 2048 // 256
    assert all(size * length <= 2048 for size, length in zip(sizes, lengths))
    assert bucket_batch_sizes(hparams, num_replicas=4) == [4 * size for size in sizes]


def take(dataset, count):
    return [batch for _, batch in zip(range(count), dataset.as_numpy_iterator())]


def test_training_batches_come_in_a_finite_set_of_shapes(data_dir, hparams):
    lengths, sizes = bucket_lengths(hparams), bucket_batch_sizes(hparams)
    batches = take(batched_dataset(Lengths(), "train", data_dir, hparams, seed=1), 150)  # repeats: > 1 epoch
    for batch in batches:
        # The batch holds batch_size tokens of its longer side's bucket, and every example's
        # longer side falls in that bucket; each side is padded to the smallest bucket length
        # that holds its own longest example.
        inputs_length, targets_length = batch["inputs"].shape[1], batch["targets"].shape[1]
        assert inputs_length in lengths and targets_length in lengths
        longer = np.maximum((batch["inputs"] > 0).sum(1), (batch["targets"] > 0).sum(1))
        bucket = lengths.index(max(inputs_length, targets_length))
        assert len(batch["inputs"]) == len(batch["targets"]) == sizes[bucket]
        assert longer.max() <= lengths[bucket] and (bucket == 0 or longer.min() > lengths[bucket - 1])
        for side in ("inputs", "targets"):
            real = (batch[side] > 0).sum(1)
            row = lengths.index(batch[side].shape[1])
            assert real.max() <= batch[side].shape[1] <= 256
            assert row == 0 or real.max() > lengths[row - 1]  # no smaller bucket would hold the longest


@pytest.mark.parametrize("long_side", ["inputs", "targets"])
def test_a_short_side_is_padded_to_its_own_bucket_not_the_longer_sides(long_side):
    # 100-token sides with 12-token partners: the batch size follows the longer side's bucket
    # (103), and each side pads to the bucket of its own longest example (103 and 12).
    long, short = [2] * 99 + [EOS_ID], [3] * 11 + [EOS_ID]
    short_side = "targets" if long_side == "inputs" else "inputs"
    dataset = tf.data.Dataset.from_generator(
        lambda: ({long_side: long, short_side: short} for _ in range(5)),
        output_signature={side: tf.TensorSpec([None], tf.int32) for side in ("inputs", "targets")},
    )
    batches = list(input_pipeline.bucket_by_length(dataset, [12, 103, 256], [170, 19, 8]).as_numpy_iterator())
    assert [(b[long_side].shape, b[short_side].shape) for b in batches] == [((5, 103), (5, 12))]


def test_an_epoch_ends_with_at_most_one_partial_batch_per_bucket(train_epoch, hparams):
    # Every partial batch takes a whole optimizer step; with few keys, few of them exist.
    batches = train_epoch
    lengths, sizes = bucket_lengths(hparams), bucket_batch_sizes(hparams)
    partial = [
        b for b in batches if len(b["inputs"]) < sizes[lengths.index(max(b["inputs"].shape[1], b["targets"].shape[1]))]
    ]
    keys = {max(b["inputs"].shape[1], b["targets"].shape[1]) for b in partial}
    assert len(partial) == len(keys)


def test_padding_efficiency_on_generated_data(train_epoch):
    batches = train_epoch
    real = sum(int((b["inputs"] > 0).sum() + (b["targets"] > 0).sum()) for b in batches)
    padded = sum(b["inputs"].size + b["targets"].size for b in batches)
    assert sum(len(b["inputs"]) for b in batches) == 600
    assert real / padded >= 0.9


def test_one_epoch_batches_every_example_exactly_once(data_dir, train_epoch):
    def rows(batch):
        return [(tuple(i[i > 0]), tuple(t[t > 0])) for i, t in zip(batch["inputs"], batch["targets"])]

    batched = [row for batch in train_epoch for row in rows(batch)]
    examples = [
        (tuple(e["inputs"]), tuple(e["targets"]))
        for e in Lengths().dataset("train", data_dir).as_numpy_iterator()
        if max(len(e["inputs"]), len(e["targets"])) <= 256
    ]
    assert len(examples) == 600 and sorted(batched) == sorted(examples)


def test_training_drops_long_examples_and_logs_the_count_once(data_dir, hparams, capfd):
    batches = list(batched_dataset(Lengths(), "train", data_dir, hparams, seed=1, repeat=False).as_numpy_iterator())
    assert sum(len(b["inputs"]) for b in batches) == 600  # the 7 long ones are gone
    log = capfd.readouterr().err
    assert log.count("dropped") == 1, log
    assert "dropped 7 of 607 training examples longer than max_length = 256 in this pass" in log

    taken = 0
    for batch in batched_dataset(Lengths(), "train", data_dir, hparams, seed=1, repeat=True).as_numpy_iterator():
        taken += len(batch["inputs"])
        if taken > 3 * 600:  # three passes read (the shuffle buffer reads ahead, so maybe more)
            break
    counts = re.findall(r"dropped (\d+) of (\d+)", capfd.readouterr().err)
    assert counts == [("7", "607")]  # every pass drops the same 7: said after the first only


def test_the_trainers_epochs_say_the_drop_line_once(data_dir, train_epoch, hparams, capfd):
    """The trainer reads epoch after epoch, each a new pass (and dataset) over the same files: one line in all."""
    batches = replica_input.TrainingBatches(Lengths(), data_dir, hparams, 1, tf.distribute.get_strategy())
    one_epoch = len(train_epoch)
    capfd.readouterr()
    for _ in range(3 * one_epoch):
        batches.next()
    batches.close()
    counts = re.findall(r"dropped (\d+) of (\d+) .* over (.*)\.", capfd.readouterr().err)
    assert counts == [("7", "607", "the data")]


def test_the_drop_line_is_said_again_when_a_pass_drops_another_count(capfd):
    # Each pass of the repeated dataset calls the generator anew: passes 1-2 hold 2 long examples, 3-4 one.
    passes = iter([[300, 5, 300], [300, 5, 300], [5, 5, 300], [5, 5, 300]])

    def examples():
        for length in next(passes):
            yield {"inputs": [2] * length, "targets": [2]}

    spec = {side: tf.TensorSpec([None], tf.int32) for side in ("inputs", "targets")}
    source = tf.data.Dataset.from_generator(examples, output_signature=spec)
    kept = list(input_pipeline.drop_too_long(source, 256, "four passes").repeat(4).as_numpy_iterator())
    assert [len(example["inputs"]) for example in kept] == [5, 5, 5, 5, 5, 5]
    counts = re.findall(r"dropped (\d+) of (\d+) .* over (.*)\.", capfd.readouterr().err)
    assert counts == [("2", "3", "four passes"), ("1", "3", "four passes")]


def test_max_length_zero_means_batch_size(data_dir, hparams):
    """tensor2tensor's rule: with no max_length, training drops what would not fit one batch."""
    small = hparams.replace(max_length=0, batch_size=128)
    batches = list(batched_dataset(Lengths(), "train", data_dir, small, seed=1, repeat=False).as_numpy_iterator())
    assert max(b[side].size for b in batches for side in ("inputs", "targets")) <= 128
    fitting = [
        e
        for e in Lengths().dataset("train", data_dir).as_numpy_iterator()
        if max(len(e["inputs"]), len(e["targets"])) <= 128
    ]
    assert sum(len(b["inputs"]) for b in batches) == len(fitting) > 0


def test_only_trailing_padding_is_stripped():
    """Regrouped rows lose their padding, never an id after an interior 0."""
    rows = tf.data.Dataset.from_tensor_slices(
        {"inputs": [[5, 0, 7, 1], [4, 1, 0, 0]], "targets": [[3, 1, 0, 0], [6, 0, 8, 1]]}
    )
    (batch,) = list(input_pipeline.bucket_by_length(rows, [8], [2]).as_numpy_iterator())
    pairs = sorted((tuple(i), tuple(t)) for i, t in zip(batch["inputs"], batch["targets"]))
    assert pairs == [
        ((4, 1, 0, 0, 0, 0, 0, 0), (6, 0, 8, 1, 0, 0, 0, 0)),
        ((5, 0, 7, 1, 0, 0, 0, 0), (3, 1, 0, 0, 0, 0, 0, 0)),
    ]


def test_dev_keeps_long_examples_in_a_fixed_order(data_dir, dev_batches, hparams):
    first = dev_batches
    second = list(batched_dataset(Lengths(), "dev", data_dir, hparams).as_numpy_iterator())
    assert sum(len(b["inputs"]) for b in first) == 203
    assert max(b["inputs"].shape[1] for b in first) > 256
    assert all(np.array_equal(a["inputs"], b["inputs"]) for a, b in zip(first, second))


def test_same_seed_same_batches_other_seed_other_batches(data_dir, hparams):
    def signature(seed):
        return [
            b["inputs"].tobytes() + b["targets"].tobytes()
            for b in take(batched_dataset(Lengths(), "train", data_dir, hparams, seed=seed), 8)
        ]

    first = signature(5)
    assert signature(5) == first
    assert signature(6) != first


def test_replicas_multiply_the_batch(data_dir, hparams):
    batch = take(batched_dataset(Lengths(), "train", data_dir, hparams, seed=1, num_replicas=2), 1)[0]
    length = batch["inputs"].shape[1]
    assert len(batch["inputs"]) == 2 * (2048 // length)


def test_under_xla_training_batches_take_one_shape_per_bucket(data_dir, train_epoch, dev_batches, hparams):
    """XLA compiles the step once per shape: both sides padded to the longer side's bucket, rows to its batch size.

    The batches hold the same examples as without XLA, in the same order; only padding (id 0)
    is added, including whole rows of it in the partial batch that ends a bucket's epoch.
    """
    xla = hparams.replace(xla_compile=True)
    lengths, sizes = bucket_lengths(xla), bucket_batch_sizes(xla)

    def epoch(hp, mode="train"):
        return list(batched_dataset(Lengths(), mode, data_dir, hp, seed=1, repeat=False).as_numpy_iterator())

    def examples(batch):
        return [(tuple(i[i > 0]), tuple(t[t > 0])) for i, t in zip(batch["inputs"], batch["targets"]) if t.any()]

    plain, padded = train_epoch, epoch(xla)
    assert {(b["inputs"].shape, b["targets"].shape) for b in padded} <= {
        ((s, n), (s, n)) for s, n in zip(sizes, lengths)
    }
    assert [examples(b) for b in padded] == [examples(b) for b in plain]
    assert any(
        len(before["inputs"]) < len(after["inputs"]) for before, after in zip(plain, padded)
    )  # whole rows were added
    dev_under_xla = epoch(xla, "dev")
    for name in ("inputs", "targets"):  # dev is not compiled: its batches stay as they were
        assert [b[name].tolist() for b in dev_under_xla] == [b[name].tolist() for b in dev_batches]
