"""TF_CONFIG, TensorFlow's description of a multi-machine run: written once per task, read and checked by each.

    TF_CONFIG='{"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}}'

`one_per_task` writes every task's (t2t-make-tf-configs, as tensor2tensor's tool); `read` checks the
process' own before TensorFlow sees it. Plain JSON: the tool that writes them starts without TensorFlow.
"""

import json
import os

_TASK_TYPES = ("chief", "worker")  # MultiWorkerMirroredStrategy's: no parameter servers, no evaluator
_SEE_TOOL = "t2t-make-tf-configs writes one per task"


def one_per_task(workers: str, chief: str = "") -> list:
    """One `(task type, index, host, TF_CONFIG dict)` per task of the cluster, chief first.

    `workers` is "host:port,host:port,..."; `chief`, if given, is one more "host:port"
    that coordinates (saves checkpoints and summaries) and trains like the workers.
    Without it, worker 0 is the chief.
    """
    hosts = {"chief": [chief] if chief else [], "worker": [host for host in workers.split(",") if host]}
    if not hosts["worker"]:
        raise ValueError(f"--workers={workers!r}: give at least one host:port, e.g. --workers=host1:2222,host2:2222.")
    for flag, addresses in (("chief", hosts["chief"]), ("workers", hosts["worker"])):
        for address in addresses:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"--{flag}: {address!r} is not host:port (a port from 1 to 65535), e.g. host1:2222.")
    everyone = hosts["chief"] + hosts["worker"]
    repeated = sorted({address for address in everyone if everyone.count(address) > 1})
    if repeated:
        raise ValueError(
            f"{', '.join(repeated)} appears twice in --workers/--chief; each task needs its own host:port."
        )
    cluster = {task_type: addresses for task_type, addresses in hosts.items() if addresses}
    return [
        (task_type, index, address, {"cluster": cluster, "task": {"type": task_type, "index": index}})
        for task_type, addresses in cluster.items()
        for index, address in enumerate(addresses)
    ]


def read() -> dict:
    """TF_CONFIG as a dict ({} when unset), checked: what TensorFlow would misread or ignore stops here.

    A task that is not in its cluster would otherwise train alone, in silence, or fail deep
    inside TensorFlow's cluster resolver.
    """
    text = os.environ.get("TF_CONFIG")
    if not text:
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}); see tf.distribute.cluster_resolver.") from None
    if not isinstance(config, dict):
        raise ValueError(
            f"TF_CONFIG={text}: not a JSON object of the form "
            f'{{"cluster": {{"worker": ["host:port", ...]}}, "task": {{"type": "worker", "index": 0}}}} '
            f"({_SEE_TOOL})."
        )
    cluster, task = config.get("cluster", {}), config.get("task")
    jobs_ok = isinstance(cluster, dict) and all(
        job in _TASK_TYPES and isinstance(addresses, list) and all(isinstance(address, str) for address in addresses)
        for job, addresses in cluster.items()
    )
    if not jobs_ok or len(cluster.get("chief", [])) > 1:
        raise ValueError(
            f'TF_CONFIG\'s "cluster": {json.dumps(cluster)} must map "worker" (and optionally "chief", one '
            f'task) to a list of "host:port" strings; t2t-trainer runs no other task types ({_SEE_TOOL}).'
        )
    if not cluster and task is None:
        return config
    tasks = ", ".join(f'{{"type": "{job}", "index": {i}}}' for job in cluster for i in range(len(cluster[job])))
    task_type = task.get("type") if isinstance(task, dict) else None
    index = task.get("index", 0) if isinstance(task, dict) else None
    if task_type not in cluster or type(index) is not int or not 0 <= index < len(cluster[task_type]):
        given = f'"task": {json.dumps(task)} is not' if task is not None else 'has no "task", which must be'
        raise ValueError(
            f"TF_CONFIG {given} one of its cluster's tasks ({tasks or 'none'}): give each process its own "
            f"({_SEE_TOOL})."
        )
    return config


def is_multi_worker() -> bool:
    """Whether TF_CONFIG describes a cluster of more than one training task."""
    cluster = read().get("cluster", {})
    return len(cluster.get("worker", [])) + len(cluster.get("chief", [])) > 1


def own_task() -> tuple:
    """(the cluster {task type: [host:port, ...]}, this process' (task type, index)) of TF_CONFIG."""
    config = read()
    task = config.get("task", {})
    return config.get("cluster", {}), (task.get("type"), int(task.get("index", 0)))
