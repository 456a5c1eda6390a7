"""Built-in problems; importing this package registers them."""

from t2t_lite.problems import (
    algorithmic,  # noqa: F401  (registers the problems)
    parsing_wsj,  # noqa: F401
    translate_files,  # noqa: F401
    translate_gettext,  # noqa: F401
    translate_wmt,  # noqa: F401
)
