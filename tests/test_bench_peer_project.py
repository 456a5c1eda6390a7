"""bench/peer_project.py --savedmodel: the exported SavedModel decodes the peers' workload as the library does.

It runs the peers' protocol (their peer_common.py), so it needs the peers' harness, which is
not part of this repository: found beside the checkout as ../shared/peers, else skipped.
"""

import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path.insert(0, BENCH)
import compare_peers  # noqa: E402

PEERS_DIR = compare_peers.DEFAULT_PEERS_DIR


@pytest.mark.skipif(
    not os.path.isfile(os.path.join(PEERS_DIR, "peer_common.py")),
    reason=f"the peers' harness (not part of this repository) is not at {PEERS_DIR}",
)
def test_savedmodel_runs_every_hypothesis_to_30_tokens_and_equals_decode_batch():
    completed = subprocess.run(
        [
            sys.executable,
            os.path.join(BENCH, "peer_project.py"),
            "--peers_dir",
            PEERS_DIR,
            "--preset",
            "tiny",
            "--savedmodel",
            "--decode",
            "beam",
            "--decode-repeats",
            "1",
            "--decode-warmup",
            "0",
        ],
        capture_output=True,
        text=True,
        env=compare_peers.child_environment("t2t_lite-savedmodel", 2),
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    row = json.loads([line for line in completed.stdout.splitlines() if line.startswith("{")][-1])
    beam = row["decode"]["beam"]
    # 20 source ids + the EOS the signature appends + extra_length 9 = 30 tokens, none of them EOS,
    # and the SavedModel's graph picks exactly the hypotheses decode_batch picks on the same model.
    assert beam["out_tokens_per_sentence"] == {"min": 30, "max": 30}
    assert beam["check_equals_decode_batch"] == 1.0
    assert beam["beam_size"] == 4 and row["train"] is None and isinstance(row["savedmodel_xla"], bool)
