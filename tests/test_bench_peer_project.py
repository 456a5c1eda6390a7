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


needs_peers = pytest.mark.skipif(
    not os.path.isfile(os.path.join(PEERS_DIR, "peer_common.py")),
    reason=f"the peers' harness (not part of this repository) is not at {PEERS_DIR}",
)


def peer_project_row(label, *flags):
    """The JSON row of one bench/peer_project.py run at the tiny preset, one untimed-warm-up-free repeat."""
    completed = subprocess.run(
        [sys.executable, os.path.join(BENCH, "peer_project.py"), "--peers_dir", PEERS_DIR, "--preset", "tiny"]
        + list(flags)
        + ["--decode-repeats", "1", "--decode-warmup", "0"],
        capture_output=True,
        text=True,
        env=compare_peers.child_environment(label, 2),
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads([line for line in completed.stdout.splitlines() if line.startswith("{")][-1])


@needs_peers
def test_savedmodel_runs_every_hypothesis_to_30_tokens_and_equals_decode_batch():
    # translate_ids alone: the signature the row calls and checks; the others would be traced, saved and
    # loaded for nothing (test_export checks them all).
    row = peer_project_row(compare_peers.OURS_SAVEDMODEL, "--savedmodel", "--savedmodel_ids_only", "--decode", "beam")
    beam = row["decode"]["beam"]
    # 20 source ids + the EOS the signature appends + extra_length 9 = 30 tokens, none of them EOS,
    # and the SavedModel's graph picks exactly the hypotheses decode_batch picks on the same model.
    assert beam["out_tokens_per_sentence"] == {"min": 30, "max": 30}
    assert beam["check_equals_decode_batch"] == 1.0
    assert beam["beam_size"] == 4 and row["train"] is None and isinstance(row["savedmodel_xla"], bool)


@needs_peers
def test_the_converted_model_in_ctranslate2_decodes_the_peers_workload_as_decode_batch_does():
    """--ctranslate2 float32, greedy: the converted model runs every sentence to 30 tokens and picks the
    tokens t2t_lite's own greedy search picks (the conversion is exact; beam search differs by design)."""
    row = peer_project_row(compare_peers.OURS_CT2, "--ctranslate2", "float32", "--decode", "greedy")
    greedy = row["decode"]["greedy"]
    assert greedy["out_tokens_per_sentence"] == {"min": 30, "max": 30}
    assert greedy["check_equals_decode_batch"] == 1.0
    assert row["train"] is None and row["ctranslate2"]["compute_type_selected"] == "float32"
