"""scalars.write_scalars: events TensorBoard's Scalars tab reads (scalar plugin tag, value, step)."""

import glob

import pytest
import tensorflow as tf

from t2t_lite.run_dir.scalars import write_scalars


def test_scalars_are_written_as_tensorboard_reads_them(tmp_path):
    write_scalars(tf.summary.create_file_writer(str(tmp_path)), 7, {"loss": 2.5, "learning_rate": 1e-3})
    found = {}
    for path in glob.glob(str(tmp_path / "events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                assert value.metadata.plugin_data.plugin_name == "scalars"
                found[value.tag] = (event.step, float(tf.make_ndarray(value.tensor)))
    assert found == {"loss": (7, 2.5), "learning_rate": (7, pytest.approx(1e-3))}
