"""Built-in problems; importing this package registers them."""

from t2t_lite.problems import algorithmic  # noqa: F401  (registers the problems)
from t2t_lite.problems import parsing_wsj  # noqa: F401
from t2t_lite.problems import translate_files  # noqa: F401
from t2t_lite.problems import translate_gettext  # noqa: F401
from t2t_lite.problems import translate_wmt  # noqa: F401
