"""bench/input_pipeline.py: one pass over generated data, its shapes and padding efficiency, as printed."""

import os
import re
import sys

import forkserver

from t2t_lite import registry
from t2t_lite.data import datagen

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "input_pipeline.py")


def generated_data(tmp_path):
    """translate_files data from 60 pairs of 2–12 words: lengths spread over several buckets."""
    raw, data = tmp_path / "raw", tmp_path / "data"
    raw.mkdir()
    source = [" ".join(["word"] * (2 + i % 11)) for i in range(60)]
    target = [" ".join(["Wort"] * (2 + (i * 7) % 11)) for i in range(60)]
    for split in ("train", "dev"):
        (raw / f"{split}.src").write_text("\n".join(source) + "\n", encoding="utf-8")
        (raw / f"{split}.tgt").write_text("\n".join(target) + "\n", encoding="utf-8")
    datagen.generate(registry.problem("translate_files"), str(data), str(raw))
    return data


def bench(data, *flags):
    result = forkserver.run(
        [sys.executable, SCRIPT, "--hparams_set=transformer_tiny", f"--data_dir={data}", *flags],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    counts = re.search(r"batches (\d+), examples (\d+), distinct batch shapes (\d+)", result.stdout)
    efficiency = re.search(r"padding efficiency \(both sides\): ([\d.]+)%", result.stdout)
    return [int(group) for group in counts.groups()], float(efficiency.group(1))


def test_reused_data_are_measured_as_they_are_and_xla_pads_them_to_one_shape_per_bucket(tmp_path):
    data = generated_data(tmp_path)
    (batches, examples, shapes), efficiency = bench(data)
    assert examples == 60 and 0 < efficiency <= 100
    (xla_batches, xla_rows, xla_shapes), xla_efficiency = bench(data, "--hparams=xla_compile=true")
    assert xla_batches == batches and xla_rows >= examples  # the same batches; rows of padding may be added
    assert xla_shapes <= shapes and xla_efficiency <= efficiency
