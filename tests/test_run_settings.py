"""t2t-trainer's settings (t2t_lite/train/run_settings.py): a value out of its range stops with its flag named."""

import numpy as np
import pytest

from t2t_lite.train.run_settings import RunSettings


@pytest.mark.parametrize("seed", [-1, 2**32, 2**64])
def test_a_random_seed_outside_numpys_range_is_refused_naming_the_flag(seed):
    # numpy.random.seed takes 0 .. 2**32 - 1 only, and keras.utils.set_random_seed seeds numpy too.
    with pytest.raises(ValueError, match=rf"^--random_seed={seed}: must be from 0 to 4294967295 \(2\*\*32 - 1\)"):
        RunSettings(random_seed=seed)


def test_the_ends_of_numpys_range_are_taken():
    for seed in (0, 2**32 - 1):
        np.random.seed(RunSettings(random_seed=seed).random_seed)  # numpy accepts what the settings accept
