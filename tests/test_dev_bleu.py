"""The dev split's sacreBLEU while training (--eval_early_stopping_metric=bleu), checked against sacrebleu itself."""

import json
import os

import pytest
import sacrebleu
import tensorflow as tf
from test_compatibility import FIXTURE, restored_model
from test_problem import read_records, write_corpus
from test_trainer import SMALL, logged_scalars, run_cli

from t2t_lite.data import datagen
from t2t_lite.decode import dev_bleu
from t2t_lite.decode.decode_settings import DecodeHParams
from t2t_lite.decode.translation import translate
from t2t_lite.problems.translate_files import TranslateFiles

# The fixture model reverses the order of words; the last references are wrong on purpose.
SOURCES = ["die katze läuft", "der hund", "grün haus straße", "haus", "der die das katze hund", "katze hund"]
REFERENCES = ["läuft katze die", "hund der", "straße haus grün", "haus", "das die der", "katze hund"]


@pytest.fixture(scope="module")
def fixture_dev(tmp_path_factory):
    """A translate_files data_dir whose dev split holds the pairs above, encoded with the fixture's vocabulary."""
    root = tmp_path_factory.mktemp("dev_bleu")
    tmp_dir, data_dir = str(root / "raw"), str(root / "data")
    for split in ("train", "dev"):
        write_corpus(tmp_dir, split, list(zip(SOURCES, REFERENCES)))
    problem = TranslateFiles()
    vocab = str(FIXTURE / "data" / problem.vocab_filename())
    datagen.generate(problem, data_dir, tmp_dir, vocab_from=vocab)
    return problem, data_dir


def test_dev_bleu_is_sacrebleu_of_the_first_lines_decoded_as_the_decoder_does(fixture_dev):
    """The first 4 dev examples in file order: their text decoded by `translate` and scored by sacrebleu."""
    problem, data_dir = fixture_dev
    model, vocabulary = restored_model()
    settings = DecodeHParams.of(beam_size=2, alpha=0.6, batch_size=3)
    examples = read_records(tf.io.gfile.glob(problem.filepattern(data_dir, "dev"))[0])[:4]
    sources = [vocabulary.decode(inputs) for inputs, _ in examples]
    references = [vocabulary.decode(targets) for _, targets in examples]
    hypotheses = [t.hypotheses[0] for t in translate(model, vocabulary, sources, settings, progress=False)]
    expected = sacrebleu.corpus_bleu(hypotheses, [references]).score
    assert dev_bleu.DevBleu(problem, data_dir, settings, lines=4)(model) == {"bleu": pytest.approx(expected)}
    everything = dev_bleu.DevBleu(problem, data_dir, settings, lines=1000)
    assert len(everything.references) == len(SOURCES)  # more lines than the split has: all of them
    with pytest.raises(ValueError, match="--eval_bleu_lines=0: must be at least 1"):
        dev_bleu.DevBleu(problem, data_dir, settings, lines=0)


def test_the_trainer_keeps_its_best_checkpoint_by_dev_bleu(reverse_data, tmp_path):
    """t2t-trainer --eval_early_stopping_metric=bleu: each evaluation logs the dev BLEU of --eval_bleu_lines lines
    (maximized), and best.json holds the highest."""
    output_dir = str(tmp_path / "run")
    run_cli(
        [
            "--problem=algorithmic_reverse",
            "--hparams_set=transformer_tiny",
            f"--hparams={SMALL}",
            f"--data_dir={reverse_data}",
            f"--output_dir={output_dir}",
            "--train_steps=4",
            "--local_eval_frequency=2",
            "--eval_steps=1",
            "--eval_early_stopping_metric=bleu",
            "--eval_bleu_lines=8",
            "--decode_hparams=beam_size=1",
        ]
    )
    bleu = logged_scalars(os.path.join(output_dir, "eval"), "bleu")
    assert sorted(bleu) == [2, 4]
    record = json.load(open(os.path.join(output_dir, "best", "best.json")))
    best_step = max(sorted(bleu), key=lambda step: (bleu[step], -step))
    assert record["metric"] == "bleu" and record["step"] == best_step
    assert record["value"] == pytest.approx(bleu[best_step], rel=1e-6)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--schedule=train", "--eval_early_stopping_steps=10"], "--eval_early_stopping_\\* with --schedule=train"),
        (["--eval_bleu_lines=0"], "--eval_bleu_lines=0: must be at least 1"),
        (["--schedule=evaluate", "--warm_start_from=x"], "--warm_start_from starts a run to train"),
        (["--eval_early_stopping_metric_delta=-1"], "both must be zero or positive"),
        # The dev decoding's settings are checked at the start, not at the first evaluation hours later.
        (
            ["--eval_early_stopping_metric=bleu", "--decode_hparams=sampling_method=random,sampling_keep_top_k=999"],
            "--decode_hparams: sampling_keep_top_k=999 is more than the model's",
        ),
        (["--eval_early_stopping_metric=bleu", "--decode_hparams=sampling_temp=0.5"], "sampling_temp has no effect"),
    ],
)
def test_early_stopping_flags_that_cannot_work_stop_before_any_work(reverse_data, tmp_path, argv, message):
    from t2t_lite.cli import flags

    base = [
        "--problem=algorithmic_reverse",
        "--hparams_set=transformer_tiny",
        f"--data_dir={reverse_data}",
        f"--output_dir={tmp_path / 'run'}",
    ]
    with pytest.raises(flags.UsageError, match=message):
        run_cli(base + argv)
    assert not os.path.exists(tmp_path / "run" / "hparams.json")
