"""The final challenge (06_final_challenge): the rules, a harness that judges any run the same way, the ladder of the
course's changes up to the reference solution, and the learner's own training function judged by its time to an
accuracy target (:mod:`.to_target`, with the training set it hands out counted: :mod:`.training_data`)."""
