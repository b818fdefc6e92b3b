"""The final challenge (06_final_challenge): the rules, a harness that judges any run the same way, and the ladder
of the course's changes up to the reference solution."""
