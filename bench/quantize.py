"""What converting a built model's product weights for decoding costs (t2t_lite/decode/quantization.py).

    .venv/bin/python bench/quantize.py [--hparams_set=transformer_base] [--vocab_size=37000]

Builds `--hparams_set` with random weights (as after a restore), then times
`quantize_for_decoding` for each mode in a model of its own, counting the full (generation 2)
garbage collections that ran inside it. This is what t2t-decoder, t2t-exporter, t2t-insights
and t2t-translate-all add to loading a checkpoint with `--decode_hparams=quantize=...`.
Prints one JSON line per mode.
"""

import argparse
import gc
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from t2t_lite import registry  # noqa: E402
from t2t_lite.decode import quantization
from t2t_lite.run_dir import model_info


def convert(hparams_set: str, vocab_size: int, mode: str) -> dict:
    """Seconds (wall and CPU) and full collections of converting one freshly built model to `mode`."""
    model = model_info.build_model(registry.hparams(hparams_set), vocab_size)
    ids = np.ones([1, 5], "int32")
    model({"inputs": ids, "targets": ids}, training=False)  # built, as after a restore
    full = []

    def count(phase, info):
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(count)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        quantization.quantize_for_decoding(model, mode)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.callbacks.remove(count)
    return {
        "hparams_set": hparams_set,
        "mode": mode,
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "full_collections": len(full),
        "python_objects": len(gc.get_objects()),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hparams_set", default="transformer_base")
    parser.add_argument("--vocab_size", type=int, default=37000)
    args = parser.parse_args()
    for mode in ("int8", "bfloat16"):
        print(json.dumps(convert(args.hparams_set, args.vocab_size, mode)), flush=True)


if __name__ == "__main__":
    main()
