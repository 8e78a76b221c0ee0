"""The sharing plan: which blocks each applied layer uses, for the official layout and ablations."""

from albert_tf.config import AlbertConfig
from albert_tf.networks.sharing import make_sharing_plan, owner_scope


def _config(**kwargs):
  return AlbertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, intermediate_size=8,
                      **kwargs)


def test_official_groups_and_inner_layers():
  plan = make_sharing_plan(_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2))
  assert plan.attention_owners == plan.ffn_owners == (
      ("group", 0, 0), ("group", 0, 1), ("group", 1, 0), ("group", 1, 1))
  # L * K applied inner layers: layers 0-1 run group 0's two inner layers, layers 2-3 group 1's.
  assert plan.schedule == ((0, 0), (1, 1), (0, 0), (1, 1), (2, 2), (3, 3), (2, 2), (3, 3))
  assert [owner_scope(o) for o in plan.attention_owners] == [
      "group_0/inner_group_0", "group_0/inner_group_1", "group_1/inner_group_0",
      "group_1/inner_group_1"]


def test_default_is_one_layer_used_l_times():
  plan = make_sharing_plan(_config(num_hidden_layers=12))
  assert plan.attention_owners == plan.ffn_owners == (("group", 0, 0),)
  assert plan.schedule == ((0, 0),) * 12


def test_ablations_share_only_one_half():
  attention_only = make_sharing_plan(_config(num_hidden_layers=3, sharing="attention"))
  assert attention_only.attention_owners == (("group", 0, 0),)
  assert attention_only.ffn_owners == (("layer", 0, 0), ("layer", 1, 0), ("layer", 2, 0))
  assert attention_only.schedule == ((0, 0), (0, 1), (0, 2))
  assert owner_scope(attention_only.ffn_owners[2]) == "layer_2/inner_group_0"
  ffn_only = make_sharing_plan(_config(num_hidden_layers=3, sharing="ffn"))
  assert len(ffn_only.attention_owners) == 3 and ffn_only.ffn_owners == (("group", 0, 0),)
  unshared = make_sharing_plan(_config(num_hidden_layers=3, sharing="none"))
  assert unshared.attention_owners == unshared.ffn_owners == (
      ("group", 0, 0), ("group", 1, 0), ("group", 2, 0))  # named as an official G = L model


def test_float_group_rule_leaves_a_group_unused():
  # Official int(l / L * G) in floating point: for L = G = 22, layer 15 maps to group 14.
  plan = make_sharing_plan(_config(num_hidden_layers=22, num_hidden_groups=22))
  groups = [owner[1] for owner in plan.attention_owners]
  assert len(groups) == 21 and 15 not in groups
  assert plan.schedule[14] == plan.schedule[15]
