"""Which transformer blocks each layer uses: the official sharing scheme and the paper's ablations.

A block is owned either by a group (`("group", g, k)`: shared by every layer that maps to group g,
inner position k) or by a single layer (`("layer", l, k)`: used once). The official layout is
`sharing="all"`: L layers draw on G groups of K inner layers, layer l using group
int(l / L * G). The ablations keep only attention or only the FFN shared across the group, and
`"none"` gives every layer its own blocks (BERT), named group_l as an official G = L checkpoint.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class SharingPlan:
  """attention_owners / ffn_owners: the distinct blocks, in order of first use.
  schedule: one (attention_index, ffn_index) per applied inner layer, L * K entries in order."""
  attention_owners: tuple
  ffn_owners: tuple
  schedule: tuple


def make_sharing_plan(config):
  """Builds the SharingPlan of an AlbertConfig."""
  attention_owners, ffn_owners, schedule = [], [], []
  index_of_attention, index_of_ffn = {}, {}
  for layer in range(config.num_hidden_layers):
    group = config.group_index(layer)
    for inner in range(config.inner_group_num):
      shared = ("group", group, inner)
      own = ("layer", layer, inner)
      attention_owner = shared if config.sharing in ("all", "attention", "none") else own
      ffn_owner = shared if config.sharing in ("all", "ffn", "none") else own
      for owner, owners, index in ((attention_owner, attention_owners, index_of_attention),
                                   (ffn_owner, ffn_owners, index_of_ffn)):
        if owner not in index:
          index[owner] = len(owners)
          owners.append(owner)
      schedule.append((index_of_attention[attention_owner], index_of_ffn[ffn_owner]))
  return SharingPlan(tuple(attention_owners), tuple(ffn_owners), tuple(schedule))


def owner_scope(owner):
  """The TF1 variable scope of a block owner below `bert/encoder/transformer/`.

  ("group", g, k) -> "group_g/inner_group_k" (the official names); ("layer", l, k) ->
  "layer_l/inner_group_k" (our extension for the partially shared ablations).
  """
  kind, index, inner = owner
  return f"{kind}_{index}/inner_group_{inner}"
