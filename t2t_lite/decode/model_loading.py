"""What a decoder loads from a run directory: the hparams it was trained with, and the model they build.

The hparams come from `--hparams_set` (+ `--hparams`) when given, else from the `hparams.json`
the trainer wrote beside the checkpoints (`t2t_lite.run_dir.model_info`); the model is restored
from a checkpoint, sized by the problem's vocabulary and checked against it, and its products
quantized for decoding if asked (`t2t_lite.decode.quantization`).
"""

from t2t_lite import registry
from t2t_lite.decode import quantization
from t2t_lite.run_dir import model_info


def load_hparams(hparams_set: str, overrides: str, model_dir: str):
    """--hparams_set (+ --hparams) if given, else the hparams.json the trainer wrote beside the checkpoints."""
    if hparams_set:
        return registry.hparams(hparams_set).override(overrides)
    return model_info.read_hparams(model_dir).override(overrides)


def load_model_for_decoding(
    problem, hparams, data_dir: str, checkpoint_path_or_dir: str, model_name: str = "transformer", quantize: str = ""
):
    """The model of `checkpoint_path_or_dir`, sized by the problem's vocabulary, its products quantized as asked."""
    vocabulary = problem.vocabulary(data_dir)
    model = model_info.restore_model(
        checkpoint_path_or_dir,
        hparams,
        vocabulary.vocab_size,
        model_name,
        problem.name,
        getattr(vocabulary, "fingerprint", None),
    )
    return quantization.quantize_for_decoding(model, quantize)
