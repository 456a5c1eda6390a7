"""bench/alignment_layers.py: the anchor words it trusts and the share it reports."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import alignment_layers  # noqa: E402


def test_anchors_are_words_written_once_on_each_side_with_a_letter_or_digit():
    source = 'Could not open "%s" : the file %s is 2 MB , 2 too many'
    target = "Datei %s ist 2 MB groß : %s konnte nicht geöffnet werden"
    # "%s" twice in the target, "2" twice in the source, ":" no letter: none of them is an anchor.
    assert alignment_layers.anchors(source, target) == {4: 10}  # MB


def test_the_share_counts_anchors_linked_to_their_twin_over_all_pairs():
    pair_anchors = [{0: 2, 3: 1}, {1: 0}, {}]
    links = ["2-0 0-1 1-2 0-3", "0-0 0-1", ""]
    assert alignment_layers.anchor_share(pair_anchors, links) == 2 / 3
    assert alignment_layers.anchor_share([{}], [""]) == 0.0
