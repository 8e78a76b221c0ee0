"""The tasks: each owns its inputs, model, losses, metrics, evaluation, predictions and export.

  base.Task                      the interface the trainer and the runner drive
  pretraining.PretrainingTask    masked LM + sentence order (run_pretraining.py)
  glue.ClassificationTask        GLUE classification / STS-B regression, or your own data
                                 (run_classifier.py)
  race.RaceTask                  RACE multiple choice (run_race.py)
  squad.SquadTask                SQuAD v1.1 / v2.0 (run_squad.py)
"""
