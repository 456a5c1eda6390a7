"""Serving: the raw-text SavedModel for TF Serving, its warm-up requests and its XLA shape buckets."""
