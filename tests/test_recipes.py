"""The recipes behind the figures the README and docs/results.md state, pinned to those figures.

A figure is the result of a recipe: hparams set (every value), update count, seed, averaging,
data. The recipes are written here once, with the figure each was measured at; the scripts
that run them (quickstart.sh, bench/multi30k.sh), the hparams sets and the docs must all agree
with them. Changing a recipe without measuring it again, or a figure without its recipe, fails
here: re-measure, then change the recipe, the figure and the docs together.
"""

import os
import re
import subprocess

from t2t_lite import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The main job (README command one): what quickstart.sh runs, and the test sacreBLEU it scored.
QUICKSTART = {"HPARAMS": "transformer_quickstart", "STEPS": "1600", "SEED": "1", "SAVE_STEPS": "200"}
QUICKSTART_SET = {
    "hidden_size": 128,
    "filter_size": 512,
    "num_heads": 4,
    "num_hidden_layers": 2,
    "learning_rate": 0.6325,
    "learning_rate_warmup_steps": 400,
    "learning_rate_decay_steps": 600,
    "batch_size": 2048,
    "tokens_per_step": 0,
    "max_length": 128,
    "activation_dtype": "float32",
    "layer_prepostprocess_dropout": 0.0,
    "label_smoothing": 0.1,
}
# The catalogs, and so the data, differ with the packages installed: the test sacreBLEU per data digest
# (t2t-datagen prints it), which quickstart.sh states to the user before training and after scoring:
# the mean of one run per CPU type, as docs/results.md lists them, each within ±0.5 of it.
QUICKSTART_BLEU = {"419e6d7b9c29": "28.5", "d5ca1f33d0ed": "30.2"}

# The Multi30k recipe (bench/multi30k.sh's defaults) and its EN→DE val sacreBLEU per seed.
MULTI30K = {"HPARAMS_SET": "transformer_multi30k_small", "TRAIN_STEPS": "5841", "SEED": "1", "AVG_N": "1"}
MULTI30K_SET = {
    "hidden_size": 192,
    "filter_size": 768,
    "num_heads": 4,
    "num_hidden_layers": 3,
    "learning_rate": 1.0,
    "learning_rate_warmup_steps": 1000,
    "learning_rate_decay_steps": 2000,
    "batch_size": 2048,
    "activation_dtype": "float32",
    "layer_prepostprocess_dropout": 0.2,
    "label_smoothing": 0.1,
}
MULTI30K_BLEU = {1: "39.43", 2: "38.50", 3: "38.99"}
# EN→FR (TARGET=fr): the same set and update count, seeds 1 and 2.
MULTI30K_FR_BLEU = {1: "55.98", 2: "54.55"}


