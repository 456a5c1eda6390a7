"""The layers and the model use only keras.ops, so they run under any Keras backend (issue: no tf.*)."""

import ast
import pathlib

import t2t_lite

MODEL_MODULES = ["attention", "feed_forward", "embedding", "positional", "sublayer", "encoder", "decoder", "models"]
ALLOWED_TOP_LEVEL = {"keras", "t2t_lite", "math"}


def imported_packages(module):
    tree = ast.parse((pathlib.Path(t2t_lite.__file__).parent / f"{module}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module.split(".")[0]


def test_model_modules_import_only_keras():
    for module in MODEL_MODULES:
        outside = set(imported_packages(module)) - ALLOWED_TOP_LEVEL
        assert not outside, f"t2t_lite/{module}.py imports {outside}; layers must use keras.ops only"
