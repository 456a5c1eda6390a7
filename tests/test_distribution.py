"""MirroredStrategy over two logical CPU devices gives the losses of one device for the same global batches."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from t2t_lite import distribution, registry

# Runs in a fresh process: the CPU must be split into two logical devices before TensorFlow starts.
SCRIPT = r"""
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from t2t_lite import checkpoints, distribution, input_pipeline, registry, trainer
from t2t_lite.schedule import adam_optimizer

data_dir, output_dir = sys.argv[1], sys.argv[2]
problem = registry.problem("algorithmic_reverse")
hparams = registry.hparams("transformer_tiny").override(
    "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,batch_size=128,"
    "learning_rate_warmup_steps=10,layer_prepostprocess_dropout=0")
global_batches = list(input_pipeline.batched_dataset(problem, "dev", data_dir, hparams, num_replicas=2).take(4))

def losses(worker_gpu, accumulate):
    keras.utils.set_random_seed(0)
    strategy = distribution.strategy_for(worker_gpu)
    with strategy.scope():
        model = checkpoints.build_model(hparams, problem.vocab_size(data_dir))
        optimizer = adam_optimizer(hparams)
        optimizer.build(model.trainable_variables)
    steps = trainer.StepFunctions(model, optimizer, hparams, strategy)
    if accumulate:
        steps.build_accumulators()
    batches = iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_generator(lambda: iter(global_batches), output_signature={
            name: tf.TensorSpec([None, None], tf.int32) for name in ("inputs", "targets")})))
    result = []
    for _ in range(2 if accumulate else 4):
        if accumulate:  # two micro-batches per update
            sums = steps.accumulate_step(next(batches)) + steps.accumulate_step(next(batches))
            steps.apply_step()
        else:
            sums = steps.train_step(next(batches))
        result.append(float(sums[0] / sums[2]))
    return result

report = {"replicas": distribution.strategy_for(2).num_replicas_in_sync,
          "one": losses(1, False), "two": losses(2, False),
          "one_accumulated": losses(1, True), "two_accumulated": losses(2, True)}
trainer.train_and_evaluate(problem, hparams.replace(tokens_per_step=512), data_dir, output_dir, train_steps=2,
                           eval_steps=1, worker_gpu=2, log=lambda message: None)
report["checkpoint"] = tf.train.latest_checkpoint(output_dir)
print("REPORT " + json.dumps(report))
"""


def test_two_replicas_match_one_device(tmp_path):
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    registry.problem("algorithmic_reverse").generate_data(data_dir, str(tmp_path))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", SCRIPT, data_dir, str(tmp_path / "train")], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.split("REPORT ", 1)[1])
    assert report["replicas"] == 2
    np.testing.assert_allclose(report["two"], report["one"], rtol=1e-4)
    np.testing.assert_allclose(report["two_accumulated"], report["one_accumulated"], rtol=1e-4)
    assert report["one"][-1] < report["one"][0]  # the updates did change the model
    assert report["checkpoint"].endswith("ckpt-2")  # the whole trainer runs mirrored, with accumulation


def test_worker_gpu_beyond_the_devices_names_the_flag():
    with pytest.raises(ValueError, match="--worker_gpu=64"):
        distribution.local_devices(64)


def test_tf_config_selects_multi_worker(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG"):
        distribution.strategy_for(1)
