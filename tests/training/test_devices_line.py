"""The start-up line naming what runs the steps (runner.devices_line): the default strategy and
a MirroredStrategy over logical devices (8 logical CPU devices run in test_remote_storage)."""

import tensorflow as tf

from albert_tf.training import runner


def test_default_strategy_names_the_default_device():
  assert runner.devices_line(tf.distribute.get_strategy()) == (
      "devices: no distribution strategy, 1 replica on 1 x CPU")


def test_one_device_strategy():
  line = runner.devices_line(tf.distribute.OneDeviceStrategy("/cpu:0"))
  assert line == "devices: OneDeviceStrategy, 1 replica on 1 x CPU"
