"""The layers and the model use only keras.ops, so they run under any Keras backend (issue: no tf.*)."""

import ast
import pathlib

import t2t_lite

MODEL_MODULES = [
    "attention",
    "dropout",
    "feed_forward",
    "embedding",
    "positional",
    "relative_position",
    "sublayer",
    "encoder",
    "decoder",
    "transformer",
]
ALLOWED_TOP_LEVEL = {"keras", "t2t_lite", "math"}


def module_tree(module):
    return ast.parse((pathlib.Path(t2t_lite.__file__).parent / "model" / f"{module}.py").read_text())


TENSORFLOW_ONLY = {"compiled_by_xla", "replica_in_sync"}


def _is_tensorflow_only_branch(node):
    """dropout's compiled_by_xla and replica_in_sync ask TensorFlow (XLA tracing? which replica?)
    after checking the backend."""
    return isinstance(node, ast.FunctionDef) and node.name in TENSORFLOW_ONLY


def imported_packages(module):
    yield from _imports_outside_tensorflow_branch(module_tree(module))


def _imports_outside_tensorflow_branch(tree):
    for node in ast.iter_child_nodes(tree):
        if _is_tensorflow_only_branch(node):
            continue
        yield from _imports_outside_tensorflow_branch(node)
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module.split(".")[0]


def test_model_modules_import_only_keras():
    for module in MODEL_MODULES:
        outside = set(imported_packages(module)) - ALLOWED_TOP_LEVEL
        assert not outside, f"t2t_lite/model/{module}.py imports {outside}; layers must use keras.ops only"


def test_the_tensorflow_imports_are_guarded_by_the_backend():
    functions = [node for node in ast.walk(module_tree("dropout")) if _is_tensorflow_only_branch(node)]
    assert {function.name for function in functions} == TENSORFLOW_ONLY
    for function in functions:
        source = ast.unparse(function)
        assert source.index("backend != 'tensorflow'") < source.index("import tensorflow")
