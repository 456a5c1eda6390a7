"""The t2t-* command-line tools: each module parses absl flags and calls one library function."""
