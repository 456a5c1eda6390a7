"""TF Serving's warm-up file: read back with TF Serving's own protos (tensorflow-serving-api, the [serving]
extra), it holds a request of every bucket shape for both signatures, and replaying it in a fresh process
that imports only TensorFlow, tensorflow-text and TF Serving's protos does the XLA compilations, so that
requests after it are served without any."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from test_export import DECODE, setup, xla_version_dir  # noqa: F401  (the module's trained model and its exports)

from t2t_lite.serve import export, serving_warmup, xla_buckets

prediction_log_pb2 = pytest.importorskip(
    "tensorflow_serving.apis.prediction_log_pb2", reason="tensorflow-serving-api (pip install -e .[serving])"
)


def test_prediction_log_encoding_parses_as_tf_serving_builds_it():
    inputs = {"inputs": np.array([b"Hallo Welt", "grün".encode()], object), "lengths": np.array([[3, 1]], np.int32)}
    ours = prediction_log_pb2.PredictionLog.FromString(serving_warmup.prediction_log("translate_ids", inputs))
    theirs = prediction_log_pb2.PredictionLog()
    theirs.predict_log.request.model_spec.signature_name = "translate_ids"
    for name, value in inputs.items():
        theirs.predict_log.request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    assert ours == theirs and ours.WhichOneof("log_type") == "predict_log"
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True)


def test_more_than_tf_servings_limit_is_refused(tmp_path):
    with pytest.raises(ValueError, match="at most 1000"):
        serving_warmup.write_warmup_requests(
            str(tmp_path), [("serving_default", {"inputs": np.array([b""], object)})] * 1001
        )
    assert not os.path.exists(tmp_path / serving_warmup.WARMUP_FILE)


@pytest.mark.parametrize("xla", [False, True])
def test_requests_cover_every_bucket_of_both_signatures(xla, setup, request):  # noqa: F811
    version_dir = request.getfixturevalue("xla_version_dir") if xla else setup["version_dir"]
    lengths = xla_buckets.length_buckets(DECODE["max_input_length"])
    # max_input_length 10: one length bucket, 16; max_batch_size 8: batch buckets 1, 4, 8. The plain export's
    # graph takes any shape; its warm-up takes the same batch sizes at the first length bucket.
    assert lengths == (16,) and DECODE["max_batch_size"] == 8
    shapes = [(1, 16), (4, 16), (8, 16)]
    with open(os.path.join(version_dir, "assets", export.EXPORT_CONFIG_FILE)) as file:
        assert [tuple(shape) for shape in json.load(file)["warmup_requests"]["shapes"]] == shapes
    found = {}
    for predict in serving_warmup.read_warmup_requests(version_dir):
        signature = predict.model_spec.signature_name
        values = tf.make_ndarray(predict.inputs["inputs"])
        if signature == "serving_default":
            ids = [setup["vocab"].encode(text.decode("utf-8")) + [1] for text in values]
        else:
            ids = [row[row > 0].tolist() for row in values]
        # The bucket an input falls in: the first length bucket that holds its ids (EOS included).
        bucket = min(length for length in lengths if max(map(len, ids)) <= length)
        found.setdefault(signature, []).append((len(values), bucket))
    assert found == {"serving_default": shapes, "translate_ids": shapes}


# Runs in a fresh interpreter without the project, as TF Serving loads a model: replay, then serve.
REPLAY_THEN_SERVE = r"""
import json, sys, time
sys.modules["t2t_lite"] = None
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401
from tensorflow_serving.apis import prediction_log_pb2

version_dir = sys.argv[1]
loaded = tf.saved_model.load(version_dir)
requests = [prediction_log_pb2.PredictionLog.FromString(record).predict_log.request for record in
            tf.data.TFRecordDataset(version_dir + "/assets.extra/tf_serving_warmup_requests").as_numpy_iterator()]

def call(request, inputs):
    start = time.perf_counter()
    loaded.signatures[request.model_spec.signature_name](inputs=tf.constant(inputs))
    return time.perf_counter() - start

replay = [call(request, tf.make_ndarray(request.inputs["inputs"])) for request in requests]
rng = np.random.default_rng(0)
served = []
for request in requests:  # new ids of the same shapes; the text requests again
    inputs = tf.make_ndarray(request.inputs["inputs"])
    if inputs.dtype != object:  # ids 3-258 are the byte pieces every vocabulary has
        inputs = np.where(inputs > 1, rng.integers(3, 259, size=inputs.shape), inputs).astype(np.int32)
    served.append(call(request, inputs))
print(json.dumps({"signatures": [r.model_spec.signature_name for r in requests], "replay": replay, "served": served}))
"""


def test_replay_compiles_every_bucket_before_any_client_request(xla_version_dir, tmp_path):  # noqa: F811
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    process = subprocess.run(
        [sys.executable, "-c", REPLAY_THEN_SERVE, xla_version_dir],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    times = json.loads(process.stdout.strip().splitlines()[-1])
    first_of_each_shape = [
        seconds for seconds, signature in zip(times["replay"], times["signatures"]) if signature == "serving_default"
    ]  # the text request of a shape comes first
    # A compilation of the tiny model's search takes seconds; a compiled call, milliseconds. Every request
    # after the replay must be far from paying one, whatever the machine's load.
    assert max(times["served"]) < min(first_of_each_shape) / 4, times
