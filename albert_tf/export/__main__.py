"""`python -m albert_tf.export ...`: same as export_savedmodel.py."""

from absl import app

from albert_tf.errors import run_main
from albert_tf.export import cli

if __name__ == "__main__":
  app.run(run_main(cli.main))
