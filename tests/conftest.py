"""Test-wide settings: quiet TensorFlow logs and the TensorFlow Keras backend."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
