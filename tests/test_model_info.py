"""The records beside the checkpoints (hparams.json, problem.json): a damaged one is named, with its field,
by every tool that reads it, before any work and before anything is written."""

import json
import os

import pytest
import tensorflow as tf
from absl import flags as absl_flags

from t2t_lite import registry
from t2t_lite.cli import t2t_avg_all, t2t_decoder, t2t_exporter, t2t_insights, t2t_trainer, t2t_translate_all
from t2t_lite.data import datagen
from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.run_dir import checkpoints, model_info

SMALL = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1"


def write_records(model_dir, hparams_text):
    """A run's records as t2t-trainer writes them, then hparams.json replaced by `hparams_text`."""
    hparams = registry.hparams("transformer_tiny").override(SMALL)
    model_info.write_model_info(str(model_dir), hparams, "algorithmic_reverse", "transformer", 22, "symbols:20")
    (model_dir / model_info.HPARAMS_FILE).write_text(hparams_text)


@pytest.mark.parametrize(
    "text, field",
    [
        ("{not json", r"not JSON \(Expecting property name"),
        ("[32, 64]", "holds an array, not a JSON object"),
        ('{"hidden_size": "big"}', 'hparam hidden_size="big": expected a whole number'),
        ('{"hidden_size": 128.5}', "hparam hidden_size=128.5: expected a whole number"),
    ],
)
def test_a_damaged_hparams_json_is_named_with_its_field(tmp_path, text, field):
    write_records(tmp_path, text)
    with pytest.raises(checkpoints.CheckpointError, match=f"{tmp_path}/hparams.json: {field}.*restore it from a copy"):
        model_info.read_hparams(str(tmp_path))


@pytest.mark.parametrize("text, what", [("", "not JSON"), ('["algorithmic_reverse"]', "not a JSON object")])
def test_a_damaged_problem_json_is_named(tmp_path, text, what):
    write_records(tmp_path, registry.hparams("transformer_tiny").to_json())
    (tmp_path / model_info.PROBLEM_FILE).write_text(text)
    with pytest.raises(checkpoints.CheckpointError, match=f"{tmp_path}/problem.json: {what}"):
        model_info.check_trained_with(str(tmp_path), "algorithmic_reverse", "transformer", 22)


@pytest.fixture
def damaged_run(tmp_path):
    """A model directory with a checkpoint and an hparams.json holding a string for an int, and a tiny data_dir."""
    model_dir, data_dir = tmp_path / "train", tmp_path / "data"
    model_dir.mkdir()
    data_dir.mkdir()
    recorded = json.loads(registry.hparams("transformer_tiny").to_json())
    write_records(model_dir, json.dumps(dict(recorded, hidden_size="big")))
    checkpoints.checkpoint_manager(tf.train.Checkpoint(step=tf.Variable(2)), str(model_dir), 2).save(2)
    for path in datagen.shard_filenames(str(data_dir), "algorithmic_reverse", "train", 1):
        with tf.io.TFRecordWriter(path) as writer:
            writer.write(datagen.example_proto([3, 4, EOS_ID], [4, 3, EOS_ID]))
    (tmp_path / "source.txt").write_text("3 4\n")
    return tmp_path


TOOLS = {
    "t2t-decoder": (
        t2t_decoder,
        "--output_dir={root}/train --decode_from_file={root}/source.txt --decode_to_file={root}/out",
    ),
    "t2t-exporter": (t2t_exporter, "--output_dir={root}/train --export_dir={root}/export"),
    "t2t-avg-all": (t2t_avg_all, "--model_dir={root}/train --output_dir={root}/avg"),
    "t2t-trainer": (t2t_trainer, "--hparams_set=transformer_tiny --output_dir={root}/train --schedule=train"),
    "t2t-translate-all": (
        t2t_translate_all,
        "--model_dir={root}/train --source={root}/source.txt --translations_dir={root}/tr",
    ),
    "t2t-insights": (t2t_insights, "--output_dir={root}/train"),
}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_tool_that_reads_hparams_json_stops_naming_it_and_the_field(damaged_run, tool):
    module, argv = TOOLS[tool]
    argv = argv.format(root=damaged_run).split()
    if tool != "t2t-avg-all":
        argv += ["--problem=algorithmic_reverse", f"--data_dir={damaged_run}/data"]
    before = sorted(os.listdir(damaged_run / "train"))
    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS([tool] + argv)
    try:
        with pytest.raises(Exception) as error:
            module.main([])
    finally:
        absl_flags.FLAGS.unparse_flags()
    assert "UsageError" in type(error.value).__name__, error.value  # absl prints it in one line, exit 1
    assert str(error.value).startswith(f'{damaged_run}/train/hparams.json: hparam hidden_size="big": expected a whole')
    assert sorted(os.listdir(damaged_run / "train")) == before  # nothing written
    for output in ("out", "avg", "tr", "export"):  # the tools' outputs: none, or an empty directory
        path = damaged_run / output
        assert not path.exists() or (path.is_dir() and not os.listdir(path)), output
