"""The command-line layer: every absl flag under albert_tf/ and flags -> typed configs.

  command            how every command runs: parsing, output-path checks, one-line errors
  training_flags     the groups both training families share: the model, the runtime
  pretraining_flags  run_pretraining.py, create_pretraining_data.py: flags -> configs
  finetuning_flags   run_classifier.py, run_race.py, run_squad*.py: their groups, flags -> configs
  export             export_savedmodel.py's flags
  convert, build_corpus, make_pair_task, query_savedmodel, train_spm
                     the commands, each run only as `python -m albert_tf.cli.<command>` (its
                     flags, its main and its `if __name__ == "__main__":` block)
"""
