"""t2t-make-tf-configs: the TF_CONFIG of every task of a multi-machine run, as tensor2tensor's tool.

    t2t-make-tf-configs --workers=host1:2222,host2:2222 [--chief=host0:2222]

Prints one line per task, a shell command to run on that host before t2t-trainer:

    export TF_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 0}}'  # worker 0 on host1:2222
"""

import json

from absl import flags as absl_flags

from t2t_lite.cli import flags
from t2t_lite.train import tf_config

FLAGS = flags.FLAGS

absl_flags.DEFINE_string("workers", None, "Comma-separated host:port of every worker, e.g. host1:2222,host2:2222.")
absl_flags.DEFINE_string(
    "chief", "", "host:port of a chief task (it trains too, and alone saves); default: worker 0 is the chief."
)


def main(argv):
    del argv
    flags.prepare()
    flags.require("workers")
    try:
        configs = tf_config.one_per_task(FLAGS.workers, FLAGS.chief)
    except ValueError as error:
        raise flags.UsageError(str(error)) from None
    for task_type, index, address, config in configs:
        print(f"export TF_CONFIG='{json.dumps(config)}'  # {task_type} {index} on {address}")
