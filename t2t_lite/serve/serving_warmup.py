"""TF Serving's SavedModel warm-up file, `assets.extra/tf_serving_warmup_requests`.

When TF Serving loads a model it replays the requests of this file (a TFRecord of
`tensorflow.serving.PredictionLog` protos, at most 1,000) before it marks the version
available, so the graph's one-time work (function instantiation, kernel set-up, and for
the XLA export one compilation per bucket shape) is done at load time and no client
request pays for it.

The protos are encoded here from their field numbers, which the protobuf format keeps
stable (tensorflow_serving/apis/prediction_log.proto, predict.proto, model.proto), so
that exporting needs TensorFlow alone; the tensors inside are TensorFlow's own
`TensorProto`s. `replay` reads the file back with TF Serving's own classes
(`tensorflow-serving-api`, the `[serving]` extra), as the tests and bench/serve.py do.
"""

import os

import tensorflow as tf

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_REQUESTS = 1000  # TF Serving's limit on the records of a warm-up file

# Field numbers of the messages written (proto3, all length-delimited).
PREDICTION_LOG_PREDICT_LOG = 6
PREDICT_LOG_REQUEST = 1
PREDICT_REQUEST_MODEL_SPEC = 1
PREDICT_REQUEST_INPUTS = 2  # map<string, TensorProto>: repeated entries {key = 1, value = 2}
MODEL_SPEC_SIGNATURE_NAME = 3
MAP_ENTRY_KEY, MAP_ENTRY_VALUE = 1, 2


def prediction_log(signature_name: str, inputs: dict) -> bytes:
    """A serialized PredictionLog whose predict_log.request calls `signature_name` with `inputs` (name -> array)."""
    model_spec = _field(MODEL_SPEC_SIGNATURE_NAME, signature_name.encode("utf-8"))
    request = _field(PREDICT_REQUEST_MODEL_SPEC, model_spec)
    for name, value in sorted(inputs.items()):
        entry = _field(MAP_ENTRY_KEY, name.encode("utf-8")) + _field(
            MAP_ENTRY_VALUE, tf.make_tensor_proto(value).SerializeToString()
        )
        request += _field(PREDICT_REQUEST_INPUTS, entry)
    return _field(PREDICTION_LOG_PREDICT_LOG, _field(PREDICT_LOG_REQUEST, request))


def write_warmup_requests(saved_model_dir: str, requests) -> str:
    """Writes `[(signature_name, {input name: array})]` to the SavedModel's warm-up file; returns its path."""
    requests = list(requests)
    if len(requests) > MAX_REQUESTS:
        raise ValueError(f"{len(requests)} warm-up requests: TF Serving reads at most {MAX_REQUESTS}.")
    path = os.path.join(saved_model_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for signature_name, inputs in requests:
            writer.write(prediction_log(signature_name, inputs))
    return path


def read_warmup_requests(saved_model_dir: str) -> list:
    """The file's PredictRequests, parsed by TF Serving's own `PredictionLog` class (the [serving] extra)."""
    from tensorflow_serving.apis import prediction_log_pb2  # optional: pip install t2t_lite[serving]

    requests = []
    for record in tf.data.TFRecordDataset(os.path.join(saved_model_dir, WARMUP_FILE)).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog.FromString(record)
        requests.append(log.predict_log.request)
    return requests


def replay(loaded, requests) -> None:
    """Runs every PredictRequest through `loaded` (a `tf.saved_model.load` result), as TF Serving does at load."""
    for request in requests:
        signature = loaded.signatures[request.model_spec.signature_name or "serving_default"]
        signature(**{name: tf.make_ndarray(tensor) for name, tensor in request.inputs.items()})


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): key varint, length varint, payload."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
