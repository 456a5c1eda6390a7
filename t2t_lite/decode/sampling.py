"""Sampling translations instead of searching for the best one (tensor2tensor's `sampling_method=random`).

At each step the next token is drawn from the model's distribution, sharpened or flattened by a
temperature T and optionally cut to the k most probable tokens:

    y_t ~ softmax(log p(· | y_<t, x) / T)   restricted to the top k (sampling_keep_top_k)

T → 0 is the argmax (greedy decoding); T = 1 with every token kept is the model's own
distribution, as back-translation at scale wants it (Edunov et al. 2018). Draws are stateless:
the seed, the sample's index and the step fix every draw, so the same seed gives the same samples
on a rerun, and another seed others. The score of a sample is its log-probability under the model
itself (untempered), with the length penalty as for greedy decoding.
"""

import dataclasses

import tensorflow as tf

# Draws of one sample and another must not share a stream: steps are counted below this stride.
_SAMPLE_STRIDE = 1 << 20


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How `greedy_search` picks tokens when it samples.

    `temperature` and `keep_top_k` shape the traced graph; `seed` and `sample` may be int32 tensors, so that a
    traced search takes them as arguments and one trace serves every seed and sample
    (`SearchSettings.sampling`, t2t_lite/decode/search_settings.py, makes it).
    """

    temperature: float = 1.0  # T: 0 is argmax; above 1 flatter, below 1 sharper than the model.
    keep_top_k: int = 0  # Draw among the k most probable tokens only; 0 = all of them.
    seed: int = 0  # With `sample`, fixes every draw.
    sample: int = 0  # Which of several samples per input this is.

    def choose(self, step_log_probs, step):
        """int32 [batch] tokens for float32 [batch, vocab] log-probabilities at decoding step `step`."""
        if self.temperature == 0:
            return tf.argmax(step_log_probs, axis=-1, output_type=tf.int32)
        logits = step_log_probs / self.temperature
        if self.keep_top_k > 0:
            kth_best = tf.math.top_k(logits, k=self.keep_top_k).values[:, -1:]
            logits = tf.where(logits < kth_best, -float("inf"), logits)
        sample = tf.cast(self.sample, tf.int32)
        seed = tf.stack([tf.cast(self.seed, tf.int32), sample * _SAMPLE_STRIDE + tf.cast(step, tf.int32)])
        return tf.random.stateless_categorical(logits, 1, seed=seed, dtype=tf.int32)[:, 0]
