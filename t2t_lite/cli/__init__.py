"""The t2t-* command-line tools: each module parses absl flags and calls one library function.

`entry_points` holds the commands' entry points (bin/ and the installed console scripts): each
prepares the tool's process (`tool_process.prepare`: quiet stderr, oneDNN kernels) and only then
imports its tool's module, and TensorFlow with it. Importing any module of this package changes
nothing of the process: no environment variable, no import hook, no forked process.
"""
