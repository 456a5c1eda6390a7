"""Built-in hparam sets; importing this package registers them."""

from t2t_lite.hparams import transformer  # noqa: F401  (registers the sets)
