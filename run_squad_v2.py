"""ALBERT on SQuAD v2.0: the official run_squad_v2.py command line, unchanged.

A thin entry point of run_squad.py with the v2 head (start, start-conditioned end beam and
answerability) fixed, as the official script; every flag is run_squad.py's (official names and defaults).
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

import run_squad  # pylint: disable=g-import-not-at-top,g-bad-import-order

if __name__ == "__main__":
  run_squad.run(version_2_with_negative=True)
