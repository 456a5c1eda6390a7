"""The registry: problems, hparam sets and models by name, as tensor2tensor's.

    @registry.register_hparams
    def transformer_base(): return HParams(...)

    @registry.register_problem
    class TranslateEnde(Problem): ...        # registered as "translate_ende"

    registry.problem("translate_ende_rev")    # the reversed direction, tensor2tensor's `_rev`
    registry.hparams("transformer_base")
    registry.model("transformer")

The built-in problems and hparam sets register themselves when `t2t_lite.problems`
and `t2t_lite.hparams` are imported; the look-ups here import them on first use.
`import_usr_dir` imports a user's package whose decorators register more
(`--t2t_usr_dir`), after the built-ins, so a user's name that repeats a built-in one is the
user's mistake. A name registered twice stops with both places that register it (file:line);
a module of the package that raises on import stops with `UsrDirError` naming --t2t_usr_dir,
the module and the exception's first line.
"""

import difflib
import importlib
import inspect
import os
import re
import sys
import traceback

_PROBLEMS = {}
_HPARAMS = {}
_MODELS = {}

REVERSE_SUFFIX = "_rev"


class RegistryError(KeyError):
    """A name that is not registered, or registered twice."""

    def __str__(self):  # KeyError would quote the whole message.
        return self.args[0]


class UsrDirError(ImportError):
    """--t2t_usr_dir cannot be imported: which module, and what it raised."""


def default_name(obj) -> str:
    """CamelCase class names become snake_case, as tensor2tensor names problems."""
    name = obj.__name__
    name = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _register(table, kind, obj, name):
    name = name or default_name(obj)
    if name in table:
        raise RegistryError(
            f"{kind} {name!r} is registered twice: by {where(table[name])} and by {where(obj)}. "
            f"Rename one (@register_...(name='another_name'))."
        )
    table[name] = obj
    return obj


def where(obj) -> str:
    """`file:line` of the function or class `obj` (its module where the source cannot be found)."""
    try:
        return f"{_shown(inspect.getsourcefile(obj))}:{inspect.getsourcelines(obj)[1]}"
    except (OSError, TypeError):
        return getattr(obj, "__module__", None) or repr(obj)


def _shown(path: str) -> str:
    """A path relative to the working directory where it lies below it, else as it is."""
    relative = os.path.relpath(path)
    return path if relative.startswith(os.pardir) else relative


def _decorator(table, kind):
    def register(obj=None, name=None):
        if obj is None:  # used as @register(name="...")
            return lambda inner: _register(table, kind, inner, name)
        if isinstance(obj, str):  # used as @register("name")
            return lambda inner: _register(table, kind, inner, obj)
        return _register(table, kind, obj, name)

    return register


register_problem = _decorator(_PROBLEMS, "Problem")
register_hparams = _decorator(_HPARAMS, "Hparams set")
register_model = _decorator(_MODELS, "Model")


def _load_builtins():
    # Imported here, not at module top, because the built-ins import this module.
    importlib.import_module("t2t_lite.hparams")
    importlib.import_module("t2t_lite.problems")
    importlib.import_module("t2t_lite.model.transformer")


def _lookup(table, kind, name, list_flag):
    _load_builtins()
    if name in table:
        return table[name]
    close = difflib.get_close_matches(name, list(table), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise RegistryError(
        f"Unknown {kind} {name!r}.{hint} Run with --registry_help to list them all "
        f"({list_flag}: {', '.join(sorted(table)) or 'none registered'})."
    )


def problem(name: str):
    """Returns an instance of the registered problem; `name_rev` is the reversed direction."""
    if name.endswith(REVERSE_SUFFIX) and name not in _PROBLEMS:
        base = _lookup(_PROBLEMS, "problem", name[: -len(REVERSE_SUFFIX)], "problems")
        return base(was_reversed=True)
    return _lookup(_PROBLEMS, "problem", name, "problems")()


def problem_name(problem_class) -> str:
    """The name `problem_class` is registered under (its snake_case class name if it is not)."""
    for name, registered in _PROBLEMS.items():
        if registered is problem_class:
            return name
    return default_name(problem_class)


def hparams(name: str):
    """Returns the HParams of the registered set."""
    return _lookup(_HPARAMS, "hparams set", name, "hparams sets")()


def retired_note(name: str):
    """Why the registered hparams set `name` is retired and what replaces it, or None for a current set."""
    return getattr(_lookup(_HPARAMS, "hparams set", name, "hparams sets"), "retired", None)


def model(name: str):
    """Returns the registered model class."""
    return _lookup(_MODELS, "model", name, "models")


def list_problems() -> list:
    _load_builtins()
    return sorted(_PROBLEMS)


def list_hparams() -> list:
    _load_builtins()
    return sorted(_HPARAMS)


def list_models() -> list:
    _load_builtins()
    return sorted(_MODELS)


def help_string() -> str:
    """What `--registry_help` prints."""
    sections = [("Problems", list_problems()), ("Hparams sets", list_hparams()), ("Models", list_models())]
    lines = []
    for title, names in sections:
        lines.append(f"{title}:")
        lines.extend(f"  {name}" for name in names)
    lines.append(f"(Any problem also takes the suffix {REVERSE_SUFFIX!r} for the reverse direction.)")
    return "\n".join(lines)


def import_usr_dir(usr_dir: str) -> None:
    """Imports the Python package at `usr_dir` so its decorators register more (--t2t_usr_dir)."""
    if not usr_dir:
        return
    directory = os.path.abspath(os.path.expanduser(usr_dir)).rstrip(os.sep)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"--t2t_usr_dir={usr_dir}: no such directory.")
    if not os.path.exists(os.path.join(directory, "__init__.py")):
        raise FileNotFoundError(
            f"--t2t_usr_dir={usr_dir}: not a Python package; add an __init__.py that imports "
            f"the modules defining your problems and hparams sets."
        )
    _load_builtins()  # first, so that a user's name repeating a built-in one is reported as the user's
    parent, package = os.path.split(directory)
    sys.path.insert(0, parent)
    try:
        importlib.import_module(package)
    except RegistryError as error:
        raise UsrDirError(f"--t2t_usr_dir={usr_dir}: {error}") from None
    except Exception as error:  # the user's code: whatever it raises is named, not shown as a traceback
        raise UsrDirError(f"--t2t_usr_dir={usr_dir}: {_failure(error, directory, package)}") from None
    finally:
        sys.path.remove(parent)


def _failure(error: Exception, directory: str, package: str) -> str:
    """'importing <module> raised <Type>: <first line> (<file>:<line>)', the place the innermost in `directory`."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if _below(frame.filename, directory)]
    place = (frames[-1].filename, frames[-1].lineno) if frames else None
    if isinstance(error, SyntaxError) and error.filename and _below(error.filename, directory):
        place = (error.filename, error.lineno)
    module = package
    if place:
        relative = os.path.splitext(os.path.relpath(place[0], directory))[0].split(os.sep)
        module = ".".join([package] + [part for part in relative if part != "__init__"])
    summary = (str(error).strip().splitlines() or [""])[0][:300]
    at = f" ({_shown(place[0])}:{place[1]})" if place else ""
    return f"importing {module} raised {type(error).__name__}{': ' + summary if summary else ''}{at}"


def _below(path: str, directory: str) -> bool:
    return os.path.abspath(path).startswith(directory + os.sep)
