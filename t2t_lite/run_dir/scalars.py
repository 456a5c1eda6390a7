"""TensorBoard scalars (`tensorboard --logdir=OUTPUT_DIR`), written with TensorFlow's core summary op.

Not the paper: how the trainer's loss and learning rate, the dev metrics and t2t-bleu's scores per
checkpoint reach TensorBoard without the tensorboard package installed.
"""

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

# TensorBoard's scalar-plugin tag, so that its Scalars tab shows what tf.summary.write wrote.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()


def write_scalars(writer, step: int, values: dict) -> None:
    """values {tag: number} at `step`, flushed at once so that a running TensorBoard sees them."""
    with writer.as_default(step=step):
        for name, value in values.items():
            tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)
    writer.flush()
