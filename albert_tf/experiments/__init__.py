"""Reproducing the paper's measured claims: experiments as sets of resumable pretraining arms, and their report.

`reproduce.run_reproduction` prepares the data (data_gen), trains and evaluates every arm through
albert_tf.tasks.pretraining (`runner`), and writes REPORT.md, results.json and the plots (`report`).
"""
