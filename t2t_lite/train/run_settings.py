"""How one training run goes (§5): its length, evaluations, checkpoints, devices and seed — t2t-trainer's flags.

`RunSettings` is the one definition of each setting: a field with its type, default and help, from
which `t2t-trainer`'s flag is generated (`t2t_lite.cli.settings_flags`), with tensor2tensor's names
(`--train_steps`, `--local_eval_frequency`, `--eval_early_stopping_steps`, ...). The model is the
HParams' business; nothing here changes what a checkpoint's weights compute. Values out of range are
refused here, naming the flag, before any work.
"""

import dataclasses

from t2t_lite.hparam import setting
from t2t_lite.train.early_stopping import EarlyStopping

SCHEDULES = ("train", "evaluate", "train_and_evaluate")
MAX_RANDOM_SEED = 2**32 - 1  # numpy.random.seed's largest, which keras.utils.set_random_seed calls


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """How one run trains: its length, evaluations, checkpoints, devices and seed (t2t-trainer's flags)."""

    train_steps: int = setting(250000, "Optimizer updates to train for (the paper: 100,000 base, 300,000 big).")
    eval_steps: int = setting(100, "Dev batches per evaluation; 0 = the whole dev split.")
    local_eval_frequency: int = setting(1000, "Evaluate every this many steps (schedule train_and_evaluate).")
    save_checkpoints_steps: int = setting(1000, "Write a checkpoint every this many steps.")
    save_checkpoints_secs: int = setting(
        0,
        "If > 0, write a checkpoint every this many seconds instead of "
        "every --save_checkpoints_steps (§6.1's 10-minute checkpoints: 600).",
    )
    keep_checkpoint_max: int = setting(20, "Keep this many latest checkpoints (t2t-avg-all averages them).")
    schedule: str = setting(
        "train_and_evaluate",
        "train, evaluate (the latest checkpoint, once) or train_and_evaluate.",
        choices=SCHEDULES,
    )
    worker_gpu: int = setting(1, "Local GPUs to mirror the model on (MultiWorkerMirroredStrategy under TF_CONFIG).")
    random_seed: int = setting(1, "Seed of weight initialisation, dropout and the data order.")
    train_minutes: float = setting(0.0, "Stop after about this many minutes with a final checkpoint; 0 = no bound.")
    fit_train_steps_to_minutes: bool = setting(
        False,
        "Choose the step count (at most --train_steps) from the "
        "measured step time so that hparam learning_rate_decay_steps' decay ends within --train_minutes; "
        "the log names the count, which --train_steps replays on any host.",
    )
    warm_start_from: str = setting(
        None,
        "Start a new run in --output_dir from this checkpoint's model weights (a ckpt-N prefix, or a run "
        "directory: its latest); fresh optimizer, step counter and schedule. Same vocabulary and model.",
    )
    cluster_start_minutes: float = setting(
        15.0,
        "Under TF_CONFIG: stop if the workers have not all joined "
        "within this many minutes, naming those waited for; 0 = wait for ever.",
    )
    # The dev metric that chooses best/ and, with steps > 0, stops the run (its --eval_early_stopping_* flags).
    early_stopping: EarlyStopping = EarlyStopping()
    # Set by the shared flags --model and --checkpoint_path, or by the library's callers.
    model_name: str = "transformer"  # The registered model.
    checkpoint_path: str = None  # Resume from this earlier checkpoint of the run instead of the latest.
    summary_steps: int = 100  # A log line and TensorBoard scalars every this many steps.

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise ValueError(f"--schedule={self.schedule}: expected one of {', '.join(SCHEDULES)}.")
        for name in ("train_steps", "save_checkpoints_steps", "keep_checkpoint_max", "worker_gpu", "summary_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name}={getattr(self, name)}: must be at least 1.")
        for name in (
            "eval_steps",
            "local_eval_frequency",
            "train_minutes",
            "save_checkpoints_secs",
            "cluster_start_minutes",
        ):
            if not getattr(self, name) >= 0:  # NaN too
                raise ValueError(f"--{name}={getattr(self, name)}: must be zero or positive.")
        if not 0 <= self.random_seed <= MAX_RANDOM_SEED:
            raise ValueError(
                f"--random_seed={self.random_seed}: must be from 0 to {MAX_RANDOM_SEED} (2**32 - 1): it seeds numpy, "
                f"Python and TensorFlow at once, and numpy takes no other."
            )
        judged = self.early_stopping.steps or self.early_stopping.metric != EarlyStopping().metric
        if judged and self.schedule != "train_and_evaluate":
            raise ValueError(
                f"--eval_early_stopping_* with --schedule={self.schedule}: early stopping and best/ judge "
                f"evaluations during training; use --schedule=train_and_evaluate."
            )
        if self.warm_start_from and self.schedule == "evaluate":
            raise ValueError("--warm_start_from starts a run to train; --schedule=evaluate trains none.")
