"""The final challenge (06_final_challenge): the rules, a harness that judges any run the same way, the reference
solution, and the report."""