def read(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as file:
        return file.read()


def script_defaults(name):
    """NAME=value and NAME=${KNOB:-value} assignments of a shell script, as NAME -> value."""
    defaults = {}
    for name_, value in re.findall(r"^([A-Z_]+)=(\S+)$", read(name), re.MULTILINE):
        knob = re.fullmatch(r"\$\{[A-Z_]+:-([^}]*)\}", value)
        defaults[name_] = knob.group(1) if knob else value
    return defaults


def test_quickstart_runs_the_recipe_its_figure_was_measured_with():
    defaults = script_defaults("quickstart.sh")
    assert {name: defaults.get(name) for name in QUICKSTART} == QUICKSTART
    values = registry.hparams(QUICKSTART["HPARAMS"]).values()
    assert {name: values[name] for name in QUICKSTART_SET} == QUICKSTART_SET
    script = read("quickstart.sh")
    assert '--train_steps="$STEPS" --random_seed=$SEED --save_checkpoints_steps=$SAVE_STEPS' in script
    assert "--train_minutes" not in script  # a result that depends on the host's speed
    # The last checkpoint is decoded, scored and exported.
    assert script.count('--output_dir="$TRAIN"') == 3 and "t2t-avg-all" not in script


def quickstart_runs_per_host():
    """docs/results.md's runs of the main job as it ships (no kernel override): digest -> {host: test BLEU}."""
    updates = f"{int(QUICKSTART['STEPS']):,}"
    recipe = f"`{QUICKSTART['HPARAMS']}`, {updates} updates, seed {QUICKSTART['SEED']}, last; data "
    runs = {}
    for row in read("docs/results.md").splitlines():
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        data = re.fullmatch(re.escape(recipe) + r"`([0-9a-f]{12})`", cells[1]) if len(cells) > 3 else None
        if row.startswith("| gettext EN→DE |") and data:
            digest, host = data.group(1), cells[2]
            assert host not in runs.setdefault(digest, {}), f"two runs of {digest} on {host}: keep the latest"
            runs[digest][host] = float(re.match(r"\**([0-9.]+)", cells[3]).group(1))
    return runs


def test_quickstart_states_the_figure_of_the_data_it_generated():
    script = read("quickstart.sh")
    table = dict(re.findall(r"^  ([0-9a-f]{12})\) FIGURE=([0-9.]+);", script, re.MULTILINE))
    assert table == QUICKSTART_BLEU
    hosts = dict(re.findall(r"^  ([0-9a-f]{12})\) FIGURE=[0-9.]+; HOSTS=([0-9]+);", script, re.MULTILINE))
    assert hosts == {digest: str(len(runs)) for digest, runs in quickstart_runs_per_host().items()}
    assert f'if [ "$STEPS" != {QUICKSTART["STEPS"]} ]; then' in script
    assert script.count('echo "$EXPECT"') == 2  # before training and after scoring


def test_readme_and_results_state_the_quickstart_figures_with_their_recipe_and_data():
    readme = read("README.md")
    assert f"{int(QUICKSTART['STEPS']):,} updates" in readme
    runs = quickstart_runs_per_host()
    assert set(runs) == set(QUICKSTART_BLEU)
    for digest, bleu in QUICKSTART_BLEU.items():
        assert f"**{bleu}**" in readme and f"`{digest}`" in readme, digest
        assert f"| `{digest}` | **{bleu}** |" in read("docs/results.md"), digest
        scores = runs[digest].values()
        assert len(scores) >= 2, f"{digest}: measured on one CPU type only"
        # The stated figure is the mean of the CPU types' runs, and every run is within the ±0.5 promised.
        assert abs(sum(scores) / len(scores) - float(bleu)) <= 0.05, (digest, runs[digest])
        assert all(abs(score - float(bleu)) <= 0.5 for score in scores), (digest, runs[digest])
        for score in scores:
            assert f"{score:.2f}" in readme, (digest, score)


def test_multi30k_script_runs_the_recipe_its_figures_were_measured_with():
    defaults = script_defaults("bench/multi30k.sh")
    assert {name: defaults.get(name) for name in MULTI30K} == MULTI30K
    values = registry.hparams(MULTI30K["HPARAMS_SET"]).values()
    assert {name: values[name] for name in MULTI30K_SET} == MULTI30K_SET


def test_results_state_the_multi30k_figures_with_their_recipe():
    updates = f"{int(MULTI30K['TRAIN_STEPS']):,}"
    lines = read("docs/results.md").splitlines()
    for task, figures in (("EN→DE", MULTI30K_BLEU), ("EN→FR", MULTI30K_FR_BLEU)):
        rows = [line for line in lines if line.startswith(f"| {task} |")]
        for seed, bleu in figures.items():
            assert any(
                f"`{MULTI30K['HPARAMS_SET']}`, {updates} updates, seed {seed}" in row and bleu in row for row in rows
            ), (task, seed, rows)


def test_quickstart_refuses_a_time_bound_and_a_bad_update_count_before_any_work(tmp_path):
    """QUICKSTART_MINUTES would make the model depend on the host's speed: named, exit 2, nothing set up."""
    script = os.path.join(ROOT, "quickstart.sh")
    for knobs, message in (
        ({"QUICKSTART_MINUTES": "5"}, "quickstart.sh: QUICKSTART_MINUTES is not read: the main job trains a fixed"),
        ({"QUICKSTART_STEPS": "lots"}, "quickstart.sh: QUICKSTART_STEPS=lots: give the number of updates"),
    ):
        environment = {**os.environ, "T2T_WORK": str(tmp_path / "work"), **knobs}
        result = subprocess.run(["bash", script], env=environment, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and result.stderr.startswith(message), result.stderr
        assert not (tmp_path / "work").exists()
